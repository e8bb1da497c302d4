"""A multiplayer thread's live events on a real server (memory storage): people who
follow ``GET /api/threads/{id}/events`` see each message and reply as it is stored; a
message that does not call the agent is taken while a reply runs; a follower that
comes back with ``Last-Event-ID`` gets what it missed (docs/multiplayer.md)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from agentsvc_web.app import create_app
from agentsvc_web.bootstrap import build_services
from agentsvc_web.settings import Settings
from tests.sse import parse
from tests.thread_events import Follower, named
from tests.web.conftest import JWT_SECRET, bearer, make_jwt
from tests.web.live import serve

H = dict[str, str]


@pytest.fixture(scope="module")
def live() -> Iterator[tuple[str, str, str]]:
    """A server of its own: its URL, organization and API key."""
    key, org = f"ask_web_{uuid.uuid4().hex}", f"mp-{uuid.uuid4().hex[:8]}"
    settings = Settings(
        storage="memory",
        bootstrap_api_key=key,
        bootstrap_org=org,
        jwt_secret=JWT_SECRET,
        jwt_algorithms=("HS256",),
        sse_keepalive_s=1,
        local_slow_delay_ms=60,  # a "slowly" reply lasts about 3 s
        worker=False,
    )
    with serve(create_app(settings, build_services(settings))) as url:
        yield url, org, key


def _room(c: httpx.Client, url: str, org: str, **config: Any) -> tuple[str, dict[str, H]]:
    """A multiplayer thread opened by Ada (owner) with Bob and Cy, its agent
    configured with ``config``; the three people's headers."""
    agent = c.post(f"{url}/api/agents", json={"name": "Helper"}).json()["id"]
    if config:
        r = c.put(f"{url}/api/agents/{agent}/multiplayer", json=config)
        assert r.status_code == 200, r.text
    people = {p: bearer(make_jwt(p, org=org)) for p in ("ada", "bob", "cy")}
    r = c.post(
        f"{url}/api/threads", json={"agentId": agent, "kind": "multiplayer"}, headers=people["ada"]
    )
    assert r.status_code == 200, r.text
    thread = r.json()["id"]
    for p in ("bob", "cy"):
        r = c.post(
            f"{url}/api/threads/{thread}/participants",
            json={"userId": p, "displayName": p.title()},
            headers=people["ada"],
        )
        assert r.status_code == 200, r.text
    return thread, people


def _say(c: httpx.Client, url: str, thread: str, h: H, content: str) -> list[Any]:
    r = c.post(f"{url}/api/threads/{thread}/messages", json={"content": content}, headers=h)
    assert r.status_code == 200, r.text
    return parse(r.text)


def test_followers_see_every_message_and_reply_live(live: tuple[str, str, str]) -> None:
    url, org, key = live
    with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=30) as c:
        thread, people = _room(c, url, org, respondTo="mentions", displayName="Helpy")
        followers = {p: Follower(url, thread, h) for p, h in people.items()}
        try:
            done = _say(c, url, thread, people["bob"], "hello all")
            assert done[-1].data == {"ok": True, "content": "", "replied": False}
            for f in followers.values():
                seen = f.wait_for(lambda es: len(named(es, "message")) == 1)
                msg = named(seen, "message")[0]
                assert msg.id == 1
                assert (msg.data["sender_id"], msg.data["sender_name"]) == ("bob", "Bob")
                assert msg.data["content"] == "hello all"
            with ThreadPoolExecutor(2) as pool:
                slow = pool.submit(_say, c, url, thread, people["cy"], "@helpy answer slowly")
                followers["ada"].wait_for(lambda es: bool(named(es, "reply_started")))
                # a message that does not call the agent, while the agent answers
                quiet = _say(c, url, thread, people["ada"], "meanwhile, no mention")
                assert quiet[-1].data == {"ok": True, "content": "", "replied": False}
                answer = slow.result()
            assert answer[-1].event == "done"
            for f in followers.values():
                seen = f.wait_for(lambda es: bool(named(es, "reply")))
                ordered = named(seen, "message", "reply")
                assert [(e.id, e.event) for e in ordered] == [
                    (1, "message"),
                    (2, "message"),
                    (3, "message"),
                    (4, "reply"),
                ]
                assert ordered[2].data["sender_id"] == "ada"
                assert ordered[3].data["content"] == answer[-1].data["content"]
                assert ordered[3].data["run_id"] == answer[0].data["runId"]
                started = named(seen, "reply_started")
                assert [e.data["run_id"] for e in started] == [answer[0].data["runId"]]
                assert started[0].id is None
        finally:
            for f in followers.values():
                f.close()
        # a follower that comes back says what it saw last, and gets the rest
        back = Follower(url, thread, {**people["bob"], "Last-Event-ID": "2"})
        try:
            seen = back.wait_for(lambda es: len(named(es, "message", "reply")) == 2)
            assert [e.id for e in named(seen, "message", "reply")] == [3, 4]
        finally:
            back.close()
        # or from a position it names (0: from the first message)
        again = Follower(url, thread, people["cy"], "?after=0")
        try:
            seen = again.wait_for(lambda es: len(named(es, "message", "reply")) == 4)
            assert [e.id for e in named(seen, "message", "reply")] == [1, 2, 3, 4]
        finally:
            again.close()


def test_a_follower_from_now_sees_only_what_comes_next(live: tuple[str, str, str]) -> None:
    url, org, key = live
    with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=30) as c:
        thread, people = _room(c, url, org, respondTo="owners")
        _say(c, url, thread, people["bob"], "before")
        f = Follower(url, thread, people["cy"])
        try:
            _say(c, url, thread, people["bob"], "after")
            seen = f.wait_for(lambda es: bool(named(es, "message")))
            assert [(e.id, e.data["content"]) for e in named(seen, "message")] == [(2, "after")]
        finally:
            f.close()
