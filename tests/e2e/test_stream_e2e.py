"""A client that loses its connection mid-reply re-attaches with ``Last-Event-ID`` to
another service process and receives every event exactly once; a retried send with the
same ``Idempotency-Key`` never stores a second message, even when the retries race
(docs/client-guide.md, "Picking a stream up again (re-attach)" and "Sending safely twice
(Idempotency-Key)"). Two real processes on one PostgreSQL."""

from __future__ import annotations

import threading
import time
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


class Opened:
    """A send whose answer has begun (its status and headers are in): its events
    are read to the end on a thread of its own."""

    def __init__(self, c: httpx.Client, url: str, body: dict[str, Any]) -> None:
        self.status = 0
        self.events: list[Event] = []
        self._opened = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(c, url, body), daemon=True)
        self._thread.start()
        assert self._opened.wait(30), "the send was not answered"

    def _read(self, c: httpx.Client, url: str, body: dict[str, Any]) -> None:
        with c.stream("POST", url, json=body) as r:
            self.status = r.status_code
            self._opened.set()
            for item in parse_lines(r.iter_lines()):
                if isinstance(item, Event):
                    self.events.append(item)

    def all(self) -> list[Event]:
        self._thread.join(60)
        assert not self._thread.is_alive(), "the reply never ended"
        return self.events


def _user_and_replies(c: httpx.Client, url: str, thread_id: str) -> list[tuple[str, str]]:
    page = c.get(f"{url}/api/threads/{thread_id}/messages").json()
    return [(m["role"], m["content"]) for m in page["messages"]]


def test_three_sends_with_enqueue_stream_three_replies_in_order(
    two: tuple[Service, Service, dict[str, str]],
) -> None:
    a, _, h = two
    with httpx.Client(headers=h, timeout=30) as c:
        t = _thread(c, a.url)
        send = f"{a.url}/api/threads/{t['id']}/messages"
        first = Opened(c, send, {"content": "slowly one", "multitaskStrategy": "enqueue"})
        second = Opened(c, send, {"content": "two", "multitaskStrategy": "enqueue"})
        third = Opened(c, send, {"content": "three", "multitaskStrategy": "enqueue"})
        # without a strategy, the spec's answer: the thread is busy
        busy = c.post(send, json={"content": "four"})
        assert busy.status_code == 409
        assert busy.json()["error"] == "THREAD_BUSY"
        replies = [s.all() for s in (first, second, third)]
    assert [s.status for s in (first, second, third)] == [200, 200, 200]
    for events in replies:
        assert next(e.event for e in events) == "meta"
        assert events[-1].event == "done"
        assert events[-1].data["ok"] is True
    run_ids = [events[0].data["runId"] for events in replies]
    assert len(set(run_ids)) == 3
    assert "two" in tokens(replies[1])
    assert "three" in tokens(replies[2])
    with httpx.Client(headers=h, timeout=30) as c:
        history = _user_and_replies(c, a.url, t["id"])
    assert [text for role, text in history if role == "user"] == ["slowly one", "two", "three"]
    assert [role for role, _ in history] == ["user", "assistant"] * 3
    # each reply answered its own message, after the one before had been stored
    assert "two" in history[3][1]
    assert "three" in history[5][1]


def test_an_enqueued_send_to_another_process_waits_for_the_reply_there(
    two: tuple[Service, Service, dict[str, str]],
) -> None:
    a, b, h = two
    with httpx.Client(headers=h, timeout=30) as c:
        t = _thread(c, a.url)
        first = Opened(c, f"{a.url}/api/threads/{t['id']}/messages", {"content": "slowly one"})
        while not first.events:
            time.sleep(0.02)  # the reply runs in A
        second = Opened(
            c,
            f"{b.url}/api/threads/{t['id']}/messages",
            {"content": "two", "multitaskStrategy": "enqueue"},
        )
        one, other = first.all(), second.all()
        history = _user_and_replies(c, a.url, t["id"])
    assert one[-1].event == "done"
    assert not one[-1].data.get("stopped")
    assert other[-1].event == "done"
    assert other[-1].data["ok"] is True
    assert [text for role, text in history if role == "user"] == ["slowly one", "two"]


def test_a_send_with_interrupt_stops_the_running_reply_and_starts_its_own(
    two: tuple[Service, Service, dict[str, str]],
) -> None:
    a, b, h = two
    with httpx.Client(headers=h, timeout=30) as c:
        t = _thread(c, a.url)
        first = Opened(c, f"{a.url}/api/threads/{t['id']}/messages", {"content": "slowly one"})
        while len(first.events) < 3:
            time.sleep(0.02)
        # sent to the other process: the stop crosses over, as POST .../stop does
        second = Opened(
            c,
            f"{b.url}/api/threads/{t['id']}/messages",
            {"content": "now two", "multitaskStrategy": "interrupt"},
        )
        one, other = first.all(), second.all()
        history = _user_and_replies(c, a.url, t["id"])
    assert one[-1].event == "done"
    assert one[-1].data.get("stopped") is True
    assert other[-1].event == "done"
    assert other[-1].data["ok"] is True
    assert "now two" in tokens(other)
    roles = [(role, text[:9]) for role, text in history]
    assert roles[0] == ("user", "slowly on")
    assert roles[2] == ("user", "now two")
    assert history[1][0] == "assistant"
    assert history[1][1]
