"""Published chats against the real service process over HTTP and SSE: visitors
each reach their own threads only (another visitor's thread is 404, a visitor
token opens nothing of the organization's API), a site that is not the chat's is
refused, the identity secret is in one answer only, and the daily cost cap stops
a chat once its visitors' replies cost what it allows (priced by a price table
that gives the ``local`` model a price), which the owner reads on the chat."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import E2E_JWT_SECRET
from tests.e2e.service import Service, client, new_org, running
from tests.sse import parse

pytestmark = pytest.mark.e2e
SITE = "https://shop.example.com"


def _publish(api: httpx.Client, **body: Any) -> tuple[str, dict[str, Any]]:
    agent = api.post("/api/agents", json={"name": "Helper", "defaultModel": "local"})
    assert agent.status_code == 201, agent.text
    agent_id = agent.json()["id"]
    made = api.post(
        f"/api/agents/{agent_id}/publish",
        json={
            "slug": f"e2e-{uuid.uuid4().hex[:10]}",
            "allowedDomains": ["shop.example.com"],
            **body,
        },
    )
    assert made.status_code == 201, made.text
    return agent_id, made.json()


def _visitor(base: str, slug: str) -> httpx.Client:
    started = httpx.post(f"{base}/api/public/chat/{slug}/sessions", json={}, timeout=30)
    assert started.status_code == 201, started.text
    token = started.json()["token"]
    return httpx.Client(
        base_url=f"{base}/api/public/chat/{slug}",
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )


def _send(visitor: httpx.Client, thread: str, content: str) -> httpx.Response:
    return visitor.post(f"/threads/{thread}/messages", json={"content": content})


@pytest.fixture
def org_api(service: Service) -> Iterator[httpx.Client]:
    _, key = new_org(service.url, E2E_JWT_SECRET, "pub")
    with client(service, key) as api:
        yield api


def test_visitors_reach_only_their_own_threads(service: Service, org_api: httpx.Client) -> None:
    agent, chat = _publish(org_api)
    assert chat["identity_secret"].startswith("pcs_")
    again = org_api.get(f"/api/agents/{agent}/publish")
    assert "identity_secret" not in again.json()
    assert chat["identity_secret"] not in again.text
    slug = chat["slug"]
    with _visitor(service.url, slug) as alice, _visitor(service.url, slug) as bob:
        thread = alice.post("/threads", json={}).json()["id"]
        # streamed: the reply's events arrive over SSE
        with alice.stream("POST", f"/threads/{thread}/messages", json={"content": "hello"}) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            events = parse(r.read().decode())
        assert events[0].event == "meta"
        assert events[-1].event == "done"
        assert alice.get(f"/threads/{thread}/messages").json()["total"] == 2
        # bob: not alice's thread, in no way
        assert bob.get(f"/threads/{thread}/messages").status_code == 404
        assert _send(bob, thread, "mine now").status_code == 404
        assert bob.post(f"/threads/{thread}/stop").status_code == 404
        # neither token opens the organization's API
        for token_client in (alice, bob):
            headers = {"Authorization": token_client.headers["authorization"]}
            for path in ("/api/agents", f"/api/threads/{thread}/messages", "/api/orgs/settings"):
                assert httpx.get(f"{service.url}{path}", headers=headers).status_code == 401
        # an organization thread, not opened by a visitor, is not a visitor's
        own = org_api.post("/api/threads", json={"agentId": agent}).json()["id"]
        assert alice.get(f"/threads/{own}/messages").status_code == 404
        # from a site that is not the chat's: 403, and no CORS
        evil = alice.get(f"/threads/{thread}/messages", headers={"Origin": "https://evil.example"})
        assert evil.status_code == 403
        assert "access-control-allow-origin" not in evil.headers
        good = alice.get(f"/threads/{thread}/messages", headers={"Origin": SITE})
        assert good.headers["access-control-allow-origin"] == SITE
    # the owner sees the visitor's thread and its usage
    listed = org_api.get(f"/api/agents/{agent}/publish/threads").json()["threads"]
    assert [t["thread_id"] for t in listed] == [thread]
    logs = org_api.get("/api/logs", params={"threadId": thread})
    assert logs.status_code == 200, logs.text


@pytest.fixture(scope="module")
def priced(tmp_path_factory: pytest.TempPathFactory, pg_url: str) -> Iterator[Service]:
    """A service whose price table gives the ``local`` model a (high) price."""
    tmp = tmp_path_factory.mktemp("priced")
    prices = tmp / "prices.json"
    prices.write_text(
        json.dumps(
            {"prices": [{"model": "local", "input": 1000, "output": 1000, "cachedInput": 0}]}
        )
    )
    with running(
        {
            "AGENTSVC_STORAGE": "postgres",
            "AGENTSVC_DATABASE_URL": pg_url,
            "AGENTSVC_JWT_SECRET": E2E_JWT_SECRET,
            "AGENTSVC_PRICES_FILE": str(prices),
            "AGENTSVC_DATA_DIR": str(Path(tmp) / "data"),
        },
        log=tmp / "svc.log",
    ) as svc:
        yield svc


def test_the_daily_cost_cap_stops_a_chat(priced: Service) -> None:
    _, key = new_org(priced.url, E2E_JWT_SECRET, "cap")
    with client(priced, key) as api:
        agent, chat = _publish(api, dailyCostCapUsd=0.001)
        slug = chat["slug"]
        with _visitor(priced.url, slug) as visitor:
            thread = visitor.post("/threads", json={}).json()["id"]
            first = _send(visitor, thread, "hello, what does this cost?")
            assert first.status_code == 200, first.text
            assert parse(first.text)[-1].event == "done"
            shown = api.get(f"/api/agents/{agent}/publish").json()
            assert shown["cost_today_usd"] > 0.001
            assert shown["cap_reached"] is True
            report = api.get("/api/analytics", params={"agentId": agent}).json()
            (today,) = report["published_chats"]
            assert (today["slug"], today["cap_reached"]) == (slug, True)
            assert today["cost_today_usd"] == shown["cost_today_usd"]
            refused = _send(visitor, thread, "and again")
            assert refused.status_code == 429, refused.text
            assert refused.json()["error"] == "DAILY_COST_CAP_REACHED"
            assert 1 <= int(refused.headers["retry-after"]) <= 86400
            # a new thread of the chat is refused too; the owner's own API is not
            other = visitor.post("/threads", json={}).json()["id"]
            assert _send(visitor, other, "hi").status_code == 429
        own = api.post("/api/threads", json={"agentId": agent}).json()["id"]
        assert api.post(f"/api/threads/{own}/messages", json={"content": "hi"}).status_code == 200
        # raising the cap opens the chat again
        raised = api.patch(f"/api/agents/{agent}/publish", json={"dailyCostCapUsd": 100})
        assert raised.json()["cap_reached"] is False
        with _visitor(priced.url, slug) as visitor:
            thread = visitor.post("/threads", json={}).json()["id"]
            assert _send(visitor, thread, "hello").status_code == 200
