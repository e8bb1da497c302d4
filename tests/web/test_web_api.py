"""``GET/PUT /api/agents/{id}/web`` and the web tools in a turn, through the app
(memory and PostgreSQL), with a loopback web site and a loopback Brave fake."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from litestar.testing import TestClient

from agentsvc_web.app import create_app
from agentsvc_web.settings import Settings, SettingsError
from tests.fakes.web import BRAVE_KEY, FakeBrave, FakeSite
from tests.sse import parse
from tests.web.conftest import bearer, make_jwt
from tests.web.live import serve

H = dict[str, str]

DEFAULTS = {
    "fetch_enabled": False,
    "search_enabled": False,
    "max_fetch_bytes": 2097152,
    "max_text_chars": 20000,
    "fetch_timeout_ms": 10000,
    "max_results": 5,
    "allowed_domains": [],
    "blocked_domains": [],
    "search_provider": None,
}


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


def _agent(c: TestClient[Any], auth: H) -> str:
    r = c.post("/api/agents", json={"name": "Reader"}, headers=auth)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def test_the_defaults_until_a_put_and_then_what_was_stored(
    client: TestClient[Any], auth: H, org_id: str
) -> None:
    agent = _agent(client, auth)
    got = client.get(f"/api/agents/{agent}/web", headers=auth)
    assert got.status_code == 200
    assert got.json() == {"agent_id": agent, "org_id": org_id, **DEFAULTS}
    put = client.put(
        f"/api/agents/{agent}/web",
        json={"fetchEnabled": True, "maxTextChars": 5000, "blockedDomains": ["Ads.Example.COM"]},
        headers=auth,
    )
    assert put.status_code == 200, put.text
    expected = {
        "agent_id": agent,
        "org_id": org_id,
        **DEFAULTS,
        "fetch_enabled": True,
        "max_text_chars": 5000,
        "blocked_domains": ["ads.example.com"],
    }
    assert put.json() == expected
    # a later PUT changes only what it names
    again = client.put(f"/api/agents/{agent}/web", json={"maxResults": 3}, headers=auth)
    assert again.json() == {**expected, "max_results": 3}
    assert client.get(f"/api/agents/{agent}/web", headers=auth).json() == {
        **expected,
        "max_results": 3,
    }


@pytest.mark.parametrize(
    "body",
    [
        {"maxFetchBytes": 1023},
        {"maxFetchBytes": 10 * 1024 * 1024 + 1},
        {"maxTextChars": 999},
        {"fetchTimeoutMs": 60_001},
        {"maxResults": 0},
        {"maxResults": 21},
        {"allowedDomains": ["d.example"] * 101},
        {"blockedDomains": [""]},
        {"blockedDomains": ["https://example.com/"]},
        {"fetchEnabled": "yes"},
    ],
)
def test_bounds_are_422(client: TestClient[Any], auth: H, body: dict[str, Any]) -> None:
    agent = _agent(client, auth)
    r = client.put(f"/api/agents/{agent}/web", json=body, headers=auth)
    assert (r.status_code, r.json()["error"]) == (422, "VALIDATION_ERROR"), r.text
    assert next(iter(body)) in r.json()["detail"]
    assert client.get(f"/api/agents/{agent}/web", headers=auth).json()["fetch_enabled"] is False


def test_search_needs_a_configured_provider(client: TestClient[Any], auth: H) -> None:
    agent = _agent(client, auth)
    r = client.put(
        f"/api/agents/{agent}/web", json={"fetchEnabled": True, "searchEnabled": True}, headers=auth
    )
    assert (r.status_code, r.json()["error"]) == (422, "VALIDATION_ERROR"), r.text
    assert r.json()["detail"].startswith("searchEnabled: ")
    assert "AGENTSVC_WEB_SEARCH_API_KEY" in r.json()["detail"]
    # nothing of the refused PUT was stored
    assert client.get(f"/api/agents/{agent}/web", headers=auth).json()["fetch_enabled"] is False


def test_another_organization_and_members(client: TestClient[Any], auth: H, org_id: str) -> None:
    agent = _agent(client, auth)
    stranger = bearer(make_jwt(org="some-other-org", role="admin"))
    assert client.get(f"/api/agents/{agent}/web", headers=stranger).status_code == 404
    r = client.put(f"/api/agents/{agent}/web", json={"fetchEnabled": True}, headers=stranger)
    assert (r.status_code, r.json()["error"]) == (404, "NOT_FOUND")
    member = bearer(make_jwt(sub="u", org=org_id))
    assert client.get(f"/api/agents/{agent}/web", headers=member).status_code == 200
    r = client.put(f"/api/agents/{agent}/web", json={"fetchEnabled": True}, headers=member)
    assert r.status_code == 403
    unknown = "00000000-0000-4000-8000-000000000000"
    assert client.get(f"/api/agents/{unknown}/web", headers=auth).status_code == 404


def _converse(c: TestClient[Any], auth: H, agent: str, content: str) -> list[Any]:
    thread = c.post("/api/threads", json={"agentId": agent}, headers=auth).json()
    r = c.post(f"/api/threads/{thread['id']}/messages", json={"content": content}, headers=auth)
    assert r.status_code == 200, r.text
    return parse(r.text)


def _tool_result(events: list[Any]) -> str:
    return str(next(e for e in events if e.event == "tool_result").data["result"])


@pytest.fixture
def open_settings(settings: Settings, brave: tuple[FakeBrave, str]) -> Settings:
    """Private networks allowed (the fakes are on loopback) and Brave configured."""
    return msgspec.structs.replace(
        settings,
        allow_private_network=True,
        web_search_provider="brave",
        web_search_api_key=BRAVE_KEY,
        web_search_url=brave[1],
    )


def test_a_turn_fetches_a_page_and_searches(
    open_settings: Settings, auth: H, site: tuple[FakeSite, str], brave: tuple[FakeBrave, str]
) -> None:
    _, url = site
    with TestClient(create_app(open_settings)) as c:
        agent = _agent(c, auth)
        # off by default: the model is offered neither tool
        events = _converse(c, auth, agent, f'call web_fetch {{"url": "{url}/"}}')
        assert "tool_call" not in [e.event for e in events]
        config = c.put(
            f"/api/agents/{agent}/web",
            json={"fetchEnabled": True, "searchEnabled": True},
            headers=auth,
        ).json()
        assert config["search_provider"] == "brave"
        events = _converse(c, auth, agent, "call web_fetch " + json.dumps({"url": f"{url}/"}))
        names = [e.event for e in events]
        assert names[:4] == ["meta", "tool_call", "tool_executing", "tool_result"], names
        result = _tool_result(events)
        assert result.startswith(
            f"Title: Brewing Green Tea - The Tea Journal\nURL: {url}/\n\n# How to brew green tea"
        )
        assert "tracking-script-body" not in result
        events = _converse(c, auth, agent, 'call web_search {"query": "green tea"}')
        result = _tool_result(events)
        assert result.startswith(
            "Results for 'green tea':\n\n1. How to brew green tea\n   https://tea.example/brew"
        )
        assert brave[0].queries[-1] == ("green tea", "5", BRAVE_KEY)
        # a failure is a result the model reads, and the reply goes on
        events = _converse(c, auth, agent, 'call web_fetch {"url": "' + url + '/image"}')
        assert _tool_result(events).startswith("error: 127.0.0.1 answered image/png")
        assert events[-1].event == "done"


# --- the operator's settings ------------------------------------------------------


def test_search_is_configured_by_its_api_key() -> None:
    assert Settings.from_env({}).web_search_provider is None
    key = "brave-key-from-the-environment-0123"
    s = Settings.from_env({"AGENTSVC_WEB_SEARCH_API_KEY": key})
    assert (s.web_search_provider, s.web_search_api_key, s.web_search_url) == ("brave", key, None)
    s = Settings.from_env(
        {
            "AGENTSVC_WEB_SEARCH_API_KEY": key,
            "AGENTSVC_WEB_SEARCH_PROVIDER": "brave",
            "AGENTSVC_WEB_SEARCH_URL": "http://127.0.0.1:9999/brave",
        }
    )
    assert (s.web_search_provider, s.web_search_url) == ("brave", "http://127.0.0.1:9999/brave")
    assert key not in repr(s)


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"AGENTSVC_WEB_SEARCH_PROVIDER": "brave"}, "AGENTSVC_WEB_SEARCH_API_KEY"),
        (
            {"AGENTSVC_WEB_SEARCH_PROVIDER": "google", "AGENTSVC_WEB_SEARCH_API_KEY": "k" * 20},
            "AGENTSVC_WEB_SEARCH_PROVIDER must be one of brave",
        ),
        (
            {"AGENTSVC_WEB_SEARCH_API_KEY": "k" * 20, "AGENTSVC_WEB_SEARCH_URL": "api.example"},
            "AGENTSVC_WEB_SEARCH_URL must be an http(s) base URL",
        ),
    ],
)
def test_search_settings_that_cannot_work_stop_start_up(env: dict[str, str], named: str) -> None:
    with pytest.raises(SettingsError) as stopped:
        Settings.from_env(env)
    assert named in str(stopped.value)
