"""Re-attach (docs/client-guide.md, "Picking a stream up again (re-attach)"):
``GET /api/threads/{threadId}/stream`` re-attaches to a reply (running, or finished
within the replay window) and answers every event after the one named by
``Last-Event-ID`` (or ``?after=N``), then the live rest until ``done`` or ``error``;
thread responses carry ``active_run_id``. Over real HTTP/SSE, memory and PostgreSQL
(the second process is tests/e2e/test_stream_e2e.py)."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import msgspec

from agentsvc_web.settings import Settings
from tests.sse import Event, parse, parse_lines, tokens
from tests.web.harness import Harness, SharedHarness
from tests.web.test_turn import history, send, setup, wait_for

H = dict[str, str]


def _first_events(c: httpx.Client, thread_id: str, content: str, n: int) -> list[Event]:
    """Send, read the first ``n`` events, hang up."""
    seen: list[Event] = []
    with c.stream("POST", f"/api/threads/{thread_id}/messages", json={"content": content}) as r:
        assert r.status_code == 200
        for item in parse_lines(r.iter_lines()):
            if isinstance(item, Event):
                seen.append(item)
                if len(seen) == n:
                    break
    return seen


def _stream(c: httpx.Client, thread_id: str, **kw: Any) -> httpx.Response:
    headers = kw.pop("headers", {})
    return c.get(f"/api/threads/{thread_id}/stream", params=kw, headers=headers)


def test_reattach_with_last_event_id_gets_every_later_event_once(
    harness: SharedHarness, auth: H
) -> None:
    with harness.live(auth) as c:
        _, t = setup(c)
        first = _first_events(c, t["id"], "answer slowly please", 4)
        assert [e.id for e in first] == [1, 2, 3, 4]
        run_id = first[0].data["runId"]
        r = _stream(c, t["id"], headers={"Last-Event-ID": "4"})
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("text/event-stream")
        rest = parse(r.text)
        assert [e.id for e in rest] == list(range(5, 5 + len(rest)))
        assert rest[-1].event == "done"
        done = rest[-1].data
        # nothing missed, nothing twice: the tokens of both parts are the reply
        assert tokens(first) + tokens(rest) == done["content"]
        assert history(c, t["id"])[-1]["content"] == done["content"]
        # the whole reply can be read again by its run id for a while
        again = parse(_stream(c, t["id"], runId=run_id).text)
        assert [e.id for e in again] == list(range(1, 5 + len(rest)))
        assert [(e.event, e.data) for e in again] == [(e.event, e.data) for e in first + rest]


def test_after_query_and_replay_of_a_finished_reply(harness: SharedHarness, auth: H) -> None:
    with harness.live(auth) as c:
        _, t = setup(c)
        events = send(c, t["id"], content="Hello there")
        run_id = events[0].data["runId"]
        replay = parse(_stream(c, t["id"], runId=run_id, after=2).text)
        assert [(e.id, e.event, e.data) for e in replay] == [
            (e.id, e.event, e.data) for e in events[2:]
        ]
        # the header wins over ?after (a browser's EventSource keeps the URL it began with)
        late = parse(
            _stream(c, t["id"], runId=run_id, after=0, headers={"Last-Event-ID": "3"}).text
        )
        assert [e.id for e in late] == [e.id for e in events[3:]]
        # after the last event: nothing more, the stream just ends
        assert parse(_stream(c, t["id"], runId=run_id, after=len(events)).text) == []


def test_several_viewers_follow_one_reply(harness: SharedHarness, auth: H) -> None:
    with harness.live(auth) as c:
        _, t = setup(c)
        first = _first_events(c, t["id"], "slowly, for everyone", 2)
        results: list[list[Event]] = []

        def view() -> None:
            results.append(parse(_stream(c, t["id"], headers={"Last-Event-ID": "2"}).text))

        viewers = [threading.Thread(target=view) for _ in range(3)]
        for v in viewers:
            v.start()
        for v in viewers:
            v.join(30)
        assert len(results) == 3
        assert results[0] == results[1] == results[2]
        assert results[0][-1].event == "done"
        assert tokens(first) + tokens(results[0]) == results[0][-1].data["content"]


def test_thread_shows_its_running_reply(harness: SharedHarness, auth: H) -> None:
    with harness.live(auth) as c:
        _, t = setup(c)
        assert c.get(f"/api/threads/{t['id']}").json()["active_run_id"] is None
        first = _first_events(c, t["id"], "go slowly", 1)
        run_id = first[0].data["runId"]
        shown = c.get(f"/api/threads/{t['id']}").json()
        assert shown["active_run_id"] == run_id
        listed = c.get("/api/threads", params={"agentId": t["agent_id"]}).json()["threads"]
        assert [x["active_run_id"] for x in listed] == [run_id]
        assert c.post(f"/api/threads/{t['id']}/stop").json() == {"ok": True}
        wait_for(lambda: c.get(f"/api/threads/{t['id']}").json()["active_run_id"] is None)


def test_reattach_refusals(harness: SharedHarness, auth: H) -> None:
    with harness.live(auth) as c:
        _, t = setup(c)
        _, other = setup(c)
        # idle thread, no run named: nothing to re-attach to
        r = _stream(c, t["id"])
        assert r.status_code == 404
        assert r.json()["error"] == "NOT_FOUND"
        run_id = send(c, t["id"], content="hi")[0].data["runId"]
        # a run of another thread, an unknown run, an unknown thread
        assert _stream(c, other["id"], runId=run_id).status_code == 404
        unknown = "00000000-0000-4000-8000-000000000000"
        assert _stream(c, t["id"], runId=unknown).status_code == 404
        assert c.get(f"/api/threads/{unknown}/stream", params={"runId": run_id}).status_code == 404
        # ids are numbers the stream gave
        for bad in ("abc", "-1", "1.5", "99999999999"):
            r = _stream(c, t["id"], runId=run_id, headers={"Last-Event-ID": bad})
            assert r.status_code == 422, (bad, r.text)
            assert r.json()["error"] == "VALIDATION_ERROR"
        assert _stream(c, t["id"], runId=run_id, after=-1).status_code == 422


def test_a_finished_reply_is_not_kept_past_the_window(settings: Settings, auth: H) -> None:
    harness = Harness(msgspec.structs.replace(settings, stream_replay_s=0))
    with harness.live(auth) as c:
        _, t = setup(c)
        run_id = send(c, t["id"], content="hi")[0].data["runId"]
        assert _stream(c, t["id"], runId=run_id).status_code == 404
