"""Webhook tools (use_cases/webhook_tools.py, docs/tools.md "Webhook tools") over the
memory storage and a recording webhook caller: the rules of a definition and of a
PATCH, sealed headers, delegation, what a call sends, and what the model and
``POST /api/tools/execute`` are answered."""

from __future__ import annotations

import json
import uuid
from types import SimpleNamespace
from typing import Any
from uuid import UUID

import msgspec
import pytest

from agentsvc_adapters.crypto import AesGcmBox
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_core.entities import Agent, Principal, WebhookTool
from agentsvc_core.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from agentsvc_core.ports import (
    SecretUnreadable,
    ToolCallContext,
    ToolSetup,
    WebhookAnswer,
    WebhookCall,
    WebhookToolStore,
)
from agentsvc_core.use_cases import webhook_tools
from agentsvc_core.use_cases.webhook_signing import idempotency_key
from agentsvc_core.use_cases.webhook_tools import (
    DelegatedConfig,
    Execution,
    WebhookToolChanges,
    WebhookToolDraft,
    WebhookTools,
    WebhookToolSource,
    argument_problem,
    check_parameters,
    check_tool_name,
)
from tests.contract.test_agents_contract import agent_in
from tests.contract.test_conversations_contract import a_thread
from tests.unit.turn_world import Clock

ORG = "org-hooks"
ADMIN = Principal(org_id=ORG, method="api_key")
MEMBER = Principal(org_id=ORG, method="jwt", user_id="mia", role="member")
OWNER = Principal(org_id=ORG, method="jwt", user_id="olga", role="admin")
OTHER = Principal(org_id="org-else", method="api_key")
KEY1 = ("k1", b"\x05" * 32)
KEY2 = ("k2", b"\x06" * 32)
SCHEMA = {
    "type": "object",
    "properties": {"orderId": {"type": "string"}},
    "required": ["orderId"],
}
OK = WebhookAnswer(
    outcome="ok",
    status_code=200,
    body='{"status": "shipped"}',
    content_type="application/json",
    duration_ms=42,
)


class Caller:
    """The customer's endpoint: records each call, answers ``answer``."""

    def __init__(self) -> None:
        self.calls: list[WebhookCall] = []
        self.answer = OK

    async def call(self, request: WebhookCall) -> WebhookAnswer:
        self.calls.append(request)
        return self.answer


class Urls:
    def __init__(self) -> None:
        self.refuse: str | None = None
        self.asked: list[str] = []

    def refusal(self, url: str) -> str | None:
        self.asked.append(url)
        return self.refuse


class Signing:
    async def signing_secrets(self, org: str) -> list[str]:
        return [f"whsec_new_{org}", f"whsec_old_{org}"]


class World:
    def __init__(self) -> None:
        self.storage = MemoryStorage()
        self.box = AesGcmBox([KEY1])
        self.caller = Caller()
        self.urls = Urls()
        self.clock = Clock()
        self.tools = self.use_cases(self.box)
        self.source = WebhookToolSource(self.tools, self.storage.webhook_tools)

    def use_cases(self, box: AesGcmBox) -> WebhookTools:
        s = self.storage
        return WebhookTools(
            s.webhook_tools,
            s.agents,
            s.threads,
            s.secrets,
            box,
            self.caller,
            self.urls,
            self.clock,
            Signing(),
        )

    async def agent(self) -> Agent:
        agent = agent_in(ORG)
        await self.storage.agents.add(agent)
        return agent

    async def tool(self, name: str = "lookup_order", **over: Any) -> WebhookTool:
        draft = WebhookToolDraft(
            name=name, description="d", parameters=SCHEMA, url="https://hooks.example/o"
        )
        return await self.tools.create(ADMIN, msgspec.structs.replace(draft, **over))

    async def delegated(self, agent: Agent, *tools: WebhookTool) -> ToolSetup:
        """Delegate ``tools`` to ``agent``; answers the record the turn would read."""
        await self.tools.set_delegated(ADMIN, agent.id, [t.id for t in tools])
        record = await self.storage.secrets.get(ORG, "delegated", str(agent.id))
        assert record is not None
        return ToolSetup(records={"delegated": record})


async def refused(w: World, **over: Any) -> InvalidInput:
    with pytest.raises(InvalidInput) as e:
        await w.tool(**over)
    return e.value


def headers_of(w: World, tool: WebhookTool) -> dict[str, str]:
    """The tool's headers, opened where they are sealed: its organization and id."""
    assert tool.headers is not None
    opened = w.box.open(tool.headers, f"{tool.org_id}:webhook_tool:{tool.id}")
    return msgspec.json.decode(opened, type=dict[str, str])


# --- names and schemas ---------------------------------------------------------------


def test_names_are_refused_with_the_reason() -> None:
    assert check_tool_name("a") == "a"
    assert check_tool_name("A-b_9" + "x" * 59) == "A-b_9" + "x" * 59
    for name, problem in [
        ("", "must be 1-64 letters, digits, '_' or '-'"),
        ("a.b", "must be 1-64 letters, digits, '_' or '-'"),
        ("a__b", "must not contain '__' (kept for MCP tools)"),
        ("Plan_x", "must not start with 'plan_' (kept for built-in tools)"),
        ("TODO_x", "must not start with 'todo_' (kept for built-in tools)"),
        ("db_", "must not start with 'db_' (kept for built-in tools)"),
    ]:
        with pytest.raises(InvalidInput) as e:
            check_tool_name(name)
        assert (e.value.field, e.value.problem) == ("name", problem), name
    assert check_tool_name("plan") == "plan"
    assert check_tool_name("xplan_y") == "xplan_y"


def test_a_schema_is_at_most_64_kib_of_json() -> None:
    base = {"type": "object", "description": ""}
    pad = 64 * 1024 - len(msgspec.json.encode(base))
    fits = {"type": "object", "description": "x" * pad}
    assert len(msgspec.json.encode(fits)) == 64 * 1024
    assert check_parameters(fits) is fits
    over = {"type": "object", "description": "x" * (pad + 1)}
    with pytest.raises(InvalidInput) as e:
        check_parameters(over)
    assert (e.value.field, e.value.problem) == ("parameters", "at most 65536 bytes of JSON")


def test_schema_problems_name_the_field_they_are_given() -> None:
    with pytest.raises(InvalidInput) as e:
        check_parameters({"type": "array"}, field="input_schema")
    assert (e.value.field, e.value.problem) == (
        "input_schema",
        'the root must be {"type": "object", ...}',
    )
    with pytest.raises(InvalidInput) as e:
        check_parameters({"type": "object", "minProperties": -1}, field="input_schema")
    assert e.value.field == "input_schema"
    assert (
        e.value.problem
        == "not a valid JSON Schema: -1 is less than the minimum of 0 at minProperties"
    )


def test_a_schema_problem_is_cut_to_300_characters() -> None:
    with pytest.raises(InvalidInput) as e:
        check_parameters({"type": "object", "properties": {"a": {"minLength": "x" * 400}}})
    head, where = "not a valid JSON Schema: ", " at properties/a/minLength"
    assert e.value.problem.startswith(head + "'xxx")
    assert e.value.problem.endswith("xxx" + where)
    assert len(e.value.problem) == len(head) + 300 + len(where)


def test_argument_problems_show_the_first_three_by_path() -> None:
    schema = {
        "type": "object",
        "properties": {k: {"type": "integer"} for k in "abcd"},
    }
    said = argument_problem(schema, {"d": "x", "c": "x", "b": "x", "a": "x"})
    assert said == (
        "a: 'x' is not of type 'integer'; b: 'x' is not of type 'integer'; "
        "c: 'x' is not of type 'integer'"
    )
    # a problem of the whole object has no path
    assert argument_problem(SCHEMA, {}) == "'orderId' is a required property"
    assert argument_problem(SCHEMA, {"orderId": "A"}) is None


def test_argument_problems_are_cut_to_200_characters_each() -> None:
    said = argument_problem(
        {"type": "object", "properties": {"a": {"type": "integer"}}}, {"a": "y" * 300}
    )
    assert said is not None
    assert said.startswith("a: 'yyy")
    assert len(said) == len("a: ") + 200
    remote = {"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:9/" + "z" * 300}}}
    problem = argument_problem(remote, {"a": 1})
    assert problem is not None
    head = "the tool's schema cannot be applied: "
    assert problem.startswith(head)
    assert len(problem) == len(head) + 200


# --- definitions ----------------------------------------------------------------------


async def test_a_definition_is_stored_as_given() -> None:
    w = World()
    w.clock.advance(5)
    made = await w.tool(
        description="Look up an order",
        method="PATCH",
        timeout_ms=2500,
        max_result_bytes=77,
        headers={"X-Key": "k-123456789"},
    )
    assert (made.org_id, made.name, made.description) == (ORG, "lookup_order", "Look up an order")
    assert (made.parameters, made.url, made.method) == (SCHEMA, "https://hooks.example/o", "PATCH")
    assert (made.timeout_ms, made.max_result_bytes) == (2500, 77)
    assert made.created_at == made.updated_at == w.clock.now()
    assert headers_of(w, made) == {"X-Key": "k-123456789"}
    assert await w.tools.get(MEMBER, made.id) == made
    assert w.urls.asked == ["https://hooks.example/o"]
    with pytest.raises(NotFound):
        await w.tools.get(OTHER, made.id)
    assert await w.tools.list_all(OTHER) == []


async def test_defaults_of_a_definition() -> None:
    w = World()
    made = await w.tools.create(ADMIN, WebhookToolDraft(name="t", url="https://h.example"))
    assert (made.description, made.parameters) == ("", {"type": "object", "properties": {}})
    assert (made.method, made.headers, made.timeout_ms, made.max_result_bytes) == (
        "POST",
        None,
        10_000,
        65_536,
    )
    # no headers at all: nothing sealed
    assert (await w.tool("empty", headers={})).headers is None


async def test_limits_are_inclusive() -> None:
    w = World()
    wrong: list[tuple[dict[str, Any], str, str]] = [
        ({"timeout_ms": 99}, "timeout_ms", "must be between 100 and 60000"),
        ({"timeout_ms": 60_001}, "timeout_ms", "must be between 100 and 60000"),
        ({"max_result_bytes": 0}, "max_result_bytes", "must be between 1 and 1048576"),
        ({"max_result_bytes": 1_048_577}, "max_result_bytes", "must be between 1 and 1048576"),
        ({"description": "d" * 10_001}, "description", "must be at most 10000 characters"),
        ({"url": ""}, "url", "must not be empty"),
        ({"url": "https://h.example/" + "p" * 4079}, "url", "must be at most 4096 characters"),
        ({"url": "https://h.example/a b"}, "url", "must not contain spaces or control characters"),
    ]
    for over, field, problem in wrong:
        e = await refused(w, **over)
        assert (e.field, e.problem) == (field, problem), over
    right: list[dict[str, Any]] = [
        {"timeout_ms": 100},
        {"timeout_ms": 60_000},
        {"max_result_bytes": 1},
        {"max_result_bytes": 1_048_576},
        {"description": "d" * 10_000},
        {"url": "https://h.example/" + "p" * 4078},
    ]
    for i, fits in enumerate(right):
        made = await w.tool(f"t{i}", **fits)
        assert all(getattr(made, k) == v for k, v in fits.items())


async def test_a_refused_url_is_422_with_the_guards_reason() -> None:
    w = World()
    w.urls.refuse = "hooks.internal resolves to a private address"
    e = await refused(w)
    assert (e.field, e.problem) == ("url", "hooks.internal resolves to a private address")
    assert await w.tools.list_all(ADMIN) == []


async def test_writes_need_an_admin() -> None:
    w = World()
    made = await w.tool()
    agent = await w.agent()
    for write in (
        w.tools.create(MEMBER, WebhookToolDraft(name="m", url="https://h.example")),
        w.tools.update(MEMBER, made.id, WebhookToolChanges(description="x")),
        w.tools.delete(MEMBER, made.id),
        w.tools.set_delegated(MEMBER, agent.id, [made.id]),
        w.tools.execute(MEMBER, "lookup_order", {"orderId": "A"}),
    ):
        with pytest.raises(PermissionDenied) as e:
            await write
        assert e.value.detail == "webhook tools are managed by the organization's admins"
    assert await w.tools.get(ADMIN, made.id) == made
    assert w.caller.calls == []
    # an admin user may
    assert (
        await w.tools.update(OWNER, made.id, WebhookToolChanges(description="x"))
    ).description == "x"


async def test_delete_is_of_the_callers_organization() -> None:
    w = World()
    made = await w.tool()
    with pytest.raises(NotFound):
        await w.tools.delete(OTHER, made.id)
    await w.tools.delete(ADMIN, made.id)
    assert await w.tools.list_all(ADMIN) == []


# --- PATCH -----------------------------------------------------------------------------


async def test_a_patch_changes_only_the_fields_given() -> None:
    w = World()
    made = await w.tool(headers={"X-Key": "k-123456789"})
    w.clock.advance(3)
    changed = await w.tools.update(
        ADMIN,
        made.id,
        WebhookToolChanges(
            name="find_order",
            description="new",
            parameters={"type": "object"},
            method="PUT",
            timeout_ms=700,
            max_result_bytes=9,
        ),
    )
    assert (changed.name, changed.description, changed.parameters, changed.method) == (
        "find_order",
        "new",
        {"type": "object"},
        "PUT",
    )
    assert (changed.timeout_ms, changed.max_result_bytes, changed.url) == (700, 9, made.url)
    assert changed.headers == made.headers
    assert changed.created_at == made.created_at
    assert changed.updated_at == w.clock.now() != made.updated_at
    assert await w.tools.get(ADMIN, made.id) == changed
    with pytest.raises(NotFound):
        await w.tools.update(OTHER, made.id, WebhookToolChanges(description="x"))


async def test_a_patch_is_checked_as_a_definition() -> None:
    w = World()
    made = await w.tool()
    for changes, field in [
        (WebhookToolChanges(timeout_ms=60_001), "timeout_ms"),
        (WebhookToolChanges(name="web_x"), "name"),
        (WebhookToolChanges(parameters={"type": "array"}), "parameters"),
        (WebhookToolChanges(headers={"Host": "h"}), "headers"),
    ]:
        with pytest.raises(InvalidInput) as e:
            await w.tools.update(ADMIN, made.id, changes)
        assert e.value.field == field
    assert await w.tools.get(ADMIN, made.id) == made


async def test_headers_given_in_a_patch_replace_the_stored_ones() -> None:
    w = World()
    made = await w.tool(headers={"X-Key": "k-123456789"})
    replaced = await w.tools.update(ADMIN, made.id, WebhookToolChanges(headers={"X-Other": "v2"}))
    assert headers_of(w, replaced) == {"X-Other": "v2"}
    assert (await w.tools.update(ADMIN, made.id, WebhookToolChanges(headers={}))).headers is None
    # a new url and headers given with it: the new ones are kept
    again = await w.tools.update(
        ADMIN, made.id, WebhookToolChanges(url="https://hooks.example/v2", headers={"X-K": "3"})
    )
    assert headers_of(w, again) == {"X-K": "3"}
    # the same url given again keeps them
    same = await w.tools.update(ADMIN, made.id, WebhookToolChanges(url="https://hooks.example/v2"))
    assert same.headers == again.headers


class Contended:
    """A tool store whose compare-and-set loses ``losses`` times (another PATCH won)."""

    def __init__(self, store: WebhookToolStore, losses: int) -> None:
        self._store = store
        self.losses = losses
        self.reads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def get(self, org_id: str, tool_id: UUID) -> WebhookTool:
        self.reads += 1
        return await self._store.get(org_id, tool_id)

    async def replace(self, tool: WebhookTool, previous: WebhookTool) -> bool:
        if self.losses > 0:
            self.losses -= 1
            return False
        return await self._store.replace(tool, previous)


def contended(w: World, losses: int) -> tuple[WebhookTools, Contended]:
    store = Contended(w.storage.webhook_tools, losses)
    s = w.storage
    tools = WebhookTools(
        store, s.agents, s.threads, s.secrets, w.box, w.caller, w.urls, w.clock, Signing()
    )
    return tools, store


async def test_a_patch_that_loses_a_race_is_tried_again_ten_times() -> None:
    w = World()
    made = await w.tool()
    tools, store = contended(w, 9)
    assert (
        await tools.update(ADMIN, made.id, WebhookToolChanges(description="x"))
    ).description == "x"
    assert store.reads == 10
    tools, store = contended(w, 10)
    with pytest.raises(Conflict) as e:
        await tools.update(ADMIN, made.id, WebhookToolChanges(description="y"))
    assert e.value.detail == "the tool is being changed by another request; try again"
    assert store.reads == 10
    assert (await w.tools.get(ADMIN, made.id)).description == "x"


async def test_rotation_reseals_headers_with_the_newest_key() -> None:
    w = World()
    ours = await w.tool(headers={"X-Key": "1"})
    await w.tool("bare")
    newer = w.use_cases(AesGcmBox([KEY2, KEY1]))
    assert await newer.rotate_secrets("org-nobody") == 0
    assert await newer.rotate_secrets() == 1
    assert await newer.rotate_secrets(ORG) == 0
    stored = await w.tools.get(ADMIN, ours.id)
    assert stored.headers != ours.headers
    only_new = AesGcmBox([KEY2])
    assert stored.headers is not None
    opened = only_new.open(stored.headers, f"{ORG}:webhook_tool:{ours.id}")
    assert json.loads(opened) == {"X-Key": "1"}


# --- delegation -----------------------------------------------------------------------------


async def test_delegation_keeps_the_order_given_once_each() -> None:
    w = World()
    agent = await w.agent()
    one, two = await w.tool("one"), await w.tool("two")
    config, tools = await w.tools.set_delegated(ADMIN, agent.id, [two.id, one.id, two.id])
    assert config == DelegatedConfig(agent_id=agent.id, org_id=ORG, tool_ids=(two.id, one.id))
    assert [t.name for t in tools] == ["one", "two"]
    assert await w.tools.delegated(MEMBER, agent.id) == (config, tools)
    # a sealed record of kind "delegated" under the agent's id
    record = await w.storage.secrets.get(ORG, "delegated", str(agent.id))
    assert record is not None
    opened = w.box.open(record.value, f"{ORG}:delegated:{agent.id}")
    assert msgspec.json.decode(opened, type=DelegatedConfig) == config
    assert w.tools.delegated_of(ORG, agent.id, record) == config
    assert w.tools.delegated_of(ORG, agent.id, None) == DelegatedConfig(
        agent_id=agent.id, org_id=ORG
    )
    # an empty list delegates nothing
    assert await w.tools.set_delegated(ADMIN, agent.id, []) == (
        DelegatedConfig(agent_id=agent.id, org_id=ORG),
        [],
    )
    assert await w.tools.delegated(ADMIN, agent.id) == (
        DelegatedConfig(agent_id=agent.id, org_id=ORG),
        [],
    )


async def test_delegation_needs_the_agent_and_the_tools_of_the_organization() -> None:
    w = World()
    agent = await w.agent()
    ours = await w.tool()
    with pytest.raises(NotFound):
        await w.tools.delegated(ADMIN, uuid.uuid4())
    with pytest.raises(NotFound):
        await w.tools.delegated(OTHER, agent.id)
    assert await w.tools.delegated(ADMIN, agent.id) == (
        DelegatedConfig(agent_id=agent.id, org_id=ORG),
        [],
    )
    missing = sorted([uuid.uuid4(), uuid.uuid4()], key=str)
    with pytest.raises(InvalidInput) as e:
        await w.tools.set_delegated(ADMIN, agent.id, [ours.id, missing[1], missing[0]])
    assert (e.value.field, e.value.problem) == ("tool_ids", f"no such tool: {missing[0]}")
    assert await w.storage.secrets.get(ORG, "delegated", str(agent.id)) is None


async def test_an_agent_may_have_at_most_128_tools() -> None:
    w = World()
    agent = await w.agent()
    with pytest.raises(InvalidInput) as e:
        await w.tools.set_delegated(ADMIN, agent.id, [uuid.uuid4() for _ in range(129)])
    assert (e.value.field, e.value.problem) == ("tool_ids", "at most 128 tools")
    made = [
        await w.tools.create(ADMIN, WebhookToolDraft(name=f"t{i:03}", url="https://h.example"))
        for i in range(128)
    ]
    config, tools = await w.tools.set_delegated(ADMIN, agent.id, [t.id for t in made])
    assert len(config.tool_ids) == len(tools) == 128


# --- calls ------------------------------------------------------------------------------------


async def test_what_a_call_sends() -> None:
    w = World()
    agent = await w.agent()
    t = await w.tool(headers={"X-Key": "k-1"}, timeout_ms=2500, max_result_bytes=4000)
    setup = await w.delegated(agent, t)
    thread = uuid.uuid4()
    ctx = ToolCallContext(tool_call_id="call_9", thread_id=thread, user_id="alice", setup=setup)
    assert await w.source.call(ADMIN, agent, "lookup_order", {"orderId": "A"}, ctx) == (
        '{"status": "shipped"}'
    )
    [sent] = w.caller.calls
    assert sent == WebhookCall(
        url="https://hooks.example/o",
        method="POST",
        headers={"X-Key": "k-1"},
        body=sent.body,
        secrets=[f"whsec_new_{ORG}", f"whsec_old_{ORG}"],
        timeout_ms=2500,
        max_bytes=4000,
        idempotency_key=idempotency_key(ORG, thread, "call_9"),
    )
    assert json.loads(sent.body) == {
        "tool": "lookup_order",
        "toolCallId": "call_9",
        "arguments": {"orderId": "A"},
        "orgId": ORG,
        "agentId": str(agent.id),
        "threadId": str(thread),
        "userId": "alice",
    }


async def test_a_call_outside_a_thread_sends_nulls_and_no_headers() -> None:
    w = World()
    agent = await w.agent()
    t = await w.tool()
    await w.delegated(agent, t)
    ctx = ToolCallContext(tool_call_id="c1")
    await w.source.call(ADMIN, agent, "lookup_order", {"orderId": "A"}, ctx)
    [sent] = w.caller.calls
    assert sent.headers == {}
    assert sent.idempotency_key == idempotency_key(ORG, None, "c1")
    body = json.loads(sent.body)
    assert (body["threadId"], body["userId"], body["agentId"]) == (None, None, str(agent.id))


async def test_what_the_model_reads_when_a_call_fails() -> None:
    w = World()
    agent = await w.agent()
    t = await w.tool(timeout_ms=1234, max_result_bytes=99)
    ctx = ToolCallContext(tool_call_id="c", setup=await w.delegated(agent, t))
    for answer, expected in [
        (
            WebhookAnswer(outcome="status", status_code=503, body="b" * 600),
            "error: the tool answered HTTP 503: " + "b" * 500,
        ),
        (WebhookAnswer(outcome="status", status_code=302), "error: the tool answered HTTP 302"),
        (WebhookAnswer(outcome="timeout"), "error: the tool did not answer within 1234 ms"),
        (WebhookAnswer(outcome="too_large"), "error: the tool's answer is larger than 99 bytes"),
        (
            WebhookAnswer(outcome="refused", reason="a private address"),
            "error: the tool's URL was refused: a private address",
        ),
        (
            WebhookAnswer(outcome="unreachable", reason="could not reach h"),
            "error: the tool could not be reached: could not reach h",
        ),
    ]:
        w.caller.answer = answer
        assert await w.source.call(ADMIN, agent, "lookup_order", {"orderId": "A"}, ctx) == expected


async def test_the_source_offers_the_delegated_tools_under_their_names() -> None:
    w = World()
    agent = await w.agent()
    one = await w.tool("one", description="first")
    await w.tool("two")
    assert await w.source.list_tools(ADMIN, agent) == []
    setup = await w.delegated(agent, one)
    for read in (setup, None):
        specs = await w.source.list_tools(ADMIN, agent, read)
        assert [(s.name, s.description, s.parameters) for s in specs] == [("one", "first", SCHEMA)]
    assert w.source.kinds == ("delegated",)
    assert not w.source.is_extension("one")


async def test_the_turns_read_decides_which_tools_a_call_may_use() -> None:
    """With the turn's records, a delegation stored since is not seen; without them
    (outside a turn) the stored one is read."""
    w = World()
    agent = await w.agent()
    t = await w.tool()
    empty = ToolCallContext(tool_call_id="c", setup=ToolSetup(records={}))
    await w.delegated(agent, t)
    assert await w.source.call(ADMIN, agent, "lookup_order", {"orderId": "A"}, empty) == (
        "error: the webhook tool 'lookup_order' is not available to this agent"
    )
    assert await w.source.list_tools(ADMIN, agent, ToolSetup(records={})) == []
    stored = ToolCallContext(tool_call_id="c")
    assert await w.source.call(ADMIN, agent, "lookup_order", {"orderId": "A"}, stored) == (
        '{"status": "shipped"}'
    )
    # a tool of that name delegated to no one is not called either
    await w.tool("other")
    assert await w.source.call(ADMIN, agent, "other", {}, stored) == (
        "error: the webhook tool 'other' is not available to this agent"
    )
    assert await w.source.call(ADMIN, agent, "missing", {}, stored) == (
        "error: the webhook tool 'missing' is not available to this agent"
    )
    assert len(w.caller.calls) == 1


def test_the_source_owns_only_names_a_webhook_tool_may_take() -> None:
    source = World().source
    assert source.owns("a")
    assert source.owns("x" * 64)
    for other in ("", "x" * 65, "a b", "a__b", "PLAN_x", "memory_save", "db_x"):
        assert not source.owns(other), other


# --- execute ------------------------------------------------------------------------------------


async def test_execute_passes_the_agent_thread_and_user_on() -> None:
    w = World()
    agent = await w.agent()
    thread = (await w.storage.threads.add(a_thread(ORG, agent.id))).id
    t = await w.tool()
    done = await w.tools.execute(
        OWNER, t.name, {"orderId": "A"}, agent_id=agent.id, thread_id=thread
    )
    assert done == Execution(
        ok=True, status_code=200, result={"status": "shipped"}, duration_ms=42, error=None
    )
    [sent] = w.caller.calls
    body = json.loads(sent.body)
    assert body["toolCallId"].startswith("exec_")
    assert len(body["toolCallId"]) == len("exec_") + 32
    assert (body["agentId"], body["threadId"], body["userId"]) == (
        str(agent.id),
        str(thread),
        "olga",
    )
    assert sent.idempotency_key == idempotency_key(ORG, thread, body["toolCallId"])
    with pytest.raises(NotFound):
        await w.tools.execute(ADMIN, t.name, {"orderId": "A"}, agent_id=uuid.uuid4())
    assert len(w.caller.calls) == 1


async def test_execute_without_an_agent_or_thread_sends_nulls() -> None:
    w = World()
    await w.tool()
    await w.tools.execute(ADMIN, "lookup_order", {"orderId": "A"})
    [sent] = w.caller.calls
    body = json.loads(sent.body)
    assert (body["agentId"], body["threadId"], body["userId"]) == (None, None, None)


async def test_execute_needs_a_tool_of_that_name_in_the_organization() -> None:
    w = World()
    await w.tool()
    with pytest.raises(NotFound) as e:
        await w.tools.execute(OTHER, "lookup_order", {"orderId": "A"})
    assert e.value.detail == "no webhook tool named 'lookup_order'"
    assert w.caller.calls == []


async def test_execute_answers_json_only_when_the_answer_says_json() -> None:
    w = World()
    await w.tool()
    for content_type, body, result in [
        ("application/problem+json", '{"a": 1}', {"a": 1}),
        ("application/json", "not json", "not json"),
        ("text/plain", '{"a": 1}', '{"a": 1}'),
        ("", "[1]", "[1]"),
    ]:
        w.caller.answer = WebhookAnswer(
            outcome="ok", status_code=201, body=body, content_type=content_type, duration_ms=3
        )
        done = await w.tools.execute(ADMIN, "lookup_order", {"orderId": "A"})
        assert done == Execution(ok=True, status_code=201, result=result, duration_ms=3, error=None)


async def test_execute_answers_a_failure_without_a_result() -> None:
    w = World()
    await w.tool()
    w.caller.answer = WebhookAnswer(
        outcome="status",
        status_code=500,
        body='{"e": 1}',
        content_type="application/json",
        duration_ms=8,
    )
    done = await w.tools.execute(ADMIN, "lookup_order", {"orderId": "A"})
    assert done == Execution(
        ok=False,
        status_code=500,
        result=None,
        duration_ms=8,
        error='the tool answered HTTP 500: {"e": 1}',
    )


async def test_execute_times_a_call_refused_before_it_was_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ticks = iter([10.0, 12.5])
    monkeypatch.setattr(webhook_tools, "time", SimpleNamespace(monotonic=lambda: next(ticks)))
    w = World()
    await w.tool()
    done = await w.tools.execute(ADMIN, "lookup_order", {"orderId": 7})
    assert done == Execution(
        ok=False,
        status_code=None,
        result=None,
        duration_ms=2500,
        error="the arguments do not fit the tool's schema: orderId: 7 is not of type 'string'",
    )
    assert w.caller.calls == []


async def test_headers_that_do_not_open_here_are_not_sent() -> None:
    w = World()
    t = await w.tool(headers={"X-Key": "1"})
    assert t.headers is not None
    moved = w.box.seal(b'{"X-Key": "1"}', f"{ORG}:webhook_tool:{uuid.uuid4()}")
    assert await w.storage.webhook_tools.reseal(ORG, t.id, t.headers, moved)
    with pytest.raises(SecretUnreadable):
        await w.tools.execute(ADMIN, "lookup_order", {"orderId": "A"})
    assert w.caller.calls == []


# --- approval before a call (docs/tools.md, "Approval before a call") --------------


async def test_approval_is_never_by_default_and_may_be_always() -> None:
    w = World()
    assert (await w.tool("plain")).approval == "never"
    gated = await w.tool("gated", approval="always")
    assert gated.approval == "always"
    back = await w.tools.update(ADMIN, gated.id, WebhookToolChanges(approval="never"))
    assert back.approval == "never"
    again = await w.tools.update(ADMIN, gated.id, WebhookToolChanges(description="x"))
    assert again.approval == "never"  # a patch without it keeps it
    e = await refused(w, name="odd", approval="sometimes")
    assert (e.field, e.problem) == ("approval", "never or always")


async def test_the_source_marks_the_tools_whose_calls_wait_for_approval() -> None:
    w = World()
    agent = await w.agent()
    plain, gated = await w.tool("plain"), await w.tool("gated", approval="always")
    setup = await w.delegated(agent, plain, gated)
    listed = await w.source.list_tools(ADMIN, agent, setup)
    assert [(t.name, t.approval) for t in listed] == [("gated", True), ("plain", False)]
