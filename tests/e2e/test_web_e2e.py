"""The web tools end to end: the real service process, a web site and the Brave
Search API fake on loopback (tests/fakes/web.py), the local model calling the tools."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.service import Service
from tests.fakes.web import BRAVE_KEY, FakeBrave, FakeSite
from tests.sse import parse
from tests.web.live import serve

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]


@pytest.fixture(scope="module")
def site() -> Iterator[tuple[FakeSite, str]]:
    fake = FakeSite()
    with serve(fake) as url:
        yield fake, url


@pytest.fixture(scope="module")
def brave() -> Iterator[tuple[FakeBrave, str]]:
    fake = FakeBrave()
    with serve(fake) as url:
        yield fake, url


def _service(pg_url: str, tmp: Path, **env: str) -> tuple[Service, dict[str, str]]:
    key = f"ask_e2e_{uuid.uuid4().hex}"
    service = Service(
        {
            "AGENTSVC_DATABASE_URL": pg_url,
            "AGENTSVC_BOOTSTRAP_API_KEY": key,
            "AGENTSVC_BOOTSTRAP_ORG": f"web-{uuid.uuid4().hex[:8]}",
            "AGENTSVC_DATA_DIR": str(tmp / "data"),
            **env,
        },
        log=tmp / "svc.log",
    )
    service.wait_ready()
    return service, {"Authorization": f"Bearer {key}"}


def _reader(c: httpx.Client, web: dict[str, Any]) -> str:
    """An agent with the given web configuration."""
    agent = c.post("/api/agents", json={"name": "Reader"}).json()
    r = c.put(f"/api/agents/{agent['id']}/web", json=web)
    assert r.status_code == 200, r.text
    return str(agent["id"])


def _turn(c: httpx.Client, agent: str, content: str) -> list[Any]:
    thread = c.post("/api/threads", json={"agentId": agent}).json()
    r = c.post(f"/api/threads/{thread['id']}/messages", json={"content": content})
    assert r.status_code == 200, r.text
    return parse(r.text)


def _result(events: list[Any]) -> str:
    names = [e.event for e in events]
    assert names[:4] == ["meta", "tool_call", "tool_executing", "tool_result"], names
    return str(events[3].data["result"])


def test_a_loopback_page_is_refused_by_default(
    pg_url: str, tmp_path: Path, site: tuple[FakeSite, str]
) -> None:
    fake, url = site
    service, h = _service(pg_url, tmp_path)  # AGENTSVC_ALLOW_PRIVATE_NETWORK unset: false
    try:
        with httpx.Client(base_url=service.url, headers=h, timeout=60) as c:
            agent = _reader(c, {"fetchEnabled": True})
            before = len(fake.paths)
            events = _turn(c, agent, "call web_fetch " + json.dumps({"url": f"{url}/"}))
            result = _result(events)
            assert result == (
                "error: refused by the outbound guard: 127.0.0.1 is a loopback address"
            )
            assert events[-1].event == "done"
            assert len(fake.paths) == before  # no request reached the site
            # search is not configured: it cannot be enabled, and names the setting
            r = c.put(f"/api/agents/{agent}/web", json={"searchEnabled": True})
            assert r.status_code == 422
            assert "AGENTSVC_WEB_SEARCH_API_KEY" in r.json()["detail"]
    finally:
        service.stop()


def test_fetch_and_search_with_private_networks_allowed(
    pg_url: str, tmp_path: Path, site: tuple[FakeSite, str], brave: tuple[FakeBrave, str]
) -> None:
    fake, url = site
    searches, brave_url = brave
    service, h = _service(
        pg_url,
        tmp_path,
        AGENTSVC_ALLOW_PRIVATE_NETWORK="true",
        AGENTSVC_WEB_SEARCH_PROVIDER="brave",
        AGENTSVC_WEB_SEARCH_API_KEY=BRAVE_KEY,  # the secret scan looks for it everywhere
        AGENTSVC_WEB_SEARCH_URL=brave_url,
    )
    try:
        with httpx.Client(base_url=service.url, headers=h, timeout=60) as c:
            agent = _reader(c, {"fetchEnabled": True, "searchEnabled": True, "maxResults": 2})
            events = _turn(c, agent, "call web_fetch " + json.dumps({"url": f"{url}/"}))
            result = _result(events)
            assert result.startswith(
                f"Title: Brewing Green Tea - The Tea Journal\nURL: {url}/\n\n"
                "# How to brew green tea\n\nGreen tea is delicate."
            )
            assert "Log in" not in result
            assert fake.paths[-1] == "/"
            assert "How to brew green tea" in events[-1].data["content"]  # the reply
            events = _turn(c, agent, 'call web_search {"query": "green tea"}')
            assert _result(events) == (
                "Results for 'green tea':\n"
                "\n1. How to brew green tea\n   https://tea.example/brew\n"
                "   Use water between 70 and 80 °C for green tea & sencha.\n"
                "\n2. Sencha - Wikipedia\n   https://en.wikipedia.example/wiki/Sencha\n"
                "   A Japanese tea."
            )
            assert searches.queries[-1] == ("green tea", "2", BRAVE_KEY)
            web = c.get(f"/api/agents/{agent}/web").json()
            assert web["search_provider"] == "brave"
    finally:
        service.stop()
    assert BRAVE_KEY not in service.output()
