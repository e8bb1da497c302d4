"""What the console's browser tests share (test_playground.py, test_console_chat.py,
test_console_manage_a.py, test_console_manage_b.py): Debian's Chromium found and
launched through Playwright (no browser download), a service process with a key of
its own, pages watched for script errors and Content-Security-Policy violations,
and screenshots that ``AGENTSVC_UPDATE_DOCS_IMAGES=1`` also writes to
``docs/images/`` (docs/console.md and docs/playground.md show them).

Each module starts one service and one browser for its tests; a test opens a page
(or a browser context) of its own in them."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.service import Service, running

ROOT = Path(__file__).parents[2]
DOCS_IMAGES = ROOT / "docs" / "images"
WAIT_MS = 30_000  # the longest a page state may take to appear (not a timing claim)
VIEWPORT = {"width": 1280, "height": 900}


def chromium() -> str:
    """Debian's chromium (or AGENTSVC_TEST_CHROMIUM); its absence fails the test."""
    named = os.environ.get("AGENTSVC_TEST_CHROMIUM")
    found = named or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found or not Path(found).exists():
        pytest.fail(
            "the console's browser tests need Chromium: `apt-get install chromium` (make test "
            "does it as root) or set AGENTSVC_TEST_CHROMIUM to a Chromium binary",
            pytrace=False,
        )
    return found


@contextmanager
def browser(*args: str) -> Iterator[Any]:
    """A headless Chromium for the block's length (``args``: more of its switches)."""
    try:
        from playwright import sync_api  # noqa: PLC0415  (a clear failure without it)
    except ImportError:
        pytest.fail(
            "the console's browser tests need Playwright: pip install -e '.[dev]'", pytrace=False
        )
    executable = chromium()
    with sync_api.sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=executable, args=["--no-sandbox", *args])
        try:
            yield launched
        finally:
            launched.close()


def new_key() -> str:
    """A bootstrap API key no other test's service has."""
    return f"ask_e2e_{uuid.uuid4().hex}"


@contextmanager
def service(tmp: Path, key: str, env: Mapping[str, str] | None = None) -> Iterator[Service]:
    """The service on memory storage, ``key`` its bootstrap API key, its data and log
    under ``tmp``; ``env`` adds to (or overrides) that environment."""
    base = {
        "AGENTSVC_STORAGE": "memory",
        "AGENTSVC_BOOTSTRAP_API_KEY": key,
        "AGENTSVC_DATA_DIR": str(tmp / "data"),
    }
    with running({**base, **(env or {})}, log=tmp / "svc.log") as svc:
        yield svc


def watch(page: Any, problems: list[str]) -> Any:
    """``page`` with the default wait, its script errors and CSP reports put in ``problems``."""
    page.set_default_timeout(WAIT_MS)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on(
        "console",
        lambda m: problems.append(m.text) if "Content Security Policy" in m.text else None,
    )
    return page


def screenshot(target: Any, path: Path, docs_name: str | None = None, **options: Any) -> None:
    """A PNG of ``target`` (a page or a locator) at ``path``; with
    AGENTSVC_UPDATE_DOCS_IMAGES=1 also ``docs/images/<docs_name>`` when named."""
    path.parent.mkdir(parents=True, exist_ok=True)
    target.screenshot(path=str(path), **options)
    if docs_name and os.environ.get("AGENTSVC_UPDATE_DOCS_IMAGES") == "1":
        shutil.copyfile(path, DOCS_IMAGES / docs_name)
