"""``GET /api/threads/{id}/context``, ``POST /api/threads/{id}/compact`` and the send's
``includeEvents`` through the web app (docs/compaction.md). The harness's model is
``local`` (whose threads are not compacted); the summaries themselves are the unit
tests' (tests/unit/test_compaction_on_request.py) and the e2e test's."""

from __future__ import annotations

import uuid
from typing import Any

from tests.sse import Event, names, parse, parse_lines
from tests.web.conftest import bearer, make_jwt
from tests.web.harness import SharedHarness

H = dict[str, str]


def _thread(c: Any, preamble: str = "Be brief.") -> str:
    a = c.post("/api/agents", json={"name": "Ctx", "stablePreamble": preamble}).json()
    return str(c.post("/api/threads", json={"agentId": a["id"]}).json()["id"])


def test_the_context_is_what_the_next_turn_sends(harness: SharedHarness, auth: H) -> None:
    with harness.live(auth) as c:
        tid = _thread(c)
        r = c.post(
            f"/api/threads/{tid}/messages",
            json={"content": "hello", "systemPromptOverlay": "just this once"},
        )
        assert names(parse(r.text))[-1] == "done"
        got = c.get(f"/api/threads/{tid}/context")
        assert got.status_code == 200, got.text
        body = got.json()
        assert (body["model"], body["system"], body["summary"]) == ("local", "Be brief.", None)
        assert body["summarised_through"] is None
        assert [(m["role"], m["tool_calls"], m["tool_call_id"]) for m in body["messages"]] == [
            ("user", [], None),
            ("assistant", [], None),
        ]
        assert body["messages"][0]["content"] == "hello"
        chars = len("Be brief.") + sum(len(m["content"]) for m in body["messages"])
        assert body["tokens"] == chars // 4 + 1
        # what the next turn sends: that system prompt and those messages, then its own
        c.post(f"/api/threads/{tid}/messages", json={"content": "again"})
        sent = harness.model.requests[-1]
        assert sent.system == body["system"]
        assert [m.content for m in sent.messages] == [
            "hello",
            body["messages"][1]["content"],
            "again",
        ]


def test_compact_and_context_answer_as_the_thread_does(
    harness: SharedHarness, auth: H, org_id: str
) -> None:
    with harness.live(auth) as c:
        tid = _thread(c)
        local = c.post(f"/api/threads/{tid}/compact")
        assert local.status_code == 422
        assert local.json()["detail"] == "model: 'local': the local model is not compacted"
        missing = uuid.uuid4()
        assert c.get(f"/api/threads/{missing}/context").status_code == 404
        assert c.post(f"/api/threads/{missing}/compact").status_code == 404
        stranger = bearer(make_jwt(sub="mallory", org=org_id))
        assert c.get(f"/api/threads/{tid}/context", headers=stranger).status_code == 403
        assert c.post(f"/api/threads/{tid}/compact", headers=stranger).status_code == 403


def test_include_events_takes_known_names_only(harness: SharedHarness, auth: H) -> None:
    with harness.live(auth) as c:
        tid = _thread(c)
        bad = c.post(
            f"/api/threads/{tid}/messages",
            json={"content": "hi", "includeEvents": ["compaction", "everything"]},
        )
        assert bad.status_code == 422
        assert bad.json()["error"] == "VALIDATION_ERROR"
        ok = c.post(
            f"/api/threads/{tid}/messages",
            json={"content": "hi", "includeEvents": ["compaction"]},
        )
        assert ok.status_code == 200
        assert names(parse(ok.text)) == ["meta", *["token"] * (len(parse(ok.text)) - 2), "done"]
        # an edit and a regenerate send too: they take the same names, and no other
        bad = c.post(f"/api/threads/{tid}/regenerate", json={"includeEvents": ["everything"]})
        assert bad.status_code == 422
        assert bad.json()["error"] == "VALIDATION_ERROR"
        again = c.post(f"/api/threads/{tid}/regenerate", json={"includeEvents": ["compaction"]})
        assert again.status_code == 200
        assert names(parse(again.text))[-1] == "done"
        mid = c.get(f"/api/threads/{tid}/messages").json()["messages"][0]["id"]
        bad = c.post(
            f"/api/threads/{tid}/messages/{mid}/edit",
            json={"content": "hey", "includeEvents": ["everything"]},
        )
        assert bad.status_code == 422


def test_compact_is_409_while_a_reply_streams(harness: SharedHarness, auth: H) -> None:
    with harness.live(auth) as c:
        tid = _thread(c)
        with c.stream("POST", f"/api/threads/{tid}/messages", json={"content": "slowly"}) as r:
            items = parse_lines(r.iter_lines())
            next(i for i in items if isinstance(i, Event) and i.event == "token")
            busy = c.post(f"/api/threads/{tid}/compact")
            assert busy.status_code == 409
            assert busy.json()["error"] == "THREAD_BUSY"
            assert c.post(f"/api/threads/{tid}/stop").json() == {"ok": True}
            list(items)
