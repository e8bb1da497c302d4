"""Multiplayer against the real service: two processes on one PostgreSQL, three
people who follow a thread's live events (``GET /api/threads/{id}/events``) on
either process and see each other's messages and the agent's reply as they are
stored; with ``respondTo: mentions`` the agent answers only when it is mentioned,
and a message that does not mention it is taken even while it answers
(docs/multiplayer.md)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from tests.e2e.service import Service, new_org
from tests.sse import parse
from tests.thread_events import Follower, named

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

JWT_SECRET = "multiplayer-e2e-jwt-secret-0123456789abcdefghijklmn"
H = dict[str, str]


@pytest.fixture(scope="module")
def pair(
    pg_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Service, Service]]:
    """Two processes on one database, shared by the module's tests."""
    tmp = tmp_path_factory.mktemp("multiplayer")
    env = {
        "AGENTSVC_DATABASE_URL": pg_url,
        "AGENTSVC_BOOTSTRAP_API_KEY": f"ask_e2e_{uuid.uuid4().hex}",
        "AGENTSVC_BOOTSTRAP_ORG": f"mp-{uuid.uuid4().hex[:8]}",
        "AGENTSVC_JWT_SECRET": JWT_SECRET,
        "AGENTSVC_LOCAL_SLOW_DELAY_MS": "60",  # a "slowly" reply lasts about 3 s
    }
    a = Service(env, log=tmp / "a.log")
    b = Service(env, log=tmp / "b.log")
    try:
        a.wait_ready()
        b.wait_ready()
        yield a, b
    finally:
        a.stop()
        b.stop()


def _person(org: str, user: str) -> H:
    token = jwt.encode(
        {"sub": user, "org_id": org, "exp": int(time.time()) + 3600}, JWT_SECRET, algorithm="HS256"
    )
    return {"Authorization": f"Bearer {token}"}


def _say(url: str, thread: str, h: H, content: str) -> list[Any]:
    r = httpx.post(
        f"{url}/api/threads/{thread}/messages", json={"content": content}, headers=h, timeout=60
    )
    assert r.status_code == 200, r.text
    return parse(r.text)


def test_three_people_follow_a_thread_across_processes(pair: tuple[Service, Service]) -> None:
    a, b = pair
    org, key = new_org(a.url, JWT_SECRET, "mp")
    admin = {"Authorization": f"Bearer {key}"}
    with httpx.Client(headers=admin, timeout=30) as c:
        agent = c.post(f"{a.url}/api/agents", json={"name": "Helper"}).json()["id"]
        r = c.put(
            f"{b.url}/api/agents/{agent}/multiplayer",
            json={"respondTo": "mentions", "displayName": "Helpy", "maxParticipants": 3},
        )
        assert r.status_code == 200, r.text
        assert r.json()["respond_to"] == "mentions"
    people = {p: _person(org, p) for p in ("ada", "bob", "cy")}
    r = httpx.post(
        f"{a.url}/api/threads",
        json={"agentId": agent, "kind": "multiplayer", "title": "Lunch"},
        headers=people["ada"],
    )
    assert r.status_code == 200, r.text
    thread = r.json()["id"]
    for p in ("bob", "cy"):
        r = httpx.post(
            f"{b.url}/api/threads/{thread}/participants",
            json={"userId": p, "displayName": p.title()},
            headers=people["ada"],
        )
        assert r.status_code == 200, r.text
    # the fourth person is one too many for maxParticipants 3
    r = httpx.post(
        f"{a.url}/api/threads/{thread}/participants", json={"userId": "dan"}, headers=people["ada"]
    )
    assert (r.status_code, r.json()["error"]) == (409, "TOO_MANY_PARTICIPANTS")
    # Ada follows on A, Bob and Cy on B
    followers = {
        "ada": Follower(a.url, thread, people["ada"]),
        "bob": Follower(b.url, thread, people["bob"]),
        "cy": Follower(b.url, thread, people["cy"]),
    }
    try:
        # Bob, on B, mentions nobody: stored, not answered, seen by all
        quiet = _say(b.url, thread, people["bob"], "pizza or sushi?")
        assert [(e.event, e.data) for e in quiet] == [
            ("done", {"ok": True, "content": "", "replied": False})
        ]
        for f in followers.values():
            seen = f.wait_for(lambda es: len(named(es, "message")) == 1)
            first = named(seen, "message")[0]
            assert first.id == 1
            assert first.data["sender_id"] == "bob"
            assert first.data["content"] == "pizza or sushi?"
        # Cy, on A, mentions the agent, which answers slowly; Ada, on B, speaks
        # meanwhile without a mention: no THREAD_BUSY, no reply
        with ThreadPoolExecutor(1) as pool:
            asked = pool.submit(_say, a.url, thread, people["cy"], "@Helpy decide, slowly")
            followers["bob"].wait_for(lambda es: bool(named(es, "reply_started")))
            meanwhile = _say(b.url, thread, people["ada"], "sushi!")
            assert meanwhile[-1].data == {"ok": True, "content": "", "replied": False}
            answer = asked.result()
        assert answer[-1].event == "done"
        assert answer[-1].data["content"].startswith('You said: "@Helpy decide, slowly"')
        for name, f in followers.items():
            seen = f.wait_for(lambda es: bool(named(es, "reply")))
            got = [
                (e.id, e.event, e.data.get("sender_id")) for e in named(seen, "message", "reply")
            ]
            assert got == [
                (1, "message", "bob"),
                (2, "message", "cy"),
                (3, "message", "ada"),
                (4, "reply", None),
            ], name
            reply = named(seen, "reply")[0]
            assert reply.data["content"] == answer[-1].data["content"]
            assert reply.data["run_id"] == answer[0].data["runId"]
    finally:
        for f in followers.values():
            f.close()
    # Bob comes back on A with the last id he saw: what he missed, then live
    _say(a.url, thread, people["cy"], "see you at noon")
    back = Follower(a.url, thread, {**people["bob"], "Last-Event-ID": "3"})
    try:
        seen = back.wait_for(lambda es: len(named(es, "message", "reply")) == 2)
        assert [(e.id, e.event) for e in named(seen, "message", "reply")] == [
            (4, "reply"),
            (5, "message"),
        ]
        _say(b.url, thread, people["ada"], "@helper thanks")
        seen = back.wait_for(lambda es: len(named(es, "message", "reply")) == 4)
        assert [e.id for e in named(seen, "message", "reply")] == [4, 5, 6, 7]
    finally:
        back.close()
    history = httpx.get(
        f"{b.url}/api/threads/{thread}/messages", headers=people["cy"], timeout=30
    ).json()
    assert [m["content"] for m in history["messages"][:3]] == [
        "pizza or sushi?",
        "@Helpy decide, slowly",
        "sushi!",
    ]
    assert history["total"] == 7
    # someone who is not in the thread may not follow it
    r = httpx.get(f"{a.url}/api/threads/{thread}/events", headers=_person(org, "eve"), timeout=30)
    assert r.status_code == 403


def test_multiplayer_switched_off_refuses_new_multiplayer_threads(
    pair: tuple[Service, Service],
) -> None:
    a, b = pair
    _, key = new_org(a.url, JWT_SECRET, "mp")
    with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=30) as c:
        agent = c.post(f"{a.url}/api/agents", json={"name": "Solo"}).json()["id"]
        assert c.put(f"{a.url}/api/agents/{agent}/multiplayer", json={"enabled": False}).is_success
        r = c.post(f"{b.url}/api/threads", json={"agentId": agent, "kind": "multiplayer"})
        assert (r.status_code, r.json()["error"]) == (409, "MULTIPLAYER_DISABLED")
        assert c.post(f"{b.url}/api/threads", json={"agentId": agent}).status_code == 200


def test_followers_are_let_go_at_once_when_the_service_stops(tmp_path: Path) -> None:
    """SIGTERM ends a thread's live events at once (its followers reconnect, with
    their last id, to another process), not after the replies' grace period."""
    key = f"ask_e2e_{uuid.uuid4().hex}"
    svc = Service(
        {
            "AGENTSVC_STORAGE": "memory",
            "AGENTSVC_BOOTSTRAP_API_KEY": key,
            "AGENTSVC_SHUTDOWN_GRACE_S": "20",
        },
        log=tmp_path / "service.log",
    )
    try:
        svc.wait_ready()
        h = {"Authorization": f"Bearer {key}"}
        agent = httpx.post(f"{svc.url}/api/agents", json={"name": "A"}, headers=h).json()["id"]
        thread = httpx.post(
            f"{svc.url}/api/threads", json={"agentId": agent, "kind": "multiplayer"}, headers=h
        ).json()["id"]
        with httpx.stream(
            "GET", f"{svc.url}/api/threads/{thread}/events", headers=h, timeout=30
        ) as r:
            assert r.status_code == 200
            started = time.monotonic()
            svc.proc.terminate()
            for _ in r.iter_lines():
                pass  # the stream ends (cleanly) when the service lets it go
            assert time.monotonic() - started < 10
        assert svc.proc.wait(timeout=15) == 0
    finally:
        svc.stop()
