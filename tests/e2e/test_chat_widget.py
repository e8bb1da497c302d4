"""A published chat's widget in headless Chromium against the real service
process: a shop's page on an allowed site (a loopback page server on
127.0.0.1 with a port of its own) includes the chat's ``widget.js``; an
anonymous visitor opens the bubble, sends a message, and the reply streams into
the frame with its Markdown rendered (and HTML in it shown as text, never run).
The same page served as ``localhost`` (another origin, same loopback server) gets
no bubble: the script is refused, and so is the API from that page.

The browser is Debian's ``chromium`` driven by Playwright, as the playground's
test (tests/e2e/test_playground.py). Screenshots go to
``test-output/chat-widget/``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import E2E_JWT_SECRET
from tests.e2e.console_support import WAIT_MS, chromium
from tests.e2e.service import Service, client, new_org
from tests.web.live import serve

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parents[2]
SHOTS = ROOT / "test-output" / "chat-widget"


def shop(service_url: str, slug: str) -> Any:
    """A customer's page (ASGI): every path answers the shop's page with the widget."""
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>Shop</title></head>"
        "<body><h1>The shop</h1><p>Questions? Ask our assistant.</p>"
        f"<script src='{service_url}/c/{slug}/widget.js'></script></body></html>"
    ).encode()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/html; charset=utf-8")],
            }
        )
        await send({"type": "http.response.body", "body": page})

    return app


@pytest.fixture
def published(service: Service) -> Iterator[tuple[Service, str, Any, str]]:
    _, key = new_org(service.url, E2E_JWT_SECRET, "widget")
    with client(service, key) as api:
        agent = api.post("/api/agents", json={"name": "Shop helper", "defaultModel": "local"})
        assert agent.status_code == 201, agent.text
        slug = f"shop-{uuid.uuid4().hex[:8]}"
        yield service, slug, api, agent.json()["id"]


def test_a_visitor_chats_through_the_widget_on_an_allowed_site_only(
    published: tuple[Service, str, Any, str],
) -> None:
    from playwright import sync_api  # noqa: PLC0415

    service, slug, api, agent = published
    with serve(shop(service.url, slug)) as shop_url:
        port = shop_url.rsplit(":", 1)[1]
        made = api.post(
            f"/api/agents/{agent}/publish",
            json={
                "slug": slug,
                "title": "Shop helper",
                "welcomeMessage": "Hello! How can I help?",
                "starterPrompts": ["Opening hours?"],
                "allowedDomains": [f"127.0.0.1:{port}"],
            },
        )
        assert made.status_code == 201, made.text
        problems: list[str] = []
        SHOTS.mkdir(parents=True, exist_ok=True)
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=chromium(),
                args=["--no-sandbox", "--host-resolver-rules=MAP localhost 127.0.0.1"],
            )
            try:
                page = browser.new_page(viewport={"width": 1100, "height": 800})
                page.set_default_timeout(WAIT_MS)
                page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
                _allowed_site(page, shop_url, slug, api, agent)
                page.screenshot(path=str(SHOTS / "01-allowed.png"))
                other = browser.new_page(viewport={"width": 1100, "height": 800})
                other.set_default_timeout(WAIT_MS)
                _other_site(other, f"http://localhost:{port}", service.url, slug)
                other.screenshot(path=str(SHOTS / "02-refused.png"))
            finally:
                browser.close()
        assert not problems, problems


def _allowed_site(page: Any, shop_url: str, slug: str, api: Any, agent: str) -> None:
    page.goto(f"{shop_url}/products")
    bubble = page.locator("#agentsvc-chat-bubble")
    bubble.click()
    frame = page.frame_locator("#agentsvc-chat-frame")
    frame.locator(".message.assistant.welcome").wait_for()
    assert frame.locator(".message.assistant.welcome").inner_text() == "Hello! How can I help?"
    assert frame.locator(".starter").all_inner_texts() == ["Opening hours?"]
    # a slow reply: seen while it streams, then whole
    frame.locator("#chat-input").fill("Please answer slowly with **bold** and `code` <b>raw</b>")
    frame.locator("#chat-send").click()
    frame.locator(".message.assistant[data-status=streaming]").wait_for()
    frame.locator("#chat-stop").wait_for(state="visible")
    frame.locator(".message.assistant[data-status=complete]").wait_for()
    reply = frame.locator(".message.assistant[data-status=complete] .body")
    assert reply.locator("strong").first.inner_text() == "bold"
    assert reply.locator("code").first.inner_text() == "code"
    assert reply.locator("b").count() == 0  # HTML in a message is text, never markup
    assert "<b>raw</b>" in reply.inner_text()
    user = frame.locator(".message.user .body").inner_text()
    assert user == "Please answer slowly with **bold** and `code` <b>raw</b>"
    # what the page showed is what the owner reads in the visitor's thread
    threads = api.get(f"/api/agents/{agent}/publish/threads").json()["threads"]
    assert len(threads) == 1
    assert threads[0]["visitor_id"].startswith("anon-")
    stored = api.get(f"/api/threads/{threads[0]['thread_id']}/messages").json()["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[0]["content"] == user


def _other_site(page: Any, other_url: str, service_url: str, slug: str) -> None:
    loaded: list[str] = []
    page.on("requestfinished", lambda r: loaded.append(r.url) if "/widget.js" in r.url else None)
    page.goto(f"{other_url}/products")
    page.wait_for_load_state("load")
    assert loaded == []  # refused (the browser drops the error's body: it is no script)
    widget = f"{service_url}/c/{slug}/widget.js"
    assert httpx.get(widget, headers={"Referer": f"{other_url}/products"}).status_code == 403
    assert page.locator("#agentsvc-chat-bubble").count() == 0
    # the API, called from that site, is refused too (and the browser hands nothing over)
    outcome = page.evaluate(
        """async (url) => {
            try { const r = await fetch(url, {method: "POST", headers: {"Content-Type":
              "application/json"}, body: "{}"}); return "status " + r.status; }
            catch (e) { return "blocked"; }
        }""",
        f"{service_url}/api/public/chat/{slug}/sessions",
    )
    assert outcome == "blocked"
