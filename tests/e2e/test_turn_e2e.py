"""The conversation turn against the real ``agentsvc serve`` process, over HTTP/SSE."""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.e2e.service import Service, client, new_org, running
from tests.sse import Event, names, parse, parse_lines, tokens

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]


def env_for(pg_url: str, key: str, **extra: str) -> dict[str, str]:
    return {
        "AGENTSVC_DATABASE_URL": pg_url,
        "AGENTSVC_BOOTSTRAP_API_KEY": key,
        "AGENTSVC_BOOTSTRAP_ORG": f"turn-{uuid.uuid4().hex[:8]}",
        "AGENTSVC_LOCAL_SLOW_DELAY_MS": "100",
        **extra,
    }


JWT_SECRET = "turn-e2e-jwt-secret-0123456789abcdefghijklmnopqrst"


def shared_env(pg_url: str) -> dict[str, str]:
    """The module's processes: the stale limit is long (600 s), so a thread a test
    finds free was freed by what the test did, not by the limit."""
    key = f"ask_e2e_{uuid.uuid4().hex}"
    return env_for(pg_url, key, AGENTSVC_RUN_STALE_AFTER_S="600", AGENTSVC_JWT_SECRET=JWT_SECRET)


@pytest.fixture(scope="module")
def pair(
    pg_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Service, Service]]:
    """Two service processes on one database, shared by the tests that neither kill
    nor restart them; each test works in an organization of its own."""
    tmp = tmp_path_factory.mktemp("turn")
    a = Service(shared_env(pg_url), log=tmp / "a.log")
    b = Service(shared_env(pg_url), log=tmp / "b.log")
    try:
        a.wait_ready()
        b.wait_ready()
        yield a, b
    finally:
        a.stop()
        b.stop()


@contextmanager
def clients(*services: Service) -> Iterator[list[httpx.Client]]:
    """A client of each process, with an API key of a new organization."""
    _, key = new_org(services[0].url, JWT_SECRET, "turn")
    h = {"Authorization": f"Bearer {key}"}
    with ExitStack() as stack:
        yield [
            stack.enter_context(httpx.Client(base_url=s.url, headers=h, timeout=30))
            for s in services
        ]


def open_thread(c: httpx.Client, **agent: Any) -> str:
    a = c.post("/api/agents", json={"name": "E2E", **agent}).json()
    return str(c.post("/api/threads", json={"agentId": a["id"]}).json()["id"])


def test_multi_turn_conversation_with_the_local_model(pair: tuple[Service, Service]) -> None:
    with clients(pair[0]) as (c,):
        tid = open_thread(c, stablePreamble="You are the E2E agent.")
        replies = []
        for text in ("Hi there", "What did I just say?", "Thanks"):
            r = c.post(f"/api/threads/{tid}/messages", json={"content": text})
            assert r.status_code == 200
            events = parse(r.text)
            assert names(events)[0] == "meta"
            assert names(events)[-1] == "done"
            assert events[-1].data["content"] == tokens(events)
            replies.append(events[-1].data["content"])
        assert 'Before that you said: "What did I just say?"' in replies[2]
        assert "You are the E2E agent." in replies[0]
        body = c.get(f"/api/threads/{tid}/messages", params={"limit": 4, "offset": 2}).json()
        assert body["total"] == 6
        assert [m["role"] for m in body["messages"]] == [
            "user",
            "assistant",
            "user",
            "assistant",
        ]


def test_stop_reaches_the_process_that_runs_the_reply(pair: tuple[Service, Service]) -> None:
    """Two processes on one database: the stream runs on A, the stop is sent to B."""
    with clients(*pair) as (ca, cb):
        tid = open_thread(ca)
        seen: list[Event] = []
        t0 = time.monotonic()
        with ca.stream(
            "POST", f"/api/threads/{tid}/messages", json={"content": "slowly, please"}
        ) as r:
            for item in parse_lines(r.iter_lines()):
                if isinstance(item, Event):
                    seen.append(item)
                    if item.event == "token" and "word2" in item.data["delta"]:
                        assert cb.post(f"/api/threads/{tid}/stop").json() == {"ok": True}
        assert time.monotonic() - t0 < 4.0  # 50 words at 0.1 s would take 5 s
        done = seen[-1]
        assert (done.event, done.data.get("stopped")) == ("done", True)
        assert "messageId" not in done.data
        msgs = cb.get(f"/api/threads/{tid}/messages").json()["messages"]
        assert msgs[-1]["content"] == done.data["content"]
        assert msgs[-1]["status"] == "stopped"


def stream_until_first_token_then_kill(svc: Service, c: httpx.Client, tid: str) -> None:
    with c.stream(
        "POST", f"/api/threads/{tid}/messages", json={"content": "slowly, then crash"}
    ) as r:
        for item in parse_lines(r.iter_lines()):
            if isinstance(item, Event) and item.event == "token":
                svc.proc.send_signal(signal.SIGKILL)
                break
    svc.proc.wait(timeout=10)
    time.sleep(0.5)  # PostgreSQL ends the dead process's sessions (and locks) at once


def test_a_reply_cut_by_a_crash_is_marked_interrupted(pg_url: str, tmp_path: Path) -> None:
    """kill -9 mid-reply and a restart: the start-up sweep sees that the dead
    process's run has no live owner, so the first send streams (with a 600 s stale
    limit: before the owner's lock, it was 409 until then)."""
    key = f"ask_e2e_{uuid.uuid4().hex}"
    env = env_for(pg_url, key, AGENTSVC_RUN_STALE_AFTER_S="600")
    with running(env, log=tmp_path / "1.log") as first, client(first, key, timeout=30) as c:
        tid = open_thread(c)
        stream_until_first_token_then_kill(first, c, tid)
    with running(env, log=tmp_path / "2.log") as second, client(second, key, timeout=30) as c:
        r = c.post(f"/api/threads/{tid}/messages", json={"content": "are you there?"})
        assert r.status_code == 200, r.text
        assert names(parse(r.text))[-1] == "done"
        msgs = c.get(f"/api/threads/{tid}/messages").json()["messages"]
        users = [m["content"] for m in msgs if m["role"] == "user"]
        assert users == [
            "slowly, then crash",
            "are you there?",
        ]  # nothing the user sent is lost
    # the crashed reply's run is marked interrupted (by the restart's sweep), the
    # next one completed; the crash stored no reply, so no message claims otherwise
    with psycopg.connect(pg_url) as conn:
        runs = conn.execute(
            "SELECT status FROM runs WHERE thread_id = %s ORDER BY started_at", (tid,)
        ).fetchall()
    assert [status for (status,) in runs] == ["interrupted", "completed"]
    assert [m["role"] for m in msgs] == ["user", "user", "assistant"]
    assert msgs[-1]["status"] == "complete"


def test_a_long_reply_keeps_its_thread_busy_past_the_stale_limit(
    pg_url: str, tmp_path: Path
) -> None:
    """Heartbeats: a reply that runs longer than AGENTSVC_RUN_STALE_AFTER_S is alive,
    so it is not taken over; once it is done the thread is free again."""
    key = f"ask_e2e_{uuid.uuid4().hex}"
    env = env_for(pg_url, key, AGENTSVC_RUN_STALE_AFTER_S="2")  # a beat every 0.5 s
    with running(env, log=tmp_path / "beat.log") as svc, client(svc, key, timeout=30) as c:
        tid = open_thread(c)
        started = time.monotonic()
        with c.stream("POST", f"/api/threads/{tid}/messages", json={"content": "slowly"}) as r:
            seen = 0
            for item in parse_lines(r.iter_lines()):
                if isinstance(item, Event) and item.event == "token":
                    seen += 1
                    if time.monotonic() - started > 3.5:  # well past the 2 s limit
                        break
            assert seen > 10
            busy = c.post(f"/api/threads/{tid}/messages", json={"content": "me too"})
            assert busy.status_code == 409, busy.text
            assert busy.json()["error"] == "THREAD_BUSY"
        deadline = time.monotonic() + 15
        while (
            r2 := c.post(f"/api/threads/{tid}/messages", json={"content": "now"})
        ).status_code == 409:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert names(parse(r2.text))[-1] == "done"
        msgs = c.get(f"/api/threads/{tid}/messages").json()["messages"]
        assert [m["status"] for m in msgs if m["role"] == "assistant"] == [
            "complete",
            "complete",
        ]


def test_sigterm_mid_reply_interrupts_it_keeps_its_text_and_exits_promptly(
    pg_url: str, tmp_path: Path
) -> None:
    """SIGTERM: the running reply gets the grace (2 s here) to finish, then its stream
    ends with an INTERRUPTED error, the text it streamed is kept in the history, the
    thread is free after a restart, and the process has exited within the grace plus
    a margin (it used to cut the stream after 5 s, keep nothing, and exit after 11 s)."""
    key = f"ask_e2e_{uuid.uuid4().hex}"
    grace = 2.0
    env = env_for(
        pg_url, key, AGENTSVC_SHUTDOWN_GRACE_S=str(int(grace)), AGENTSVC_RUN_STALE_AFTER_S="600"
    )
    h = {"Authorization": f"Bearer {key}"}
    first = Service(env, log=tmp_path / "1.log")
    seen: list[Event] = []
    try:
        first.wait_ready()
        with httpx.Client(base_url=first.url, headers=h, timeout=30) as c:
            tid = open_thread(c)
            with c.stream(
                "POST", f"/api/threads/{tid}/messages", json={"content": "slowly, please"}
            ) as r:
                for item in parse_lines(r.iter_lines()):
                    if not isinstance(item, Event):
                        continue
                    seen.append(item)
                    if item.event == "token" and item.data["delta"].strip() == "word1":
                        first.proc.send_signal(signal.SIGTERM)
                        signalled = time.monotonic()
                        time.sleep(0.5)
                        with pytest.raises(httpx.TransportError):  # no new connections
                            httpx.get(f"{first.url}/healthz", timeout=2)
            ended = time.monotonic() - signalled
            exit_code = first.proc.wait(timeout=grace + 10)
            exited = time.monotonic() - signalled
    finally:
        first.stop()
    assert exit_code == 0, first.output()
    last = seen[-1]
    assert last.event == "error", names(seen)
    assert last.data["code"] == "INTERRUPTED"
    assert "kept" in last.data["detail"]
    assert "done" not in names(seen)
    assert grace - 0.5 < ended < grace + 1.5  # the reply ran on for the grace, no longer
    assert exited < grace + 2.0, f"exited {exited:.1f} s after SIGTERM"
    partial = tokens(seen)
    assert "word1" in partial
    assert "word50" not in partial  # 50 words at 0.1 s outlast the 2 s grace
    with running(env, log=tmp_path / "2.log") as second, client(second, key, timeout=30) as c:
        msgs = c.get(f"/api/threads/{tid}/messages").json()["messages"]
        assert [(m["role"], m["status"]) for m in msgs] == [
            ("user", "complete"),
            ("assistant", "interrupted"),
        ]
        assert msgs[-1]["content"] == partial  # the history reads as the user saw it
        r = c.post(f"/api/threads/{tid}/messages", json={"content": "still there?"})
        assert r.status_code == 200, r.text
        assert names(parse(r.text))[-1] == "done"


def test_stop_frees_a_thread_whose_reply_died_with_its_process(
    pg_url: str, pair: tuple[Service, Service], tmp_path: Path
) -> None:
    """kill -9 of the process running a reply; another process answers the stop by
    marking that run interrupted itself, so the next send streams at once, not
    after the stale limit (600 s here). The pair's processes sweep every 30 s, and a
    sweep marks a run whose process is gone too: when one got there between the kill
    and the stop, the stop has nothing left to stop (``ok: false``, the thread free
    all the same) and the scenario is played again, on a new thread."""
    for attempt in range(3):
        with (
            running(shared_env(pg_url), log=tmp_path / f"doomed{attempt}.log") as doomed,
            clients(pair[0], doomed) as (c, cd),
        ):
            tid = open_thread(cd)
            stream_until_first_token_then_kill(doomed, cd, tid)
            started = time.monotonic()
            if c.post(f"/api/threads/{tid}/stop").json() == {"ok": True}:
                _send_after_the_stop(c, tid, started)
                return
            with psycopg.connect(pg_url) as conn:
                runs = conn.execute("SELECT status FROM runs WHERE thread_id = %s", (tid,))
                assert [s for (s,) in runs] == ["interrupted"]  # a sweep's doing
    pytest.fail("a sweep marked the dead run before each of three stops")


def _send_after_the_stop(c: httpx.Client, tid: str, started: float) -> None:
    r = c.post(f"/api/threads/{tid}/messages", json={"content": "are you there?"})
    took = time.monotonic() - started
    assert r.status_code == 200, r.text
    assert names(parse(r.text))[-1] == "done"
    assert took < 5.0, f"stop then send took {took:.1f} s"
    assert c.post(f"/api/threads/{tid}/stop").json() == {"ok": False}  # nothing runs
    msgs = c.get(f"/api/threads/{tid}/messages").json()["messages"]
    assert [m["role"] for m in msgs] == ["user", "user", "assistant"]
    assert msgs[0]["content"] == "slowly, then crash"  # nothing the user sent is lost
