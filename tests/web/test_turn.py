"""The turn (docs/client-guide.md; docs/api.md, "The turn, server side" and "Tool profiles"),
over real HTTP/SSE (the app on a real server in a thread; test doubles for the model)."""

from __future__ import annotations

import time
from typing import Any
from uuid import UUID

import httpx
import msgspec
import pytest

from agentsvc_web.settings import Settings
from tests.sse import Event, names, parse, parse_lines, tokens
from tests.web.harness import Harness, SharedHarness

H = dict[str, str]


def setup(c: httpx.Client, **agent: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    a = c.post("/api/agents", json={"name": "Helper", **agent}).json()
    thread_extra = agent.pop("_thread", {}) if "_thread" in agent else {}
    t = c.post("/api/threads", json={"agentId": a["id"], **thread_extra}).json()
    return a, t


def send(c: httpx.Client, thread_id: str, **body: Any) -> list[Event]:
    r = c.post(f"/api/threads/{thread_id}/messages", json=body)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    return parse(r.text)


def history(c: httpx.Client, thread_id: str) -> list[dict[str, Any]]:
    body = c.get(f"/api/threads/{thread_id}/messages").json()
    assert body["total"] == len(body["messages"])
    return body["messages"]  # type: ignore[no-any-return]


def wait_for(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_a_reply_streams_meta_tokens_done(harness: SharedHarness, auth: H) -> None:
    with harness.live(auth) as c:
        _, t = setup(c)
        events = send(c, t["id"], content="Hello!")
        assert names(events)[0] == "meta"
        assert names(events)[-1] == "done"
        assert set(names(events)[1:-1]) == {"token"}
        assert [e.id for e in events] == list(range(1, len(events) + 1))
        assert "startedAt" in events[0].data
        done = events[-1].data
        assert done["ok"] is True
        assert done["content"] == tokens(events)
        assert "Hello!" in done["content"]
        assert set(done["usage"]) >= {"inputTokens", "outputTokens", "totalTokens"}
        assert (
            done["usage"]["totalTokens"]
            == done["usage"]["inputTokens"] + done["usage"]["outputTokens"]
        )
        assert "stopped" not in done
        msgs = history(c, t["id"])
        assert [(m["role"], m["content"]) for m in msgs] == [
            ("user", "Hello!"),
            ("assistant", done["content"]),
        ]
        assert msgs[1]["id"] == done["messageId"]


def test_every_turn_gives_the_model_the_whole_history(harness: SharedHarness, auth: H) -> None:
    with harness.live(auth) as c:
        _, t = setup(c)
        said = ["first", "second", "third", "fourth"]
        for text in said:
            send(c, t["id"], content=text)
        seen = [[(m.role, m.content) for m in r.messages] for r in harness.model.requests]
        assert len(seen) == 4
        for i, request in enumerate(seen):
            users = [content for role, content in request if role == "user"]
            assert users == said[: i + 1]
            assert [role for role, _ in request] == ["user", "assistant"] * i + ["user"]
        last = send(c, t["id"], content="fifth")[-1].data["content"]
        assert 'Before that you said: "fourth"' in last
        assert "message 5" in last


def test_overlays_and_metadata_reach_the_model_and_the_usage_record(
    harness: SharedHarness, auth: H
) -> None:
    with harness.live(auth) as c:
        a = c.post("/api/agents", json={"name": "A", "stablePreamble": "PREAMBLE"}).json()
        t = c.post(
            "/api/threads",
            json={
                "agentId": a["id"],
                "systemPromptOverlay": ["T1", "T2"],
                "metadata": {"team": "x", "env": "prod"},
            },
        ).json()
        send(
            c,
            t["id"],
            content="hi",
            systemPromptOverlay="MSG",
            metadata={"env": "test", "run": "7"},
        )
        assert harness.model.requests[-1].system == "PREAMBLE\n\nT1\n\nT2\n\nMSG"
        send(c, t["id"], content="again")
        assert (
            harness.model.requests[-1].system == "PREAMBLE\n\nT1\n\nT2"
        )  # message overlay not kept
        records = harness.run_any(
            harness.services.storage.conversations.usage, t["org_id"], UUID(t["id"])
        )
        assert len(records) == 2
        assert records[0].metadata == {"team": "x", "env": "test", "run": "7"}
        assert records[1].metadata == {"team": "x", "env": "prod"}
        assert records[0].model == "local"
        assert records[0].key_source == "platform"
        assert records[0].agent_id.hex == a["id"].replace("-", "")
        assert records[0].usage.output_tokens > 0


def test_stop_mid_stream_keeps_the_partial_reply(harness: SharedHarness, auth: H) -> None:
    with harness.live(auth) as c:
        _, t = setup(c)
        assert c.post(f"/api/threads/{t['id']}/stop").json() == {"ok": False}
        seen: list[Event] = []
        with c.stream(
            "POST", f"/api/threads/{t['id']}/messages", json={"content": "go slowly please"}
        ) as r:
            for item in parse_lines(r.iter_lines()):
                if not isinstance(item, Event):
                    continue
                seen.append(item)
                if item.event == "token" and "word3" in item.data["delta"]:
                    assert c.post(f"/api/threads/{t['id']}/stop").json() == {"ok": True}
        done = seen[-1]
        assert done.event == "done"
        assert done.data["ok"] is True
        assert done.data["stopped"] is True
        assert "messageId" not in done.data
        assert done.data["content"] == tokens(seen)
        assert "word50" not in done.data["content"]
        msgs = history(c, t["id"])
        assert msgs[-1]["role"] == "assistant"
        assert msgs[-1]["content"] == done.data["content"]
        assert msgs[-1]["status"] == "stopped"
        # the thread is free again
        assert names(send(c, t["id"], content="next"))[-1] == "done"


def test_a_client_that_disconnects_does_not_cancel_the_reply(
    harness: SharedHarness, auth: H
) -> None:
    with harness.live(auth) as c:
        _, t = setup(c)
        with c.stream(
            "POST", f"/api/threads/{t['id']}/messages", json={"content": "slowly now"}
        ) as r:
            for item in parse_lines(r.iter_lines()):
                if isinstance(item, Event) and item.event == "token":
                    break  # hang up after the first token
        wait_for(lambda: len(history(c, t["id"])) == 2, timeout=15)
        reply = history(c, t["id"])[-1]
        assert reply["status"] == "complete"
        assert reply["content"].endswith("word50.")


def test_a_second_send_while_busy_is_409(harness: SharedHarness, auth: H) -> None:
    with harness.live(auth) as c:
        _, t = setup(c)
        with c.stream("POST", f"/api/threads/{t['id']}/messages", json={"content": "slowly"}) as r:
            items = parse_lines(r.iter_lines())
            # the first token: the slow reply (50 words, 0.05 s apart) is running now
            first = next(i for i in items if isinstance(i, Event) and i.event == "token")
            assert first.data["delta"]
            busy = c.post(f"/api/threads/{t['id']}/messages", json={"content": "me too"})
            assert busy.status_code == 409
            assert busy.json()["error"] == "THREAD_BUSY"
            assert c.post(f"/api/threads/{t['id']}/stop").json() == {"ok": True}
            rest = [i for i in items if isinstance(i, Event)]
        assert rest[-1].event == "done"
        assert rest[-1].data["stopped"] is True  # still running when the second send came
        assert [m["content"] for m in history(c, t["id"]) if m["role"] == "user"] == ["slowly"]


def test_provider_failure_is_an_error_event_and_keeps_the_user_message(
    harness: SharedHarness, auth: H
) -> None:
    with harness.live(auth) as c:
        _, t = setup(c)
        events = send(c, t["id"], content="this will fail", modelOverride="fail-model")
        assert names(events) == ["meta", "token", "token", "error"]
        assert events[-1].data["code"] == "PROVIDER_UNAVAILABLE"
        assert "503" in events[-1].data["detail"]
        msgs = history(c, t["id"])
        assert msgs[0] == {**msgs[0], "role": "user", "content": "this will fail"}
        assert msgs[1]["status"] == "failed"
        assert msgs[1]["content"] == "partial answer"
        assert names(send(c, t["id"], content="and now?"))[-1] == "done"  # not stuck busy


def test_unknown_model_is_422_before_anything_streams(harness: SharedHarness, auth: H) -> None:
    with harness.live(auth) as c:
        _, t = setup(c)
        r = c.post(
            f"/api/threads/{t['id']}/messages", json={"content": "x", "modelOverride": "mystery-9"}
        )
        assert (r.status_code, r.json()["error"]) == (422, "VALIDATION_ERROR")
        assert history(c, t["id"]) == []


def test_client_tool_round_trip(harness: SharedHarness, auth: H) -> None:
    weather = {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    with harness.live(auth) as c:
        _, t = setup(c)
        events = send(c, t["id"], content='call get_weather {"city": "Paris"}', tools=[weather])
        assert names(events)[-2:] == ["requires_action", "done"]
        calls = events[-2].data["toolCalls"]
        assert [(x["name"], x["arguments"]) for x in calls] == [("get_weather", {"city": "Paris"})]
        assert events[-1].data["ok"] is True
        assert "get_weather" in [tl.name for tl in harness.model.requests[-1].tools]

        # ignoring the pending action is refused clearly
        r = c.post(f"/api/threads/{t['id']}/messages", json={"content": "never mind"})
        assert r.status_code == 422
        assert calls[0]["id"] in r.json()["detail"]
        r = c.post(
            f"/api/threads/{t['id']}/messages",
            json={"content": "", "toolResults": [{"toolCallId": "wrong", "output": "x"}]},
        )
        assert r.status_code == 422

        events = send(
            c,
            t["id"],
            content="",
            toolResults=[{"toolCallId": calls[0]["id"], "output": "sunny, 21 C"}],
        )
        assert names(events)[-1] == "done"
        assert "sunny, 21 C" in events[-1].data["content"]
        last = harness.model.requests[-1].messages
        assert [m.role for m in last][-2:] == ["assistant", "tool"]
        assert last[-2].tool_calls[0].id == calls[0]["id"]
        assert last[-1].tool_call_id == calls[0]["id"]
        # results with no pending action are refused too
        r = c.post(
            f"/api/threads/{t['id']}/messages",
            json={"content": "", "toolResults": [{"toolCallId": "x", "output": "y"}]},
        )
        assert r.status_code == 422


def test_server_tool_events_come_in_order_then_the_text(harness: SharedHarness, auth: H) -> None:
    with harness.live(auth) as c:
        _, t = setup(c)
        events = send(c, t["id"], content='call kb__search {"q": "refunds"}')
        n = names(events)
        assert n[:4] == ["meta", "tool_call", "tool_executing", "tool_result"]
        assert set(n[4:-1]) == {"token"}
        assert n[-1] == "done"
        call = events[1].data["tool"]
        assert (call["name"], call["arguments"]) == ("kb__search", {"q": "refunds"})
        assert events[2].data["tool_name"] == "kb__search"
        assert events[3].data == {
            **events[3].data,
            "tool_name": "kb__search",
            "tool_call_id": call["id"],
        }
        assert events[3].data["result"] == "1 argument(s), found 3 articles"
        assert "found 3 articles" in events[-1].data["content"]
        assert harness.tools.calls == [("kb__search", {"q": "refunds"})]
        # the tool step is kept for the model, the history shows the conversation
        msgs = history(c, t["id"])
        assert [m["role"] for m in msgs] == ["user", "assistant"]


def test_profile_gating_hides_tools_outside_the_profile(harness: SharedHarness, auth: H) -> None:
    profiles = {
        "support": {"tools": ["kb__search"], "description": "answer questions"},
        "admin": {"tools": ["kb__search", "kb__admin"], "description": "manage the knowledge base"},
    }
    with harness.live(auth) as c:
        a = c.post(
            "/api/agents", json={"name": "A", "toolProfiles": profiles, "defaultProfile": "support"}
        ).json()
        t = c.post("/api/threads", json={"agentId": a["id"]}).json()

        def offered() -> set[str]:
            return {tl.name for tl in harness.model.requests[-1].tools}

        send(c, t["id"], content="call kb__admin")  # agent default profile: support
        assert offered() == {"kb__search", "propose_profile_switch"}
        assert harness.tools.calls == []  # kb__admin was never offered, never called

        c.patch(f"/api/threads/{t['id']}", json={"activeProfile": "admin"})
        send(c, t["id"], content="hello")
        assert offered() == {"kb__search", "kb__admin", "propose_profile_switch"}

        send(c, t["id"], content="hello", toolProfile="support")  # the message's profile wins
        assert offered() == {"kb__search", "propose_profile_switch"}

        # no profiles at all: every server tool, and no switch tool
        b = c.post("/api/agents", json={"name": "B"}).json()
        t2 = c.post("/api/threads", json={"agentId": b["id"]}).json()
        send(c, t2["id"], content="hi")
        assert offered() == {"kb__search", "kb__admin", "crm__lookup"}


def test_profile_switch_is_proposed_not_made(harness: SharedHarness, auth: H) -> None:
    profiles = {"support": {"tools": ["kb__search"]}, "admin": {"tools": ["kb__admin"]}}
    with harness.live(auth) as c:
        a = c.post("/api/agents", json={"name": "A", "toolProfiles": profiles}).json()
        t = c.post("/api/threads", json={"agentId": a["id"], "activeProfile": "support"}).json()
        events = send(
            c,
            t["id"],
            content='call propose_profile_switch {"target": "admin", "reason": "needs admin"}',
        )
        proposals = [e.data for e in events if e.event == "profile_switch_proposal"]
        assert proposals == [{"target": "admin", "reason": "needs admin"}]
        assert names(events)[-1] == "done"
        assert c.get(f"/api/threads/{t['id']}").json()["active_profile"] == "support"


def test_a_tool_needing_oauth_emits_auth_challenge(harness: SharedHarness, auth: H) -> None:
    with harness.live(auth) as c:
        _, t = setup(c)
        events = send(c, t["id"], content="call crm__lookup")
        challenge = [e.data for e in events if e.event == "auth_challenge"]
        assert challenge == [
            {
                "toolName": "crm__lookup",
                "challenge": {
                    "provider": "crm",
                    "redirectUrl": "https://crm.example/authorize?x=1",
                    "description": "Connect your CRM",
                },
            }
        ]
        assert names(events)[-1] == "done"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "content"),
        ({"content": ""}, "content"),
        ({"content": 5}, "content"),
        ({"content": "x", "metadata": {"a": 1}}, "metadata"),
        ({"content": "x", "tools": [{"name": "has space"}]}, "tools"),
        ({"content": "x", "tools": [{"name": "propose_profile_switch"}]}, "tools"),
        ({"content": "x", "modelOverride": "no spaces please"}, "modelOverride"),
        ({"content": "nul \u0000"}, "content"),
    ],
)
def test_invalid_sends_are_422(
    harness: SharedHarness, auth: H, body: dict[str, Any], field: str
) -> None:
    with harness.client() as tc:
        a = tc.post("/api/agents", json={"name": "A"}, headers=auth).json()
        t = tc.post("/api/threads", json={"agentId": a["id"]}, headers=auth).json()
        r = tc.post(f"/api/threads/{t['id']}/messages", json=body, headers=auth)
        assert (r.status_code, r.json()["error"]) == (422, "VALIDATION_ERROR"), r.text
        assert field in r.json()["detail"]


def test_keep_alive_comments_come_while_the_model_is_silent(settings: Settings, auth: H) -> None:
    # the interval the web layer wires (Settings.sse_keepalive_s; 15 s by default),
    # here shorter than the pause between the slow model's words
    harness = Harness(msgspec.structs.replace(settings, sse_keepalive_s=0.01))
    with harness.live(auth) as c:
        _, t = setup(c)
        with c.stream("POST", f"/api/threads/{t['id']}/messages", json={"content": "slowly"}) as r:
            items = list(parse_lines(r.iter_lines()))
    comments = [i for i in items if isinstance(i, str)]
    events = [i for i in items if isinstance(i, Event)]
    assert comments
    assert set(comments) == {"keep-alive"}
    assert events[-1].event == "done"
    # between tokens, not only before the first
    first_token = next(
        n for n, i in enumerate(items) if isinstance(i, Event) and i.event == "token"
    )
    assert any(isinstance(i, str) for i in items[first_token:])


def test_tool_approvals_that_answer_nothing_are_422(harness: SharedHarness, auth: H) -> None:
    with harness.live(auth) as c:
        _, t = setup(c)
        path = f"/api/threads/{t['id']}/messages"
        answer = {"toolCallId": "call_1", "approved": True}
        r = c.post(path, json={"content": "", "toolApprovals": [answer]})
        assert (r.status_code, r.json()["error"]) == (422, "VALIDATION_ERROR")
        assert r.json()["detail"] == "toolApprovals: no reply is waiting for approvals"
        r = c.post(path, json={"content": "", "toolApprovals": [{"toolCallId": "call_1"}]})
        assert r.status_code in (400, 422)
        assert "approved" in r.json()["detail"]
