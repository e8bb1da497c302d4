"""The real service process against both fake providers (Anthropic-style 'alpha' and
OpenAI-style 'beta') on loopback: what the provider receives, and what the client sees."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.service import Service, client, new_org, running
from tests.fakes.providers import FakeProvider, Kind, Reply, ToolCallSpec
from tests.sse import Event, names, parse, parse_lines, tokens

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

PROVIDER_KEY = "sk-test-provider-key-never-shown-0123456789"
MODEL: dict[Kind, str] = {"alpha": "claude-e2e-1", "beta": "gpt-e2e-1"}


class World:
    def __init__(self, kind: Kind, fake: FakeProvider, svc: Service, key: str) -> None:
        self.kind = kind
        self.fake = fake
        self.svc = svc
        self.client = client(svc, key, timeout=30)

    def thread(self, **agent: Any) -> str:
        a = self.client.post(
            "/api/agents", json={"name": "P", "defaultModel": MODEL[self.kind], **agent}
        ).json()
        t = self.client.post("/api/threads", json={"agentId": a["id"]}).json()
        return str(t["id"])

    def send(self, tid: str, **body: Any) -> list[Event]:
        r = self.client.post(f"/api/threads/{tid}/messages", json=body)
        assert r.status_code == 200, r.text
        assert PROVIDER_KEY not in r.text
        return parse(r.text)

    def bodies(self) -> list[dict[str, Any]]:
        return [r.json for r in self.fake.requests if r.json is not None]

    def texts(self, body: dict[str, Any]) -> list[tuple[str, str]]:
        """(role, text) of each message the provider received, in its own format."""
        out = []
        for m in body["messages"]:
            content = m.get("content")
            if isinstance(content, list):
                content = "".join(b.get("text", "") for b in content if b.get("type") == "text")
            out.append((m["role"], content or ""))
        return out

    def system(self, body: dict[str, Any]) -> str | None:
        if self.kind == "alpha":
            system = body.get("system")
            if isinstance(system, list):
                return "".join(b["text"] for b in system)
            return system
        first = body["messages"][0]
        return first["content"] if first["role"] == "system" else None


JWT_SECRET = "providers-e2e-jwt-secret-0123456789abcdefghijklmn"


@pytest.fixture(scope="module")
def served(
    pg_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Service, dict[Kind, FakeProvider]]]:
    """One service for the module, configured with both fakes: each test talks to
    the provider its model names, in an organization of its own."""
    tmp = tmp_path_factory.mktemp("providers")
    fakes = {kind: FakeProvider(kind, api_key=PROVIDER_KEY) for kind in MODEL}
    env = {
        "AGENTSVC_DATABASE_URL": pg_url,
        "AGENTSVC_BOOTSTRAP_API_KEY": f"ask_e2e_{uuid.uuid4().hex}",
        "AGENTSVC_BOOTSTRAP_ORG": f"prov-{uuid.uuid4().hex[:8]}",
        "AGENTSVC_JWT_SECRET": JWT_SECRET,
    }
    for kind, fake in fakes.items():
        base = fake.start()
        env[f"AGENTSVC_{kind.upper()}_BASE_URL"] = base if kind == "alpha" else f"{base}/v1"
        env[f"AGENTSVC_{kind.upper()}_API_KEY"] = PROVIDER_KEY
    try:
        with running(env, log=tmp / "svc.log") as svc:
            yield svc, fakes
    finally:
        for fake in fakes.values():
            fake.stop()


@pytest.fixture(params=["alpha", "beta"])
def world(
    request: pytest.FixtureRequest, served: tuple[Service, dict[Kind, FakeProvider]]
) -> Iterator[World]:
    kind = request.param
    svc, fakes = served
    for fake in fakes.values():
        fake.reset()  # no reply scripted, no request recorded by an earlier test
    _, key = new_org(svc.url, JWT_SECRET, "prov")
    w = World(kind, fakes[kind], svc, key)
    yield w
    w.client.close()
    assert PROVIDER_KEY not in svc.log_path.read_text(errors="replace"), "the key leaked"


def test_multi_turn_sends_the_full_history_each_time(world: World) -> None:
    tid = world.thread(stablePreamble="You are terse.")
    said = ["one", "two", "three"]
    for text in said:
        events = world.send(tid, content=text, systemPromptOverlay="Answer in English.")
        assert names(events)[0] == "meta"
        assert names(events)[-1] == "done"
        assert events[-1].data["content"] == f"You said: {text}"
        assert events[-1].data["content"] == tokens(events)
    bodies = world.bodies()
    assert len(bodies) == 3
    for i, body in enumerate(bodies):
        assert body["model"] == MODEL[world.kind]
        assert body["stream"] is True
        assert world.system(body) == "You are terse.\n\nAnswer in English."
        convo = [(r, t) for r, t in world.texts(body) if r != "system"]
        expected: list[tuple[str, str]] = []
        for j in range(i):
            expected += [("user", said[j]), ("assistant", f"You said: {said[j]}")]
        expected.append(("user", said[i]))
        assert convo == expected
    headers = world.fake.requests[0].headers
    if world.kind == "alpha":
        assert headers["x-api-key"] == PROVIDER_KEY
    else:
        assert headers["authorization"] == f"Bearer {PROVIDER_KEY}"


def test_usage_from_the_provider_reaches_done(world: World) -> None:
    tid = world.thread()
    world.fake.enqueue(
        Reply(text="Counted answer here.", input_tokens=40, output_tokens=7, cached_tokens=10)
    )
    usage = world.send(tid, content="count")[-1].data["usage"]
    assert usage["inputTokens"] == 50  # cached tokens are part of the prompt
    assert usage["outputTokens"] == 7
    assert usage["totalTokens"] == 57
    assert usage["cachedInputTokens"] == 10


def test_stop_mid_stream_closes_the_provider_stream(world: World) -> None:
    tid = world.thread()
    world.fake.enqueue(Reply(tokens=[f"w{i} " for i in range(200)], token_delay=0.05))
    seen: list[Event] = []
    c = world.client
    with c.stream("POST", f"/api/threads/{tid}/messages", json={"content": "long"}) as r:
        for item in parse_lines(r.iter_lines()):
            if isinstance(item, Event):
                seen.append(item)
                if item.event == "token" and item.data["delta"].startswith("w3"):
                    assert c.post(f"/api/threads/{tid}/stop").json() == {"ok": True}
    assert seen[-1].event == "done"
    assert seen[-1].data["stopped"] is True
    assert "messageId" not in seen[-1].data
    world.fake.wait_for_active_streams(0, timeout=5)  # the upstream request was closed
    msgs = c.get(f"/api/threads/{tid}/messages").json()["messages"]
    assert msgs[-1]["content"] == seen[-1].data["content"] == tokens(seen)


def test_disconnect_does_not_cancel_the_reply(world: World) -> None:
    tid = world.thread()
    world.fake.enqueue(Reply(tokens=[f"t{i} " for i in range(30)], token_delay=0.02))
    c = world.client
    with c.stream("POST", f"/api/threads/{tid}/messages", json={"content": "go"}) as r:
        for item in parse_lines(r.iter_lines()):
            if isinstance(item, Event) and item.event == "token":
                break
    deadline = time.monotonic() + 10
    while len(msgs := c.get(f"/api/threads/{tid}/messages").json()["messages"]) < 2:
        assert time.monotonic() < deadline, "the reply was not stored"
        time.sleep(0.1)
    assert msgs[-1]["content"] == "".join(f"t{i} " for i in range(30))
    assert msgs[-1]["status"] == "complete"


def test_provider_errors(world: World) -> None:
    tid = world.thread()
    # a 429 then a 503 before any token are retried; the third answer succeeds
    world.fake.enqueue(Reply(status=429), Reply(status=503), Reply(text="third time lucky"))
    assert world.send(tid, content="retry me")[-1].data["content"] == "third time lucky"
    # a failure after tokens is not retried: an error event, and the user message is kept
    world.fake.enqueue(Reply(text="half of an answer that breaks", error_after_tokens=2))
    events = world.send(tid, content="break")
    assert names(events)[-1] == "error"
    assert "done" not in names(events)
    assert events[-1].data["code"] == "PROVIDER_ERROR"
    # bad credentials upstream: a clear code, no secret
    world.fake.enqueue(Reply(status=401))
    events = world.send(tid, content="auth")
    assert events[-1].data["code"] == "PROVIDER_AUTH"
    msgs = world.client.get(f"/api/threads/{tid}/messages").json()["messages"]
    assert [m["content"] for m in msgs if m["role"] == "user"] == ["retry me", "break", "auth"]


def test_client_tool_round_trip_in_the_providers_wire_format(world: World) -> None:
    tid = world.thread()
    weather = {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    }
    world.fake.enqueue(
        Reply(
            text="",
            tool_calls=[
                ToolCallSpec(id="call_abc", name="get_weather", arguments={"city": "Paris"})
            ],
        )
    )
    events = world.send(tid, content="Weather in Paris?", tools=[weather])
    assert names(events)[-2:] == ["requires_action", "done"]
    assert events[-2].data["toolCalls"] == [
        {"id": "call_abc", "name": "get_weather", "arguments": {"city": "Paris"}}
    ]
    offered = world.bodies()[-1]["tools"]
    if world.kind == "alpha":
        assert offered == [
            {
                "name": "get_weather",
                "description": "Weather for a city",
                "input_schema": weather["parameters"],
            }
        ]
    else:
        assert offered == [{"type": "function", "function": weather}]

    world.fake.enqueue(Reply(text="It is sunny in Paris."))
    events = world.send(
        tid, content="", toolResults=[{"toolCallId": "call_abc", "output": "sunny, 21 C"}]
    )
    assert events[-1].data["content"] == "It is sunny in Paris."
    body = world.bodies()[-1]
    if world.kind == "alpha":
        assistant, result = body["messages"][-2:]
        assert assistant["role"] == "assistant"
        assert any(
            b.get("type") == "tool_use"
            and b["id"] == "call_abc"
            and b["input"] == {"city": "Paris"}
            for b in assistant["content"]
        )
        assert result["role"] == "user"
        assert any(
            b.get("type") == "tool_result" and b["tool_use_id"] == "call_abc"
            for b in result["content"]
        )
    else:
        assistant, result = body["messages"][-2:]
        assert assistant["tool_calls"][0]["id"] == "call_abc"
        assert assistant["tool_calls"][0]["function"]["name"] == "get_weather"
        assert result == {
            **result,
            "role": "tool",
            "tool_call_id": "call_abc",
            "content": "sunny, 21 C",
        }


def test_an_edit_of_the_second_of_five_messages_answers_on_a_new_branch(world: World) -> None:
    """docs/threads.md: the edit streams a new reply, the history shows the new
    branch, the old one is still reachable, and the model was sent the new branch
    only."""
    tid = world.thread()
    for text in ["one", "two", "three", "four", "five"]:
        world.send(tid, content=text)
    before = world.client.get(f"/api/threads/{tid}/messages").json()
    assert before["total"] == 10
    old_leaf = before["messages"][-1]["id"]
    second = before["messages"][2]
    assert (second["content"], second["sibling_count"]) == ("two", 1)
    assert second["parent_id"] == before["messages"][1]["id"]
    r = world.client.post(
        f"/api/threads/{tid}/messages/{second['id']}/edit", json={"content": "two, edited"}
    )
    assert r.status_code == 200, r.text
    events = parse(r.text)
    assert names(events)[0] == "meta"
    assert names(events)[-1] == "done"
    assert events[-1].data["content"] == "You said: two, edited"
    # the model's request: the new branch only
    assert world.texts(world.bodies()[-1]) == [
        ("user", "one"),
        ("assistant", "You said: one"),
        ("user", "two, edited"),
    ]
    now = world.client.get(f"/api/threads/{tid}/messages").json()
    assert [m["content"] for m in now["messages"]] == [
        "one",
        "You said: one",
        "two, edited",
        "You said: two, edited",
    ]
    assert now["total"] == 4
    edited = now["messages"][2]
    assert (edited["sibling_index"], edited["sibling_count"]) == (2, 2)
    assert edited["prev_sibling_id"] == second["id"]
    thread = world.client.get(f"/api/threads/{tid}").json()
    assert thread["head_id"] == now["messages"][-1]["id"]
    # the old branch, by its leaf
    old = world.client.get(f"/api/threads/{tid}/messages", params={"branch": old_leaf}).json()
    assert [m["content"] for m in old["messages"]][::2] == ["one", "two", "three", "four", "five"]
    # switch back to it: the next send follows the old branch
    back = world.client.put(f"/api/threads/{tid}/branch", json={"messageId": second["id"]})
    assert back.status_code == 200, back.text
    assert back.json()["head_id"] == old_leaf
    world.send(tid, content="six")
    assert [t for role, t in world.texts(world.bodies()[-1]) if role == "user"] == [
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
    ]


def test_regenerate_and_fork(world: World) -> None:
    tid = world.thread()
    world.send(tid, content="first")
    world.send(tid, content="second")
    r = world.client.post(f"/api/threads/{tid}/regenerate", json={})
    assert r.status_code == 200, r.text
    assert parse(r.text)[-1].data["content"] == "You said: second"
    assert world.texts(world.bodies()[-1])[-1] == ("user", "second")
    shown = world.client.get(f"/api/threads/{tid}/messages").json()["messages"]
    assert [(m["content"], m["sibling_index"], m["sibling_count"]) for m in shown][2:] == [
        ("second", 1, 1),
        ("You said: second", 2, 2),
    ]
    forked = world.client.post(f"/api/threads/{tid}/fork", json={"messageId": shown[1]["id"]})
    assert forked.status_code == 201, forked.text
    fid = forked.json()["id"]
    assert fid != tid
    assert forked.json()["head_id"] is None
    copy = world.client.get(f"/api/threads/{fid}/messages").json()
    assert [m["content"] for m in copy["messages"]] == ["first", "You said: first"]
    world.send(fid, content="elsewhere")
    assert [t for role, t in world.texts(world.bodies()[-1]) if role == "user"] == [
        "first",
        "elsewhere",
    ]
    # an assistant message cannot be edited; an unknown one is not found
    bad = world.client.post(
        f"/api/threads/{tid}/messages/{shown[1]['id']}/edit", json={"content": "x"}
    )
    assert bad.status_code == 422, bad.text
    missing = world.client.post(
        f"/api/threads/{tid}/messages/{uuid.uuid4()}/edit", json={"content": "x"}
    )
    assert missing.status_code == 404, missing.text
