"""A client that loses its connection mid-reply re-attaches with ``Last-Event-ID`` to
another service process and receives every event exactly once; a retried send with the
same ``Idempotency-Key`` never stores a second message, even when the retries race
(docs/client-guide.md, "Picking a stream up again (re-attach)" and "Sending safely twice
(Idempotency-Key)"). Two real processes on one PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.e2e.service import Service, new_org
from tests.sse import Event, parse, parse_lines, tokens

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]


JWT_SECRET = "stream-e2e-jwt-secret-0123456789abcdefghijklmnopq"


@pytest.fixture(scope="module")
def pair(
    pg_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Service, Service]]:
    """Two processes on one database, shared by the module's tests."""
    tmp = tmp_path_factory.mktemp("streams")
    env = {
        "AGENTSVC_DATABASE_URL": pg_url,
        "AGENTSVC_BOOTSTRAP_API_KEY": f"ask_e2e_{uuid.uuid4().hex}",
        "AGENTSVC_BOOTSTRAP_ORG": f"streams-{uuid.uuid4().hex[:8]}",
        "AGENTSVC_JWT_SECRET": JWT_SECRET,
        "AGENTSVC_LOCAL_SLOW_DELAY_MS": "40",  # a "slowly" reply lasts about 2 s
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


@pytest.fixture
def two(pair: tuple[Service, Service]) -> tuple[Service, Service, dict[str, str]]:
    """Both processes, and an API key of an organization of this test's own."""
    a, b = pair
    _, k = new_org(a.url, JWT_SECRET, "streams")
    return a, b, {"Authorization": f"Bearer {k}"}


def _thread(c: httpx.Client, url: str) -> dict[str, Any]:
    agent = c.post(f"{url}/api/agents", json={"name": "Streamer"}).json()
    return c.post(f"{url}/api/threads", json={"agentId": agent["id"]}).json()  # type: ignore[no-any-return]


def test_reattach_to_another_process_gets_every_event_once(
    two: tuple[Service, Service, dict[str, str]],
) -> None:
    a, b, h = two
    with httpx.Client(headers=h, timeout=30) as c:
        t = _thread(c, a.url)
        first: list[Event] = []
        with c.stream(
            "POST", f"{a.url}/api/threads/{t['id']}/messages", json={"content": "slowly please"}
        ) as r:
            for item in parse_lines(r.iter_lines()):
                if isinstance(item, Event):
                    first.append(item)
                    if len(first) == 5:
                        break  # the connection drops
        run_id = first[0].data["runId"]
        # the thread, read through B, names the reply that runs in A
        assert c.get(f"{b.url}/api/threads/{t['id']}").json()["active_run_id"] == run_id
        r = c.get(
            f"{b.url}/api/threads/{t['id']}/stream",
            params={"runId": run_id},
            headers={"Last-Event-ID": str(first[-1].id)},
        )
        assert r.status_code == 200, r.text
        rest = parse(r.text)
        assert [e.id for e in rest] == list(range(6, 6 + len(rest)))
        assert rest[-1].event == "done"
        content = rest[-1].data["content"]
        assert "word50" in content
        assert tokens(first) + tokens(rest) == content  # nothing missed, nothing twice

        # finished: the whole reply can be read again from either process
        for svc in (a, b):
            again = parse(
                c.get(f"{svc.url}/api/threads/{t['id']}/stream", params={"runId": run_id}).text
            )
            assert [(e.id, e.event, e.data) for e in again] == [
                (e.id, e.event, e.data) for e in first + rest
            ]
        assert c.get(f"{a.url}/api/threads/{t['id']}").json()["active_run_id"] is None


def test_concurrent_retries_with_one_idempotency_key_store_one_message(
    two: tuple[Service, Service, dict[str, str]],
) -> None:
    a, b, h = two
    with httpx.Client(headers=h, timeout=30) as c:
        t = _thread(c, a.url)
        key = {"Idempotency-Key": f"send-{uuid.uuid4().hex}"}
        body = {"content": "slowly, once"}

        def send(i: int) -> list[Event]:
            url = f"{(a.url, b.url)[i % 2]}/api/threads/{t['id']}/messages"
            r = c.post(url, json=body, headers=key)
            assert r.status_code == 200, r.text
            return parse(r.text)

        with ThreadPoolExecutor(6) as pool:
            replies = list(pool.map(send, range(6)))
        run_ids = {events[0].data["runId"] for events in replies}
        assert len(run_ids) == 1  # one reply, answered to every retry
        for events in replies:
            assert [e.event for e in events][-1] == "done"
            assert [(e.id, e.event, e.data) for e in events] == [
                (e.id, e.event, e.data) for e in replies[0]
            ]
        messages = c.get(f"{a.url}/api/threads/{t['id']}/messages").json()["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant"]

        # the same key with another body is refused; nothing stored
        r = c.post(
            f"{b.url}/api/threads/{t['id']}/messages", json={"content": "other"}, headers=key
        )
        assert r.status_code == 422
        assert r.json()["error"] == "IDEMPOTENCY_KEY_REUSED"
        assert len(c.get(f"{a.url}/api/threads/{t['id']}/messages").json()["messages"]) == 2
