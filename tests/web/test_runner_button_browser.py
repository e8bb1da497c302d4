"""A runner's button page and embed.js in headless Chromium (agentsvc_web/runner_button.py).

No service process: a small app on one loopback port plays the service (the page
and embed.js with their headers and the embedder check, and a webhook that records
what it is sent), and another app plays the customers' sites on two more ports,
one of them an allowed embed domain (``127.0.0.1:<port>``) and one not. Three
origins, as in production: the service, an allowed site, another site.

- The allowed site's ``<script src=".../embed.js">`` mounts the frame after the
  script (and in a ``[data-agentsvc-runner]`` element when there is one); the
  form renders with no CSP complaint, the frame follows the page's height, the
  button is disabled while the webhook is answering, the webhook gets the JSON
  with its types (numbers, booleans, enum values, parsed arrays and objects, empty
  optional fields left out), and the page shows ``Started run <id>``, then an
  error's ``detail``; invalid JSON in a field stops the submit in the browser.
- The other site's ``embed.js`` is refused by the ``Referer`` check (nothing is
  mounted); its direct ``<iframe referrerpolicy="no-referrer">`` gets the page
  (no header to check), and Chromium refuses to frame it: CSP ``frame-ancestors``.

Debian's chromium through Playwright, as tests/e2e/test_playground.py; a PNG of
each step goes to ``test-output/runner-button/``.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from litestar import Litestar, Request, Response, get, post

from agentsvc_web.runner_button import (
    button_headers,
    button_page,
    embed_script,
    embedder_allowed,
)
from tests.e2e.console_support import chromium
from tests.web.live import serve

ROOT = Path(__file__).parents[2]
SHOTS = ROOT / "test-output" / "runner-button"
TOKEN = "rt_browser_test_token"
NONCE_BYTES = 16

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["title", "count", "tags"],
    "properties": {
        "title": {"type": "string", "title": "Title <b>of</b> the ticket", "maxLength": 80},
        "email": {"type": "string", "format": "email", "description": "Who to tell."},
        "count": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
        "ratio": {"type": "number"},
        "urgent": {"type": "boolean"},
        "quiet": {"type": "boolean", "default": True},
        "level": {"enum": [1, 2, 3], "title": "Level"},
        "size": {"enum": ["S", "M"], "default": "M"},
        "tags": {"type": "array", "default": ["a"]},
        "meta": {"type": "object"},
        "note": {"type": "string", "description": "<script>window.pwned = 1</script>"},
    },
}


@dataclass
class World:
    """What the fake service saw, and the switches the test turns."""

    domains: list[str] = field(default_factory=list)
    service_url: str = ""
    seen: list[tuple[str, str | None, str | None, bool]] = field(default_factory=list)
    bodies: list[tuple[str, Any]] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    gate: threading.Event = field(default_factory=threading.Event)
    fail: bool = False

    def __post_init__(self) -> None:
        self.gate.set()


def service_app(world: World) -> Litestar:
    def checked(request: Request[Any, Any, Any]) -> bool:
        origin, referer = request.headers.get("origin"), request.headers.get("referer")
        allowed = embedder_allowed(origin=origin, referer=referer, domains=world.domains)
        world.seen.append((request.url.path, origin, referer, allowed))
        return allowed

    def refused() -> Response[Any]:
        detail = "not an allowed embed domain"
        return Response({"error": "FORBIDDEN", "detail": detail}, status_code=403)

    @get("/button", sync_to_thread=False)
    def button(request: Request[Any, Any, Any]) -> Response[Any]:
        if not checked(request):
            return refused()
        nonce = secrets.token_urlsafe(NONCE_BYTES)
        page = button_page(
            name="File a ticket",
            description="Opens a ticket in the queue.",
            input_schema=SCHEMA,
            submit_url=f"/webhook/{TOKEN}",
            nonce=nonce,
        )
        headers = button_headers(domains=world.domains, nonce=nonce)
        return Response(page, media_type="text/html; charset=utf-8", headers=headers)

    @get("/embed.js", sync_to_thread=False)
    def embed(request: Request[Any, Any, Any]) -> Response[Any]:
        if not checked(request):
            return refused()
        script = embed_script(button_url=f"/button?token={TOKEN}", title="File a ticket")
        return Response(script, media_type="text/javascript; charset=utf-8")

    @post(f"/webhook/{TOKEN}", status_code=202)
    async def webhook(request: Request[Any, Any, Any]) -> Response[Any]:
        world.bodies.append((request.headers.get("content-type", ""), await request.json()))
        world.arrived.set()
        await asyncio.to_thread(world.gate.wait, 60)
        if world.fail:
            detail = "count: Expected `int` <= 10"
            return Response({"error": "VALIDATION_ERROR", "detail": detail}, status_code=422)
        return Response({"runId": str(uuid.uuid4())}, status_code=202)

    return Litestar([button, embed, webhook])


def site_app(world: World) -> Litestar:
    """A customer's site: the same pages on the allowed and on the other port."""

    def html(body: str) -> Response[str]:
        page = f"<!doctype html><html><head><title>site</title></head><body>{body}</body></html>"
        return Response(page, media_type="text/html; charset=utf-8")

    @get("/script", sync_to_thread=False)
    def script() -> Response[str]:
        src = f"{world.service_url}/embed.js?token={TOKEN}"
        return html(f'<p id="before">before</p><script src="{src}"></script><p>after</p>')

    @get("/container", sync_to_thread=False)
    def container() -> Response[str]:
        src = f"{world.service_url}/embed.js?token={TOKEN}"
        return html(
            f'<div id="here" data-agentsvc-runner></div><p>text</p><script src="{src}"></script>'
        )

    @get("/direct", sync_to_thread=False)
    def direct() -> Response[str]:
        src = f"{world.service_url}/button?token={TOKEN}"
        return html(f'<iframe title="form" referrerpolicy="no-referrer" src="{src}"></iframe>')

    return Litestar([script, container, direct])


@pytest.fixture
def world() -> Iterator[tuple[World, str, str]]:
    world = World()
    with (
        serve(service_app(world)) as service,
        serve(site_app(world)) as allowed,
        serve(site_app(world)) as other,
    ):
        world.service_url = service
        world.domains = ["example.com", allowed.removeprefix("http://")]
        yield world, allowed, other


def test_the_button_in_a_browser(world: tuple[World, str, str]) -> None:
    try:
        from playwright import sync_api  # noqa: PLC0415
    except ImportError:
        pytest.fail("the browser test needs Playwright: pip install -e '.[dev]'", pytrace=False)
    executable = chromium()
    state, allowed, other = world
    SHOTS.mkdir(parents=True, exist_ok=True)
    for old in SHOTS.glob("*.png"):
        old.unlink()
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            _allowed_site(browser, state, allowed)
            _other_site(browser, state, other)
        finally:
            browser.close()


def _watched(browser: Any) -> tuple[Any, list[str]]:
    page = browser.new_page(viewport={"width": 900, "height": 900})
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text))
    return page, console


def _allowed_site(browser: Any, state: World, allowed: str) -> None:
    page, console = _watched(browser)
    page.goto(f"{allowed}/script")
    frame_el = page.locator("#before ~ script + iframe")
    frame_el.wait_for()
    assert frame_el.get_attribute("title") == "File a ticket"
    form = page.frame_locator("iframe")
    form.locator("#run-form").wait_for()
    frame = next(f for f in page.frames if f.url.startswith(f"{state.service_url}/button"))
    # the page's own script and style ran (nonce), the schema's script did not
    assert (
        frame.evaluate("getComputedStyle(document.querySelector('button')).borderRadius") == "6px"
    )
    assert frame.evaluate("typeof window.pwned") == "undefined"
    assert form.locator("label[for=f0]").inner_text() == "Title <b>of</b> the ticket *"
    assert form.locator("b").count() == 0
    assert form.locator("#f10-hint").inner_text() == "<script>window.pwned = 1</script>"
    # the frame takes the page's height (posted by the page, read by embed.js)
    height = frame.evaluate("Math.ceil(document.documentElement.getBoundingClientRect().height)")
    page.wait_for_function(
        "h => document.querySelector('iframe').style.height === h + 'px'", arg=height
    )
    assert state.seen[:2] == [
        ("/embed.js", None, f"{allowed}/", True),
        ("/button", None, f"{allowed}/", True),
    ]
    page.screenshot(path=str(SHOTS / "01-allowed-site.png"), full_page=True)

    # invalid JSON is stopped in the browser: nothing is sent
    form.locator("#f0").fill("Printer on fire")
    form.locator("#f8").fill("[oops")
    form.locator("#run-submit").click()
    message = form.locator("#f8").evaluate("el => el.validationMessage")
    assert message == "This is not valid JSON."
    assert state.bodies == []

    # a submit: the button is disabled until the webhook answers
    form.locator("#f1").fill("ops@example.com")
    form.locator("#f2").fill("7")
    form.locator("#f3").fill("0.5")
    form.locator("#f4").check()
    form.locator("#f5").uncheck()
    form.locator("#f6").select_option(label="2")
    form.locator("#f8").fill('["x", "y"]')
    form.locator("#f9").fill('{"k": 1, "nested": {"n": null}}')
    state.gate.clear()
    form.locator("#run-submit").click()
    assert state.arrived.wait(30)
    assert form.locator("#run-submit").is_disabled()
    page.screenshot(path=str(SHOTS / "02-sending.png"), full_page=True)
    state.gate.set()
    status = form.locator("#run-status")
    status.filter(has_text="Started run").wait_for()
    assert form.locator("#run-submit").is_enabled()
    content_type, body = state.bodies[0]
    assert content_type == "application/json"
    assert body == {
        "title": "Printer on fire",
        "email": "ops@example.com",
        "count": 7,
        "ratio": 0.5,
        "urgent": True,
        "quiet": False,
        "level": 2,
        "size": "M",
        "tags": ["x", "y"],
        "meta": {"k": 1, "nested": {"n": None}},
    }
    assert isinstance(body["count"], int)
    run_id = status.inner_text().removeprefix("Started run ")
    assert str(uuid.UUID(run_id)) == run_id
    page.screenshot(path=str(SHOTS / "03-started.png"), full_page=True)

    # an error answer: its detail
    state.fail = True
    form.locator("#run-submit").click()
    status.filter(has_text="Expected").wait_for()
    assert status.inner_text() == "count: Expected `int` <= 10"
    assert status.get_attribute("class") == "status error"
    page.screenshot(path=str(SHOTS / "04-error.png"), full_page=True)
    assert not [m for m in console if "Content Security Policy" in m], console
    page.close()

    # into a [data-agentsvc-runner] element when the page has one
    page, console = _watched(browser)
    page.goto(f"{allowed}/container")
    page.locator("#here > iframe").wait_for()
    page.frame_locator("#here > iframe").locator("#run-form").wait_for()
    assert page.locator("iframe").count() == 1
    assert not [m for m in console if "Content Security Policy" in m], console
    page.close()


def _other_site(browser: Any, state: World, other: str) -> None:
    # embed.js: refused by the Referer check, nothing mounted
    page, _ = _watched(browser)
    seen = len(state.seen)
    page.goto(f"{other}/script")
    page.wait_for_load_state("load")
    assert state.seen[seen:] == [("/embed.js", None, f"{other}/", False)]
    assert page.locator("iframe").count() == 0
    page.close()

    # a direct frame without a Referer: served, and refused by Chromium (frame-ancestors)
    page, _ = _watched(browser)
    seen = len(state.seen)
    with page.expect_console_message(lambda m: "frame-ancestors" in m.text) as refusal:
        page.goto(f"{other}/direct")
    assert "violates the following Content Security Policy directive" in refusal.value.text
    assert state.seen[seen:] == [("/button", None, None, True)]
    child = page.frames[1]
    assert child.url == "chrome-error://chromewebdata/"
    assert child.locator("#run-form").count() == 0
    page.screenshot(path=str(SHOTS / "05-other-site-blocked.png"), full_page=True)
    page.close()
