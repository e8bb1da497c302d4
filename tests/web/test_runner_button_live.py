"""A runner's button against the real app, in headless Chromium.

The app (``create_app``, memory storage, its job worker on) on one loopback port;
a customer's site on two more, one of them the organization's allowed embed domain
(``127.0.0.1:<port>``: a loopback entry allows ``http://`` on that port) and one
not. Through the API: an agent on the ``local`` model, a runner with an agent step,
a ``button`` trigger (its token), the allowed domain. Then, in one browser:

- the allowed site's ``<script src=".../embed.js?token=...">`` mounts the real
  button page; the form, built from the runner's input schema, renders with no CSP
  complaint; filling and submitting it shows ``Started run <id>``, and that run,
  read through the API, has the submitted input, the ``button`` trigger, and
  succeeds (the worker runs the agent step on the ``local`` model);
- the other site's ``embed.js`` is refused by the ``Referer`` check (403) and
  mounts nothing (the refusal is JSON with ``nosniff``, so Chromium reports the
  script's load as blocked, ``net::ERR_BLOCKED_BY_ORB``, not as a 403); its direct
  ``<iframe referrerpolicy="no-referrer">`` of the button URL is served (no header
  to check) and Chromium refuses to frame it: CSP ``frame-ancestors``.

What the service was asked and answered is recorded by a thin ASGI wrapper around
the app: (path, ``Referer``, status) of each request.

tests/web/test_runner_button_browser.py checks the page's and script's details
against a fake service; this one checks the routes, the settings and the run they
start. A PNG of each step goes to ``test-output/runner-button/live/``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar import Litestar, Response, get
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from agentsvc_web.app import create_app
from agentsvc_web.settings import Settings
from tests.e2e.console_support import chromium
from tests.web.live import serve

ROOT = Path(__file__).parents[2]
SHOTS = ROOT / "test-output" / "runner-button" / "live"
ENDED = ("succeeded", "failed", "cancelled", "paused")

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["title"],
    "properties": {
        "title": {"type": "string", "title": "Title", "maxLength": 80},
        "count": {"type": "integer", "minimum": 1, "maximum": 10},
        "urgent": {"type": "boolean"},
    },
}


Seen = list[tuple[str, str | None, int]]


@dataclass
class Live:
    """The running app, the two sites, what the API set up, and what the app answered."""

    service: str
    allowed: str
    other: str
    api: httpx.Client
    runner_id: str
    token: str
    seen: Seen

    def answers(self) -> Seen:
        """The (path, Referer, status) of the requests for the button, embed.js and the
        button's webhook, in order."""
        runner = f"/api/runners/{self.runner_id}"
        mine = (f"{runner}/button", f"{runner}/embed.js", f"/api/runners/webhooks/{self.token}")
        return [s for s in self.seen if s[0] in mine]


def recorded(app: ASGIApp, seen: Seen) -> ASGIApp:
    """``app``, noting the (path, ``Referer``, status) of each HTTP request in ``seen``."""

    async def wrapper(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await app(scope, receive, send)
            return
        referer = dict(scope["headers"]).get(b"referer")

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                who = None if referer is None else referer.decode()
                seen.append((scope["path"], who, message["status"]))
            await send(message)

        await app(scope, receive, sending)

    return wrapper


def site_app(live: dict[str, str]) -> Litestar:
    """A customer's site: the same pages on the allowed and on the other port."""

    def html(body: str) -> Response[str]:
        page = f"<!doctype html><html><head><title>site</title></head><body>{body}</body></html>"
        return Response(page, media_type="text/html; charset=utf-8")

    def runner_url(what: str) -> str:
        return f"{live['service']}/api/runners/{live['runner_id']}/{what}?token={live['token']}"

    @get("/script", sync_to_thread=False)
    def script() -> Response[str]:
        src = runner_url("embed.js")
        return html(f'<p id="before">before</p><script src="{src}"></script><p>after</p>')

    @get("/direct", sync_to_thread=False)
    def direct() -> Response[str]:
        src = runner_url("button")
        return html(f'<iframe title="form" referrerpolicy="no-referrer" src="{src}"></iframe>')

    return Litestar([script, direct])


@pytest.fixture
def live() -> Iterator[Live]:
    key, org = f"ask_live_{uuid.uuid4().hex}", f"button-{uuid.uuid4().hex[:10]}"
    settings = Settings(storage="memory", bootstrap_api_key=key, bootstrap_org=org, worker=True)
    pages: dict[str, str] = {}
    seen: Seen = []
    with (
        serve(recorded(create_app(settings), seen)) as service,
        serve(site_app(pages)) as allowed,
        serve(site_app(pages)) as other,
        httpx.Client(
            base_url=service, headers={"Authorization": f"Bearer {key}"}, timeout=30
        ) as api,
    ):
        agent = api.post("/api/agents", json={"name": "triage", "defaultModel": "local"})
        assert agent.status_code == 201, agent.text
        step = {
            "id": "classify",
            "kind": "agent",
            "agentId": agent.json()["id"],
            "prompt": "Classify this ticket: {{ input.title }}",
        }
        body = {"name": "File a ticket", "inputSchema": SCHEMA, "steps": [step]}
        runner = api.post("/api/runners", json=body)
        assert runner.status_code == 201, runner.text
        runner_id = runner.json()["id"]
        trigger = api.post(f"/api/runners/{runner_id}/triggers", json={"kind": "button"})
        assert trigger.status_code == 201, trigger.text
        token = trigger.json()["token"]
        domains = {"allowedEmbedDomains": [allowed.removeprefix("http://")]}
        settled = api.post("/api/orgs/settings", json=domains)
        assert settled.status_code == 200, settled.text
        pages.update(service=service, runner_id=runner_id, token=token)
        yield Live(service, allowed, other, api, runner_id, token, seen)


def test_the_button_of_a_real_runner_in_a_browser(live: Live) -> None:
    try:
        from playwright import sync_api  # noqa: PLC0415
    except ImportError:
        pytest.fail("the browser test needs Playwright: pip install -e '.[dev]'", pytrace=False)
    executable = chromium()
    SHOTS.mkdir(parents=True, exist_ok=True)
    for old in SHOTS.glob("*.png"):
        old.unlink()
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            _allowed_site(browser, live)
            _other_site(browser, live)
        finally:
            browser.close()


def _watched(browser: Any) -> tuple[Any, list[str]]:
    page = browser.new_page(viewport={"width": 900, "height": 900})
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text))
    return page, console


def _allowed_site(browser: Any, live: Live) -> None:
    runner_path = f"/api/runners/{live.runner_id}"
    page, console = _watched(browser)
    page.goto(f"{live.allowed}/script")
    frame_el = page.locator("#before ~ script + iframe")
    frame_el.wait_for()
    assert frame_el.get_attribute("title") == "File a ticket"
    form = page.frame_locator("iframe")
    form.locator("#run-form").wait_for()
    assert form.locator("h1").inner_text() == "File a ticket"
    assert form.locator("label[for=f0]").inner_text() == "Title *"
    assert live.answers() == [
        (f"{runner_path}/embed.js", f"{live.allowed}/", 200),
        (f"{runner_path}/button", f"{live.allowed}/", 200),
    ]
    page.screenshot(path=str(SHOTS / "01-allowed-site.png"), full_page=True)

    form.locator("#f0").fill("Printer on fire")
    form.locator("#f1").fill("7")
    form.locator("#f2").check()
    form.locator("#run-submit").click()
    status = form.locator("#run-status")
    status.filter(has_text="Started run").wait_for()
    run_id = status.inner_text().removeprefix("Started run ")
    assert str(uuid.UUID(run_id)) == run_id
    # the page sends no Referer of its own (its address holds the token)
    assert live.answers()[2:] == [(f"/api/runners/webhooks/{live.token}", None, 202)]
    page.screenshot(path=str(SHOTS / "02-started.png"), full_page=True)
    assert not [m for m in console if "Content Security Policy" in m], console
    page.close()

    run = _until_ended(live, run_id)
    assert run["status"] == "succeeded", run
    assert run["input"] == {"title": "Printer on fire", "count": 7, "urgent": True}
    assert run["trigger"]["kind"] == "button"
    assert [(s["step_id"], s["status"]) for s in run["steps"]] == [("classify", "succeeded")]


def _until_ended(live: Live, run_id: str) -> dict[str, Any]:
    """The run once it has ended (the worker takes it off the queue and runs its step),
    or as it is after 30 s."""
    deadline = time.monotonic() + 30
    while True:
        got = live.api.get(f"/api/runners/{live.runner_id}/runs/{run_id}")
        assert got.status_code == 200, got.text
        run: dict[str, Any] = got.json()
        if run["status"] in ENDED or time.monotonic() > deadline:
            return run
        time.sleep(0.05)


def _other_site(browser: Any, live: Live) -> None:
    runner_path = f"/api/runners/{live.runner_id}"
    # embed.js: refused by the Referer check (403), nothing mounted
    page, _ = _watched(browser)
    seen = len(live.answers())
    with page.expect_event("requestfailed", lambda r: "/embed.js" in r.url) as failed:
        page.goto(f"{live.other}/script")
    assert "ERR_BLOCKED_BY_ORB" in failed.value.failure
    page.wait_for_load_state("load")
    assert page.locator("iframe").count() == 0
    assert live.answers()[seen:] == [(f"{runner_path}/embed.js", f"{live.other}/", 403)]
    page.close()

    # a direct frame without a Referer: served, and refused by Chromium (frame-ancestors)
    page, _ = _watched(browser)
    seen = len(live.answers())
    with page.expect_console_message(lambda m: "frame-ancestors" in m.text) as refusal:
        page.goto(f"{live.other}/direct")
    assert "violates the following Content Security Policy directive" in refusal.value.text
    host = live.allowed.removeprefix("http://")
    assert f'"frame-ancestors https://{host} http://{host}"' in refusal.value.text
    assert live.answers()[seen:] == [(f"{runner_path}/button", None, 200)]
    child = page.frames[1]
    assert child.url == "chrome-error://chromewebdata/"
    assert child.locator("#run-form").count() == 0
    page.screenshot(path=str(SHOTS / "03-other-site-blocked.png"), full_page=True)
    page.close()
