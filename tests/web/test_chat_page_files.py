"""A published chat's page and widget (agentsvc_web/chat_page.py): the hosted page
is public with a policy that runs only this origin's script and lets only the
chat's sites frame it; its files load nothing and are shipped in the package; the
widget's script goes to the chat's sites only and carries its values as string
literals; nothing in the files turns text into markup or code. The page itself is
driven in a browser by tests/e2e/test_chat_widget.py."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

from agentsvc_web.app import create_app
from agentsvc_web.chat_page import FILES, page_csp, widget_script
from agentsvc_web.playground_ui import MARKDOWN_FILES
from agentsvc_web.settings import Settings

KEY = "ask_chat_page_web_0123456789abcdefghij"
AUTH = {"Authorization": f"Bearer {KEY}"}
WIDGET = Path(FILES.parent / "chat_widget" / "widget.js")


@pytest.fixture(scope="module")
def c() -> Iterator[TestClient[Any]]:
    settings = Settings(storage="memory", migrate_on_start=False, bootstrap_api_key=KEY)
    with TestClient(create_app(settings)) as client:
        yield client


@pytest.fixture(scope="module")
def slug(c: TestClient[Any]) -> str:
    agent = c.post("/api/agents", json={"name": "<b>Page</b>"}, headers=AUTH).json()["id"]
    name = f"page-{uuid.uuid4().hex[:8]}"
    body = {"slug": name, "title": "A </script> title", "allowedDomains": ["shop.example.com"]}
    assert c.post(f"/api/agents/{agent}/publish", json=body, headers=AUTH).status_code == 201
    return name


def test_the_hosted_page_is_public_and_strict(c: TestClient[Any], slug: str) -> None:
    r = c.get(f"/c/{slug}")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    csp = r.headers["content-security-policy"]
    assert csp == page_csp(("shop.example.com",))
    assert "frame-ancestors https://shop.example.com" in csp
    assert "unsafe-inline" not in csp
    assert "unsafe-eval" not in csp
    assert r.headers["referrer-policy"] == "no-referrer"
    assert r.headers["x-content-type-options"] == "nosniff"
    # the title is text: escaped, never markup
    assert "A &lt;/script&gt; title" in r.text
    assert "</script> title" not in r.text
    assert not re.search(r"<script(?![^>]*\bsrc=)", r.text), "inline script"
    assert "<style" not in r.text
    for path in re.findall(r'(?:src|href)="(/c/_/[^"]+)"', r.text):
        file = c.get(path)
        assert file.status_code == 200, path
        assert (
            file.headers["content-security-policy"] == "default-src 'none'; frame-ancestors 'none'"
        )
    assert c.get("/c/no-such-chat").status_code == 404


def test_the_widget_goes_to_the_chats_sites_only(c: TestClient[Any], slug: str) -> None:
    ok = c.get(f"/c/{slug}/widget.js", headers={"Referer": "https://shop.example.com/cart"})
    assert ok.status_code == 200
    assert ok.headers["content-type"].startswith("text/javascript")
    assert ok.headers["cross-origin-resource-policy"] == "cross-origin"
    assert f'"/c/{slug}"' in ok.text
    assert "\\u003c/script\\u003e" in ok.text  # the title, as a string literal
    for referer in ("https://evil.example/", "https://shop.example.com.evil.net/", "null"):
        refused = c.get(f"/c/{slug}/widget.js", headers={"Referer": referer})
        assert refused.status_code == 403, referer
    assert (
        c.get(f"/c/{slug}/widget.js", headers={"Origin": "https://evil.example"}).status_code == 403
    )


def test_the_widget_script_holds_values_as_literals() -> None:
    script = widget_script(page_url="/c/x", title='"</script><script>alert(1)</script>')
    assert "</script>" not in script
    assert "__PAGE_URL__" not in script
    assert "__TITLE__" not in script
    # a placeholder's name inside a value is not replaced again
    assert "__TITLE__" in widget_script(page_url="/c/x", title="__TITLE__")


def test_the_page_modules_are_served_beside_it(c: TestClient[Any]) -> None:
    """page.js and what it imports, transitively: the Markdown renderer the page
    shares with the console (markdown_files/) is served under /c/_/ too, with the
    files' own policy."""
    seen: set[str] = set()
    todo = ["page.js"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        r = c.get(f"/c/_/{name}")
        assert r.status_code == 200, name
        assert "text/javascript" in r.headers["content-type"]
        assert r.headers["content-security-policy"] == "default-src 'none'; frame-ancestors 'none'"
        todo.extend(re.findall(r"""^import .* from "\./([a-z_]+\.js)";$""", r.text, re.M))
    assert seen == {"page.js", "markdown.js", "highlight.js"}
    # the console's files are not the public page's
    assert c.get("/c/_/app.js").status_code == 404


def test_the_files_keep_to_the_policy() -> None:
    scripts = [*sorted(FILES.glob("*.js")), *sorted(MARKDOWN_FILES.glob("*.js")), WIDGET]
    assert len(scripts) >= 4
    for script in scripts:
        text = script.read_text()
        for banned in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
            assert banned not in text, f"{script.name} uses {banned}"
        assert "new Function" not in text, script.name
        assert 'setAttribute("style"' not in text, script.name
        assert "console." not in text, f"{script.name} logs (the token must never reach a log)"


def test_the_files_are_package_data() -> None:
    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    line = next(x for x in pyproject.splitlines() if x.startswith('"agentsvc_web" = '))
    for folder in (FILES, WIDGET.parent, MARKDOWN_FILES):
        patterns = re.findall(rf'"({folder.name}/[^"]+)"', line)
        for f in folder.iterdir():
            assert any(f.match(p.split("/", 1)[1]) for p in patterns), f"{f.name} is not shipped"
