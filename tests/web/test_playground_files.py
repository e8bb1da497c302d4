"""The playground's files (agentsvc_web/playground_ui.py): public, shipped in the
package, served with a strict Content-Security-Policy, left out of the OpenAPI
document, and written so that the policy holds (no inline script or style, no
eval, API data never parsed as HTML). The page itself is driven in a browser by
tests/e2e/test_playground.py."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from litestar.testing import TestClient

from agentsvc_web.app import create_app
from agentsvc_web.playground_ui import FILES, MARKDOWN_FILES
from agentsvc_web.settings import Settings

KEY = "ask_playground_web_0123456789abcdefghij"
CSP = re.compile(r"^default-src 'self'; script-src 'self'; style-src 'self'; ")
TYPES = {"js": "text/javascript", "css": "text/css", "html": "text/html"}


@pytest.fixture(scope="module")
def c() -> Iterator[TestClient[Any]]:
    settings = Settings(storage="memory", migrate_on_start=False, bootstrap_api_key=KEY)
    with TestClient(create_app(settings)) as client:
        yield client


def _strict(r: Any) -> None:
    csp = r.headers["content-security-policy"]
    assert CSP.match(csp), csp
    assert "unsafe-inline" not in csp
    assert "unsafe-eval" not in csp
    assert "frame-ancestors 'none'" in csp
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"] == "no-referrer"


@pytest.mark.parametrize("path", ["/playground", "/playground/"])
def test_the_page_is_public_and_strict(c: TestClient[Any], path: str) -> None:
    r = c.get(path)  # no credentials
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/playground/app.js">' in r.text
    _strict(r)


def test_every_file_the_page_loads_is_served_here_with_its_type(c: TestClient[Any]) -> None:
    html = c.get("/playground").text
    loaded = re.findall(r"""\b(?:src|href)="([^"]+)\"""", html)
    assert "/playground/app.css" in loaded
    for url in loaded:
        if url.startswith("data:"):
            continue
        assert url.startswith("/playground/"), url
        r = c.get(url)
        assert r.status_code == 200, url
        assert TYPES[url.rsplit(".", 1)[-1]] in r.headers["content-type"], url
        _strict(r)
    # the modules app.js imports, transitively (pages/*.js import ../dom.js)
    seen: set[str] = set()
    todo = ["app.js"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        r = c.get(f"/playground/{name}")
        assert r.status_code == 200, name
        assert "text/javascript" in r.headers["content-type"]
        here = posixpath.dirname(name)
        imports = re.findall(r"""^import .* from "(\.{1,2}/[a-z_/]+\.js)";$""", r.text, re.M)
        todo.extend(posixpath.normpath(posixpath.join(here, i)) for i in imports)
    assert {"app.js", "api.js", "chat.js", "dom.js", "charts.js", "observe.js"} <= seen
    assert {"markdown.js", "highlight.js"} <= seen  # markdown_files/, shared with the chat page
    assert {f"pages/{f.name}" for f in (FILES / "pages").glob("*.js")} <= seen


def test_an_unknown_file_is_the_error_body_under_the_same_policy(c: TestClient[Any]) -> None:
    r = c.get("/playground/nothing-here.js")
    assert r.status_code == 404
    assert r.json()["error"] == "NOT_FOUND"
    _strict(r)


def test_the_api_still_needs_a_key_and_has_no_policy_of_the_page(c: TestClient[Any]) -> None:
    r = c.get("/api/agents")
    assert r.status_code == 401
    assert "content-security-policy" not in r.headers
    assert c.get("/api/agents", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200


def test_the_playground_is_not_in_the_openapi_document(c: TestClient[Any]) -> None:
    doc = c.get("/schema/openapi.json").json()
    assert not [p for p in doc["paths"] if p.startswith("/playground")]


def test_the_files_keep_to_the_policy() -> None:
    """What the policy would block in a browser, found before a browser: inline
    script or style in the page, and ways of turning text into code or markup."""
    html = (FILES / "index.html").read_text()
    assert not re.search(r"<script(?![^>]*\bsrc=)", html), "inline script"
    assert "<style" not in html
    assert not re.search(r"\sstyle=", html)
    assert not re.search(r"\son[a-z]+=", html), "inline event handler"
    scripts = sorted([*FILES.rglob("*.js"), *MARKDOWN_FILES.glob("*.js")])
    assert scripts
    for script in scripts:
        text = script.read_text()
        for banned in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
            assert banned not in text, f"{script.name} uses {banned}"
        assert "new Function" not in text, script.name
        assert 'setAttribute("style"' not in text, script.name
        assert "console." not in text, f"{script.name} logs (the key must never reach a log)"


def test_the_files_are_package_data() -> None:
    """pyproject.toml ships every file of the folder in the wheel."""
    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    line = next(x for x in pyproject.splitlines() if x.startswith('"agentsvc_web" = '))
    patterns = re.findall(r'"(playground/[^"]+)"', line)
    for f in (f for f in FILES.rglob("*") if f.is_file()):
        inside = PurePosixPath(f.relative_to(FILES).as_posix())  # pages/index.js
        shipped = (PurePosixPath(p.split("/", 1)[1]) for p in patterns)
        assert any(len(s.parts) == len(inside.parts) and inside.match(str(s)) for s in shipped), (
            f"{inside} is not shipped"
        )
    # the Markdown renderer, served from its own folder
    shared = re.findall(r'"(markdown_files/[^"]+)"', line)
    for f in MARKDOWN_FILES.iterdir():
        assert any(f.match(p.split("/", 1)[1]) for p in shared), f"{f.name} is not shipped"
