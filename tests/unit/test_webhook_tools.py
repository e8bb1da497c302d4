"""Webhook tools' use case and tool source: the rules of a definition, delegation,
and what a call sends and answers (the HTTP caller is a fake here; the real one is
tested end to end in tests/e2e/test_webhook_tools_e2e.py)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import msgspec
import pytest

from agentsvc_adapters.crypto import AesGcmBox
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_core.entities import Principal
from agentsvc_core.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from agentsvc_core.ports import (
    SealedRecord,
    ToolCallContext,
    ToolSetup,
    WebhookAnswer,
    WebhookCall,
)
from agentsvc_core.use_cases.server_tools import ToolHub
from agentsvc_core.use_cases.webhook_signing import idempotency_key
from agentsvc_core.use_cases.webhook_tools import (
    WebhookToolChanges,
    WebhookToolDraft,
    WebhookTools,
    WebhookToolSource,
    argument_problem,
)
from tests.contract.test_agents_contract import agent_in
from tests.unit.turn_world import Clock

ORG = "org-hooks"
ADMIN = Principal(org_id=ORG, method="api_key")
MEMBER = Principal(org_id=ORG, method="jwt", user_id="mia", role="member")
SCHEMA = {
    "type": "object",
    "properties": {"orderId": {"type": "string"}},
    "required": ["orderId"],
}


class Caller:
    def __init__(self) -> None:
        self.calls: list[WebhookCall] = []
        self.answer = WebhookAnswer(
            outcome="ok",
            status_code=200,
            body='{"status": "shipped"}',
            content_type="application/json",
        )

    async def call(self, request: WebhookCall) -> WebhookAnswer:
        self.calls.append(request)
        return self.answer


class Urls:
    refuse: str | None = None

    def refusal(self, url: str) -> str | None:
        return self.refuse


class Signing:
    async def signing_secrets(self, org: str) -> list[str]:
        return [f"whsec_{org}"]


class World:
    def __init__(self) -> None:
        self.storage = MemoryStorage()
        self.box = AesGcmBox([("k1", b"\x05" * 32)])
        self.caller = Caller()
        self.urls = Urls()
        self.tools = WebhookTools(
            self.storage.webhook_tools,
            self.storage.agents,
            self.storage.threads,
            self.storage.secrets,
            self.box,
            self.caller,
            self.urls,
            Clock(),
            Signing(),
        )
        self.source = WebhookToolSource(self.tools, self.storage.webhook_tools)

    async def agent(self) -> Any:
        agent = agent_in(ORG)
        await self.storage.agents.add(agent)
        return agent

    async def tool(self, name: str = "lookup_order", **over: Any) -> Any:
        draft = WebhookToolDraft(
            name=name, description="d", parameters=SCHEMA, url="https://hooks.example/o"
        )
        return await self.tools.create(ADMIN, msgspec.structs.replace(draft, **over))


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "1-64"),
        ("x" * 65, "1-64"),
        ("has space", "1-64"),
        ("docs__search", "'__'"),
        ("plan_create", "'plan_'"),
        ("Web_fetch", "'web_'"),
        ("db_x", "'db_'"),
        ("propose_profile_switch", "'propose_'"),
    ],
)
async def test_a_name_that_could_collide_or_is_malformed_is_refused(name: str, why: str) -> None:
    w = World()
    with pytest.raises(InvalidInput) as e:
        await w.tool(name)
    assert e.value.field == "name"
    assert why in e.value.problem


@pytest.mark.parametrize(
    ("parameters", "why"),
    [
        ({"type": "array"}, "root must be"),
        ({"properties": {}}, "root must be"),
        ({"type": "object", "properties": {"a": {"type": "nope"}}}, "not a valid JSON Schema"),
        ({"type": "object", "required": "orderId"}, "not a valid JSON Schema"),
        (
            {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(?!x)"}}},
            "not a valid JSON Schema: the pattern '^(?!x)' is not supported: invalid perl"
            " operator: (?! (patterns are RE2 syntax, which has no backreferences or"
            " lookaround) at properties/a/pattern",
        ),
        (
            {"type": "object", "patternProperties": {r"(.)\1": {}}},
            r"the pattern '(.)\\1' is not supported",
        ),
    ],
)
async def test_parameters_must_be_a_json_schema_with_an_object_root(
    parameters: dict[str, Any], why: str
) -> None:
    w = World()
    with pytest.raises(InvalidInput) as e:
        await w.tool(parameters=parameters)
    assert e.value.field == "parameters"
    assert why in e.value.problem


async def test_url_limits_and_headers_are_checked() -> None:
    w = World()
    w.urls.refuse = "127.0.0.1 is a loopback address"
    with pytest.raises(InvalidInput, match="loopback"):
        await w.tool()
    w.urls.refuse = None
    with pytest.raises(InvalidInput, match="timeout_ms"):
        await w.tool(timeout_ms=60_001)
    with pytest.raises(InvalidInput, match="max_result_bytes"):
        await w.tool(max_result_bytes=0)
    for header in ("X-Service-Signature", "idempotency-key", "Content-Type"):
        with pytest.raises(InvalidInput, match="set by the service"):
            await w.tool(headers={header: "v"})
    with pytest.raises(InvalidInput) as e:
        await w.tool(headers={"X-Key": "secret-value\r\nX-Evil: 1"})
    assert "secret-value" not in e.value.detail


async def test_headers_are_sealed_and_only_a_flag_shows() -> None:
    w = World()
    made = await w.tool(headers={"Authorization": "Bearer s3cr3t-value"})
    assert made.has_headers
    assert "s3cr3t" not in made.headers
    stored = await w.storage.webhook_tools.get(ORG, made.id)
    assert "s3cr3t" not in json.dumps(msgspec.to_builtins(stored))
    # PATCH: null removes them, an absent field keeps them
    kept = await w.tools.update(ADMIN, made.id, WebhookToolChanges(description="new"))
    assert kept.headers == made.headers
    gone = await w.tools.update(ADMIN, made.id, WebhookToolChanges(headers=None))
    assert gone.headers is None


async def test_a_new_url_drops_the_headers_unless_they_are_given_again() -> None:
    """Secrets given for one address are never sent to another: an admin who moves
    the tool cannot make the service send its stored headers somewhere else."""
    w = World()
    made = await w.tool(headers={"Authorization": "Bearer s3cr3t-value"})
    same = await w.tools.update(ADMIN, made.id, WebhookToolChanges(timeout_ms=700))
    assert same.headers == made.headers
    moved = await w.tools.update(ADMIN, made.id, WebhookToolChanges(url="https://evil.example/x"))
    assert moved.headers is None
    again = await w.tools.update(
        ADMIN,
        made.id,
        WebhookToolChanges(url="https://hooks.example/v2", headers={"X-Key": "new-key-1234"}),
    )
    assert again.has_headers
    with pytest.raises(InvalidInput) as e:
        await w.tool("other", headers={"X-Key": "caf\u00e9-secret"})
    assert "ASCII" in e.value.problem
    assert "secret" not in e.value.detail


async def test_names_are_unique_and_writes_need_an_admin() -> None:
    w = World()
    first = await w.tool()
    with pytest.raises(Conflict):
        await w.tool()
    other = await w.tool("other")
    with pytest.raises(Conflict):
        await w.tools.update(ADMIN, other.id, WebhookToolChanges(name="lookup_order"))
    with pytest.raises(PermissionDenied):
        await w.tools.create(
            MEMBER, WebhookToolDraft(name="m", parameters=SCHEMA, url="https://h.example")
        )
    with pytest.raises(PermissionDenied):
        await w.tools.delete(MEMBER, first.id)
    assert [t.name for t in await w.tools.list_all(MEMBER)] == ["lookup_order", "other"]


async def test_an_agent_gets_only_the_tools_delegated_to_it() -> None:
    w = World()
    agent = await w.agent()
    one, _two = await w.tool("one"), await w.tool("two")
    assert await w.source.list_tools(ADMIN, agent) == []
    with pytest.raises(InvalidInput, match="no such tool"):
        await w.tools.set_delegated(ADMIN, agent.id, [one.id, uuid.uuid4()])
    with pytest.raises(NotFound):
        await w.tools.set_delegated(ADMIN, uuid.uuid4(), [one.id])
    config, tools = await w.tools.set_delegated(ADMIN, agent.id, [one.id, one.id])
    assert config.tool_ids == (one.id,)
    assert [t.name for t in tools] == ["one"]
    assert [t.name for t in await w.source.list_tools(ADMIN, agent)] == ["one"]
    # the turn hands the record it read: no storage read for the delegation
    record = await w.storage.secrets.get(ORG, "delegated", str(agent.id))
    assert isinstance(record, SealedRecord)
    specs = await w.source.list_tools(ADMIN, agent, ToolSetup(records={"delegated": record}))
    assert [(s.name, s.parameters) for s in specs] == [("one", SCHEMA)]
    # a deleted tool drops out of the agent's list
    await w.tools.delete(ADMIN, one.id)
    assert await w.source.list_tools(ADMIN, agent) == []
    assert (await w.tools.delegated(ADMIN, agent.id))[1] == []


async def test_a_call_sends_the_signed_body_and_answers_for_the_model() -> None:
    w = World()
    agent = await w.agent()
    t = await w.tool(headers={"X-Key": "k-123456789"}, method="PUT", timeout_ms=2500)
    await w.tools.set_delegated(ADMIN, agent.id, [t.id])
    thread = uuid.uuid4()
    ctx = ToolCallContext(tool_call_id="call_9", thread_id=thread, user_id="alice")
    hub = ToolHub([w.source])
    assert hub.owns("lookup_order")
    assert not hub.is_extension("lookup_order")
    assert await hub.call(ADMIN, agent, "lookup_order", {"orderId": "A-1"}, ctx) == (
        '{"status": "shipped"}'
    )
    [sent] = w.caller.calls
    assert (sent.method, sent.timeout_ms) == ("PUT", 2500)
    # the key names this call: a retry repeats it, another thread's call_9 does not
    assert sent.idempotency_key == idempotency_key(ORG, thread, "call_9")
    assert sent.idempotency_key != idempotency_key(ORG, uuid.uuid4(), "call_9")
    assert sent.headers == {"X-Key": "k-123456789"}
    assert sent.secrets == [f"whsec_{ORG}"]
    assert json.loads(sent.body) == {
        "tool": "lookup_order",
        "toolCallId": "call_9",
        "arguments": {"orderId": "A-1"},
        "orgId": ORG,
        "agentId": str(agent.id),
        "threadId": str(thread),
        "userId": "alice",
    }
    # arguments that do not fit never leave
    answer = await w.source.call(ADMIN, agent, "lookup_order", {"orderId": 1}, ctx)
    assert answer.startswith("error: the arguments do not fit the tool's schema: orderId: 1 is not")
    assert len(w.caller.calls) == 1
    for outcome, status, expected in [
        ("status", 500, "error: the tool answered HTTP 500: boom"),
        ("timeout", None, "error: the tool did not answer within 2500 ms"),
        ("too_large", 200, "error: the tool's answer is larger than 65536 bytes"),
        ("refused", None, "error: the tool's URL was refused: a loopback address"),
        ("unreachable", None, "error: the tool could not be reached: could not reach h"),
    ]:
        w.caller.answer = WebhookAnswer(
            outcome=outcome,  # type: ignore[arg-type]
            status_code=status,
            body="boom",
            reason={"refused": "a loopback address", "unreachable": "could not reach h"}.get(
                outcome, ""
            ),
        )
        assert await w.source.call(ADMIN, agent, "lookup_order", {"orderId": "A"}, ctx) == expected


async def test_a_tool_not_delegated_is_not_called_even_by_name() -> None:
    w = World()
    agent = await w.agent()
    await w.tool()
    answer = await w.source.call(
        ADMIN, agent, "lookup_order", {"orderId": "A"}, ToolCallContext(tool_call_id="c")
    )
    assert answer == "error: the webhook tool 'lookup_order' is not available to this agent"
    assert w.caller.calls == []


async def test_execute_answers_the_documented_shape() -> None:
    w = World()
    await w.tool()
    done = await w.tools.execute(ADMIN, "lookup_order", {"orderId": "A"})
    assert (done.ok, done.status_code, done.result, done.error) == (
        True,
        200,
        {"status": "shipped"},
        None,
    )
    assert len(w.caller.calls[-1].idempotency_key or "") == 64
    with pytest.raises(NotFound):  # a thread of no organization of the caller's
        await w.tools.execute(ADMIN, "lookup_order", {"orderId": "A"}, thread_id=uuid.uuid4())
    bad = await w.tools.execute(ADMIN, "lookup_order", {})
    assert (bad.ok, bad.status_code, bad.result) == (False, None, None)
    assert "'orderId' is a required property" in (bad.error or "")
    with pytest.raises(NotFound):
        await w.tools.execute(ADMIN, "nope", {})
    with pytest.raises(PermissionDenied):
        await w.tools.execute(MEMBER, "lookup_order", {"orderId": "A"})


def test_argument_problems_name_the_path_and_fetch_nothing() -> None:
    schema = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/item"}}},
        "$defs": {"item": {"type": "integer"}},
    }
    assert argument_problem(schema, {"items": [1, 2]}) is None
    assert argument_problem(schema, {"items": [1, "x"]}) == "items/1: 'x' is not of type 'integer'"
    # a remote reference is never fetched: the call is refused, the turn goes on
    remote = {"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:9/x.json"}}}
    problem = argument_problem(remote, {"a": 1})
    assert problem is not None
    assert problem.startswith("the tool's schema cannot be applied: ")
    assert "127.0.0.1:9/x.json" in problem


async def test_a_stored_pattern_re2_cannot_compile_is_a_tool_error_naming_it() -> None:
    """A schema saved before patterns were checked with RE2: the call is refused, with
    the pattern named, and nothing is sent."""
    w = World()
    agent = await w.agent()
    t = await w.tool()
    old = {"type": "object", "properties": {"orderId": {"type": "string", "pattern": "^(?=A)"}}}
    stored = msgspec.structs.replace(t, parameters=old)
    assert await w.storage.webhook_tools.replace(stored, t)
    await w.tools.set_delegated(ADMIN, agent.id, [t.id])
    ctx = ToolCallContext(tool_call_id="c1", thread_id=None, user_id=None)
    said = await w.source.call(ADMIN, agent, "lookup_order", {"orderId": "A-1"}, ctx)
    assert said.startswith(
        "error: the arguments do not fit the tool's schema: the tool's schema cannot be"
        " applied: the pattern '^(?=A)' is not supported"
    )
    done = await w.tools.execute(ADMIN, "lookup_order", {"orderId": "A-1"})
    assert not done.ok
    assert "the pattern '^(?=A)' is not supported" in (done.error or "")
    assert w.caller.calls == []


async def test_a_source_that_breaks_gives_the_model_an_error_not_a_broken_reply() -> None:
    w = World()
    agent = await w.agent()
    t = await w.tool()
    await w.tools.set_delegated(ADMIN, agent.id, [t.id])

    async def broken(request: WebhookCall) -> WebhookAnswer:
        raise RuntimeError("a bug")

    w.caller.call = broken  # type: ignore[method-assign]
    answer = await ToolHub([w.source]).call(
        ADMIN, agent, "lookup_order", {"orderId": "A"}, ToolCallContext(tool_call_id="c")
    )
    assert answer == "error: the tool 'lookup_order' failed unexpectedly"


def test_the_source_owns_only_names_a_webhook_tool_may_take() -> None:
    source = World().source
    assert source.owns("lookup_order")
    for other in ("plan_create", "todo_add", "web_fetch", "db_x__query", "docs__search", "Web_x"):
        assert not source.owns(other), other
