"""Planning a reply (use_cases/turn/reply_plan.py): what ``choose`` hands the tool
sources (the agent's MCP servers, then a runner's it has not; the turn's records
and thread), what ``plan_reply`` passes on to the running reply, what
``note_answered`` says the reply answers, and how long a send's events are kept.
Written from the survivors of mutation testing (``make mutation``)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import msgspec

from agentsvc_adapters.llm import Families, PrefixRouter
from agentsvc_core.entities import Agent, McpAttachment, McpServer, Message, Run, Thread, Usage
from agentsvc_core.ports import SealedRecord, ToolSetup, ToolSpec, TurnInputs
from agentsvc_core.ports.telemetry import CURRENT
from agentsvc_core.pricing import PriceTable
from agentsvc_core.telemetry import SpanTracer
from agentsvc_core.use_cases.idempotency import KEEP, RequestKey
from agentsvc_core.use_cases.traces.build import TraceConfig
from agentsvc_core.use_cases.turn._private import new_message
from agentsvc_core.use_cases.turn.conversation import SendInput
from agentsvc_core.use_cases.turn.events import Turn
from agentsvc_core.use_cases.turn.reply_plan import Chosen, choose, note_answered, plan_reply
from tests.contract.test_agents_contract import agent_in
from tests.contract.test_conversations_contract import a_thread
from tests.unit.turn_world import ORG, T0, WHO, Clock, Script, read_all, world

ROUTER = PrefixRouter(Families(local=Script()))


def an_mcp(owner: Agent | None, server: McpServer | None = None) -> tuple[McpAttachment, McpServer]:
    """An attachment of ``server`` (a new one by default) to ``owner`` (None: a runner)."""
    server = server or McpServer(
        id=uuid.uuid4(),
        org_id=ORG,
        name="Tracker",
        slug=f"tracker-{uuid.uuid4().hex[:6]}",
        transport="streamable_http",
        url="https://mcp.example/mcp",
        command=None,
        args=(),
        credentials=None,
        allowed_tools=None,
        status="active",
        tools_cache=(),
        created_at=T0,
        updated_at=T0,
    )
    attachment = McpAttachment(
        org_id=ORG,
        owner_kind="agent" if owner is not None else "runner",
        owner_id=owner.id if owner is not None else uuid.uuid4(),
        mcp_id=server.id,
        allowed_tools=None,
        created_at=T0,
    )
    return attachment, server


def read(thread: Thread, agent: Agent, **over: Any) -> TurnInputs:
    """The turn's read of ``thread``: nothing attached, no record, no history."""
    inputs = TurnInputs(
        thread=thread,
        agent=agent,
        latest_run=None,
        mcp=[],
        records={},
        history=[],
        history_mark=0,
    )
    return msgspec.structs.replace(inputs, **over)


def chosen(msg: SendInput | None = None, **read_over: Any) -> Chosen:
    agent = agent_in(ORG, default_model="local")
    thread = a_thread(ORG, agent.id)
    inputs = read(thread, agent, **read_over)
    return choose(ROUTER, None, WHO, thread, agent, msg or SendInput(content="hi"), inputs, ())


def test_a_runners_mcp_servers_come_after_the_agents_and_the_agents_own_win() -> None:
    agent = agent_in(ORG)
    thread = a_thread(ORG, agent.id)
    mine = an_mcp(agent)
    shared = an_mcp(None, mine[1])  # the runner attaches the agent's server too
    extra = an_mcp(None)
    inputs = read(thread, agent, mcp=[mine])
    msg = SendInput(content="hi")
    got = choose(ROUTER, None, WHO, thread, agent, msg, inputs, [shared, extra])
    assert list(got.setup.mcp) == [mine, extra]
    assert choose(ROUTER, None, WHO, thread, agent, msg, inputs, [shared]).setup.mcp == [mine]


def test_without_a_runners_servers_the_tool_sources_get_the_turns_read_as_it_is() -> None:
    agent = agent_in(ORG)
    thread = a_thread(ORG, agent.id)
    records = {"plan": SealedRecord(value="sealed")}
    inputs = read(thread, agent, mcp=[an_mcp(agent)], records=records)
    got = choose(ROUTER, None, WHO, thread, agent, SendInput(content="hi"), inputs, ())
    assert got.setup.mcp is inputs.mcp
    assert got.setup.records == records
    assert got.setup.thread_id == thread.id
    assert (got.resolver, got.compaction) == (None, None)  # no agent configurations


def test_the_plan_carries_what_the_send_gave_it() -> None:
    async def gate(used: Usage, model_id: str) -> str | None:
        return None

    c = chosen(SendInput(content="hi", tools=[ToolSpec(name="pick", description="the client's")]))
    plan = plan_reply(
        c,
        [ToolSpec(name="kb__search", description="the server's")],
        user_id="alice",
        keep_events=timedelta(hours=3),
        keys=None,
        gate=gate,
        stored_parent="00f067aa0ba902b7",
    )
    assert plan.who is WHO
    assert plan.tool_setup is c.setup
    assert plan.user_id == "alice"
    assert plan.keep_events == timedelta(hours=3)
    assert plan.gate is gate
    assert plan.stored_parent == "00f067aa0ba902b7"
    assert plan.keys is None
    assert list(plan.server_tools) == ["kb__search"]
    assert list(plan.client_tools) == ["pick"]
    assert [t.name for t in plan.offered] == ["kb__search", "pick"]


def test_the_reply_answers_the_users_messages_and_the_clients_tool_results() -> None:
    plan = plan_reply(
        chosen(),
        [],
        user_id=None,
        keep_events=timedelta(minutes=10),
        keys=None,
        gate=None,
        stored_parent=None,
    )
    run = Run(
        id=uuid.uuid4(),
        org_id=ORG,
        thread_id=uuid.uuid4(),
        status="running",
        started_at=T0,
        heartbeat_at=T0,
    )
    clock = Clock()
    new: list[Message] = [
        new_message(clock, run, "tool", "out-1", tool_call_id="c1"),
        new_message(clock, run, "tool", "out-2"),  # a result without its call's id
        new_message(clock, run, "user", "hello"),
        new_message(clock, run, "assistant", "not an input"),
    ]
    note_answered(plan, new)
    assert plan.inputs == ("hello",)
    assert plan.tool_results == (("c1", "out-1"), ("", "out-2"))


async def test_a_sends_events_are_kept_for_the_replay_window_a_keyed_ones_for_its_key() -> None:
    w = await world(stored=True, replay_s=60.0)
    plain = await w.conversation.send(WHO, w.thread.id, SendInput(content="hi"))
    assert plain.keep == timedelta(seconds=60)
    await read_all(plain)
    key = RequestKey("k-plan", b"fingerprint")
    keyed = await w.conversation.send_once(WHO, w.thread.id, SendInput(content="hi"), key)
    assert isinstance(keyed, Turn)
    assert keyed.keep == KEEP
    await read_all(keyed)


async def test_a_runners_mcp_servers_reach_the_tool_sources_of_its_steps_turn() -> None:
    w = await world()
    runner_server = an_mcp(None)
    turn = await w.conversation.send(
        WHO, w.thread.id, SendInput(content="hi"), extra_mcp=[runner_server]
    )
    await read_all(turn)
    ((_, _, setup),) = w.tools.listed_for
    assert isinstance(setup, ToolSetup)
    assert list(setup.mcp) == [runner_server]
    assert setup.thread_id == w.thread.id


async def test_a_runner_steps_span_stays_the_stored_parent_of_the_reply() -> None:
    tracer = SpanTracer([])
    config = TraceConfig(prices=PriceTable([], "2026-11-01"))
    w = await world(tracer=tracer, traces=config)

    async def parents(stored_parent: bool) -> tuple[str | None, str]:
        """The stored reply span's parent, and the step's span it ran under."""
        step = tracer.start("runner step")
        token = CURRENT.set(step.context)
        try:
            turn = await w.conversation.send(
                WHO,
                w.thread.id,
                SendInput(content="hi"),
                stored_parent=step.context.span_id if stored_parent else None,
            )
        finally:
            CURRENT.reset(token)
        await read_all(turn)
        step.end()
        found = await w.storage.traces.get_trace(ORG, step.context.trace_id)
        assert found is not None
        (reply,) = [s for s in found[1] if s.kind == "agent"]
        return reply.parent_span_id, step.context.span_id

    parent, _ = await parents(stored_parent=False)
    assert parent is None  # a parent stored nowhere is not kept
    parent, step_id = await parents(stored_parent=True)
    assert parent == step_id
