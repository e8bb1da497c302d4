"""The turn's HTTP-facing operations (use_cases/turn/conversation.py): what ``send`` checks
and plans, ``stop``, ``sweep`` and the drain at shutdown, against the memory storage
and a scripted model (tests/unit/turn_world.py)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import msgspec
import pytest

from agentsvc_core.entities import Participant, Principal, ToolCall, ToolProfile, Usage
from agentsvc_core.errors import (
    IdempotencyKeyReused,
    InvalidInput,
    NotFound,
    PermissionDenied,
    ThreadBusy,
    Unavailable,
)
from agentsvc_core.ports import NativeCompaction, TextDelta, ToolSetup, ToolSpec, UsageReport
from agentsvc_core.use_cases.idempotency import RequestKey
from agentsvc_core.use_cases.org_settings import CompactionConfig, ResolverConfig
from agentsvc_core.use_cases.sealed import SealedRecords
from agentsvc_core.use_cases.turn import heartbeats as heartbeats_module
from agentsvc_core.use_cases.turn.compaction import SUMMARY_PROMPT, Compactor
from agentsvc_core.use_cases.turn.conversation import INTERRUPT_WAIT_S, SendInput, ToolResultIn
from agentsvc_core.use_cases.turn.events import (
    Done,
    ErrorEvent,
    Meta,
    RequiresAction,
    decode_events,
)
from tests.unit.turn_world import (
    BOX,
    HANG,
    ORG,
    T0,
    WHO,
    Script,
    Tools,
    World,
    a_stored_run,
    calls,
    read_all,
    says,
    store_run,
    world,
)

USER = Principal(org_id=ORG, method="jwt", user_id="alice")


async def send(w: World, msg: SendInput | None = None, who: Principal = WHO) -> list[Any]:
    turn = await w.conversation.send(who, w.thread.id, msg or SendInput(content="hi"))
    return await read_all(turn)


# --- refusals, before anything is stored --------------------------------------


async def test_a_thread_whose_agent_is_gone_is_not_found() -> None:
    w = await world()
    orphan = await w.storage.threads.add(
        msgspec.structs.replace(w.thread, id=uuid.uuid4(), agent_id=uuid.uuid4())
    )
    with pytest.raises(NotFound, match=r"^agent not found$"):
        await w.conversation.send(WHO, orphan.id, SendInput(content="hi"))
    assert w.model.requests == []


async def test_the_input_is_checked_before_the_thread_is_read() -> None:
    w = await world()
    with pytest.raises(InvalidInput):
        await w.conversation.send(WHO, uuid.uuid4(), SendInput(content=""))


async def test_another_users_thread_is_refused() -> None:
    w = await world(thread={"created_by": "bob"})
    with pytest.raises(PermissionDenied):
        await w.conversation.send(USER, w.thread.id, SendInput(content="hi"))


async def test_a_running_reply_with_a_fresh_heartbeat_makes_the_thread_busy() -> None:
    w = await world()
    w.clock.advance(100)
    # a heartbeat exactly the stale span old is still fresh
    await store_run(w, a_stored_run(w, heartbeat_at=w.clock.now() - timedelta(seconds=45)))
    with pytest.raises(ThreadBusy):
        await w.conversation.send(WHO, w.thread.id, SendInput(content="hi"))
    assert w.model.requests == []  # refused before the model is called


async def test_a_running_reply_with_a_stale_heartbeat_does_not_block_the_thread() -> None:
    w = await world()
    w.clock.advance(100)
    old = a_stored_run(w, heartbeat_at=w.clock.now() - timedelta(seconds=45.001))
    await store_run(w, old)
    events = await send(w)
    assert isinstance(events[-1], Done)
    runs = await w.runs()
    assert [r.status for r in runs] == ["interrupted", "completed"]


async def test_the_stale_span_is_the_one_given() -> None:
    w = await world(stale_after_s=10.0)
    w.clock.advance(100)
    await store_run(w, a_stored_run(w, heartbeat_at=w.clock.now() - timedelta(seconds=9)))
    with pytest.raises(ThreadBusy):
        await w.conversation.send(WHO, w.thread.id, SendInput(content="hi"))
    w.clock.advance(2)  # now 11 s old: stale
    assert isinstance((await send(w))[-1], Done)


async def test_a_finished_run_does_not_make_the_thread_busy() -> None:
    w = await world()
    await store_run(w, a_stored_run(w, status="completed"))
    assert isinstance((await send(w))[-1], Done)


# --- who sends ----------------------------------------------------------------


async def test_the_sender_is_stored_on_the_users_message() -> None:
    w = await world()
    await send(w, SendInput(content="hi", sender_name="Alice", sender_id="u-1"))
    user = (await w.messages())[0]
    assert (user.role, user.sender_name, user.sender_id) == ("user", "Alice", "u-1")


async def test_a_user_token_posts_as_its_own_user() -> None:
    w = await world(thread={"created_by": "alice"})
    await send(w, SendInput(content="hi"), who=USER)
    assert (await w.messages())[0].sender_id == "alice"
    await send(w, SendInput(content="again", sender_id="alice"), who=USER)
    assert (await w.messages())[2].sender_id == "alice"


async def test_a_user_token_may_not_post_as_another_user() -> None:
    w = await world(thread={"created_by": "alice"})
    with pytest.raises(PermissionDenied, match=r"^a user token may only post as its own user$"):
        await w.conversation.send(USER, w.thread.id, SendInput(content="hi", sender_id="bob"))


async def test_the_sender_name_and_id_are_checked() -> None:
    w = await world()
    too_long = SendInput(content="hi", sender_name="x" * 1001)
    with pytest.raises(InvalidInput) as info:
        await w.conversation.send(WHO, w.thread.id, too_long)
    assert info.value.field == "sender_name"
    with pytest.raises(InvalidInput) as info:
        await w.conversation.send(WHO, w.thread.id, SendInput(content="hi", sender_id=" "))
    assert info.value.field == "sender_id"
    with pytest.raises(InvalidInput) as info:
        await w.conversation.send(WHO, w.thread.id, SendInput(content="hi", sender_id="x" * 257))
    assert info.value.field == "sender_id"
    await send(w, SendInput(content="hi", sender_name="x" * 1000, sender_id="x" * 256))


async def multiplayer() -> World:
    w = await world(thread={"kind": "multiplayer"})
    await w.storage.threads.put_participant(
        Participant(
            org_id=ORG,
            thread_id=w.thread.id,
            user_id="alice",
            display_name="Alice A.",
            role="member",
            added_at=w.clock.now(),
        )
    )
    return w


async def test_an_api_key_must_name_the_sender_of_a_multiplayer_thread() -> None:
    w = await multiplayer()
    with pytest.raises(InvalidInput) as info:
        await w.conversation.send(WHO, w.thread.id, SendInput(content="hi"))
    assert (info.value.field, info.value.problem) == (
        "sender_id",
        "required to post to a multiplayer thread with an API key",
    )


async def test_only_participants_post_to_a_multiplayer_thread() -> None:
    w = await multiplayer()
    with pytest.raises(PermissionDenied, match=r"^only participants may post to this thread$"):
        await w.conversation.send(WHO, w.thread.id, SendInput(content="hi", sender_id="bob"))


async def test_a_participants_display_name_is_the_default_sender_name() -> None:
    w = await multiplayer()
    await send(w, SendInput(content="hi", sender_id="alice"))
    await send(w, SendInput(content="hi", sender_id="alice", sender_name="Al"))
    await send(w, SendInput(content="hi"), who=USER)
    users = [m for m in await w.messages() if m.role == "user"]
    assert [(m.sender_id, m.sender_name) for m in users] == [
        ("alice", "Alice A."),
        ("alice", "Al"),
        ("alice", "Alice A."),
    ]


# --- what the reply is given --------------------------------------------------


async def test_meta_comes_first_and_names_the_run_thread_and_model() -> None:
    w = await world()
    w.clock.advance(5)
    events = await send(w)
    meta = events[0]
    assert isinstance(meta, Meta)
    assert isinstance(meta.run_id, uuid.UUID)
    (run,) = await w.runs()
    assert (meta.run_id, meta.thread_id, meta.model, meta.started_at) == (
        run.id,
        w.thread.id,
        "local",
        w.clock.now(),
    )
    assert (run.started_at, run.status) == (w.clock.now(), "completed")


async def test_a_model_override_picks_the_model_of_the_turn() -> None:
    beta = Script(says("hi"), provider="beta")
    w = await world(beta, agent={"default_model": "local"})
    events = await send(w, SendInput(content="hi", model_override="beta:m2"))
    assert isinstance(events[0], Meta)
    assert events[0].model == "beta:m2"
    assert beta.requests[0].model == "m2"  # the name the family is sent
    (record,) = await w.usage()
    assert (record.provider, record.model) == ("beta", "beta:m2")


async def test_the_agents_default_model_serves_without_an_override() -> None:
    beta = Script(says("hi"), provider="beta")
    w = await world(beta, agent={"default_model": "beta:m1"})
    await send(w)
    assert beta.requests[0].model == "m1"


async def test_the_system_prompt_joins_preamble_thread_and_message_overlays() -> None:
    w = await world(
        agent={"default_model": "local", "stable_preamble": "P"},
        thread={"system_prompt_overlay": "T"},
    )
    await send(w, SendInput(content="hi", system_prompt_overlay="M"))
    assert w.model.requests[0].system == "P\n\nT\n\nM"


async def test_metadata_of_thread_and_message_is_merged_onto_usage_records() -> None:
    w = await world(thread={"metadata": {"a": "thread", "b": "thread"}})
    await send(w, SendInput(content="hi", metadata={"b": "message"}))
    (record,) = await w.usage()
    assert record.metadata == {"a": "thread", "b": "message"}


async def test_server_tools_under_the_profile_then_client_tools_then_the_switch_are_offered() -> (
    None
):
    profiles = {
        "small": ToolProfile(tools=("kb__search",), description="few"),
        "all": ToolProfile(tools=("kb__search", "kb__write")),
    }
    w = await world(
        tools=Tools("kb__search", "kb__write"),
        agent={"default_model": "local", "tool_profiles": profiles, "default_profile": "small"},
    )

    await send(w, SendInput(content="hi", tools=[ToolSpec(name="client_pick")]))
    assert w.tools.listed_for == [
        (WHO, w.agent, ToolSetup(mcp=[], records={}, thread_id=w.thread.id))
    ]  # the attached servers and the records read with the thread, and the thread
    offered = [t.name for t in w.model.requests[0].tools]
    switch = w.model.requests[0].tools[-1]
    assert "(current: small)" in switch.description
    assert offered == ["kb__search", "client_pick", "propose_profile_switch"]
    await send(w, SendInput(content="hi", tool_profile="all"))
    assert [t.name for t in w.model.requests[1].tools] == [
        "kb__search",
        "kb__write",
        "propose_profile_switch",
    ]


async def test_no_switch_tool_without_profiles() -> None:
    w = await world(tools=Tools("kb__search"))
    await send(w)
    assert [t.name for t in w.model.requests[0].tools] == ["kb__search"]


async def test_the_users_message_joins_the_history_sent_to_the_model() -> None:
    w = await world()
    await send(w, SendInput(content="first"))
    await send(w, SendInput(content="second"))
    sent = w.model.requests[1].messages
    assert [(m.role, m.content) for m in sent] == [
        ("user", "first"),
        ("assistant", "ok"),
        ("user", "second"),
    ]
    (run1, run2) = await w.runs()
    assert [m.run_id for m in await w.messages()] == [run1.id, run1.id, run2.id, run2.id]


# --- client tool results --------------------------------------------------------


async def waiting_for_pick() -> World:

    w = await world(Script(calls("pick", "other"), says("thanks")))
    events = await send(
        w, SendInput(content="choose", tools=[ToolSpec(name="pick"), ToolSpec(name="other")])
    )
    assert isinstance(events[-2], RequiresAction)
    return w


async def test_results_answer_the_pending_calls_as_tool_messages() -> None:
    w = await waiting_for_pick()
    results = [
        ToolResultIn(tool_call_id="c-other", output="B"),
        ToolResultIn(tool_call_id="c-pick", output="A"),
    ]
    events = await send(w, SendInput(content="", tool_results=results))
    assert isinstance(events[-1], Done)
    new = (await w.messages())[2:]
    assert [(m.role, m.content, m.tool_call_id, m.sender_name) for m in new] == [
        ("tool", "B", "c-other", "other"),
        ("tool", "A", "c-pick", "pick"),
        ("assistant", "thanks", None, None),
    ]


async def test_results_with_content_store_the_users_message_after_them() -> None:
    w = await waiting_for_pick()
    results = [
        ToolResultIn(tool_call_id="c-pick", output="A"),
        ToolResultIn(tool_call_id="c-other", output="B"),
    ]
    await send(w, SendInput(content="and also", tool_results=results))
    new = (await w.messages())[2:]
    assert [(m.role, m.content) for m in new][:3] == [
        ("tool", "A"),
        ("tool", "B"),
        ("user", "and also"),
    ]


async def test_a_reply_waiting_for_results_refuses_a_send_without_them() -> None:
    w = await waiting_for_pick()
    with pytest.raises(InvalidInput) as info:
        await w.conversation.send(WHO, w.thread.id, SendInput(content="what?"))
    assert info.value.field == "tool_results"


async def test_results_are_refused_when_no_reply_waits() -> None:
    w = await world()
    await send(w)
    msg = SendInput(content="", tool_results=[ToolResultIn(tool_call_id="c", output="x")])
    with pytest.raises(InvalidInput):
        await w.conversation.send(WHO, w.thread.id, msg)


async def test_only_a_requires_action_run_has_pending_calls() -> None:
    w = await world()
    pending = (ToolCall(id="c1", name="pick", arguments={}),)
    await store_run(w, a_stored_run(w, status="completed", pending_tool_calls=pending))
    assert isinstance((await send(w))[-1], Done)  # no results asked for


# --- compaction and keys, by the agent's settings -------------------------------


async def with_compaction(
    provider: str, enabled: bool, *, threshold: int = 100_000, resolver: bool = False
) -> tuple[World, Script]:
    model = Script(says("hi"), provider=provider)
    w = await world(model, agent={"default_model": f"{provider}:m"}, compactor=Compactor)
    sealed = SealedRecords(w.storage.secrets, BOX)
    await sealed.put(
        ORG,
        "compaction",
        str(w.agent.id),
        CompactionConfig(
            agent_id=w.agent.id,
            org_id=ORG,
            enabled=enabled,
            alpha_trigger_tokens=50_000,
            alpha_instructions="keep names",
            alpha_pause_after=True,
            beta_compact_threshold=threshold,
        ),
    )
    if resolver:
        await sealed.put(
            ORG,
            "resolver",
            str(w.agent.id),
            ResolverConfig(
                agent_id=w.agent.id, org_id=ORG, enabled=True, resolver_url="https://r.example/"
            ),
        )
    return w, model


async def test_native_compaction_is_asked_of_the_alpha_family_when_enabled() -> None:
    w, model = await with_compaction("alpha", enabled=True)
    await send(w)
    assert model.requests[0].native_compaction == NativeCompaction(
        trigger_tokens=50_000, instructions="keep names", pause_after=True
    )


@pytest.mark.parametrize(("provider", "enabled"), [("alpha", False), ("beta", True)])
async def test_no_native_compaction_when_disabled_or_for_the_beta_family(
    provider: str, enabled: bool
) -> None:
    w, model = await with_compaction(provider, enabled)
    await send(w)
    assert model.requests[0].native_compaction is None


# --- stop, sweep -----------------------------------------------------------------


async def test_stop_ends_the_running_reply() -> None:
    w = await world(Script([TextDelta("so far"), HANG]))
    turn = await w.conversation.send(WHO, w.thread.id, SendInput(content="hi"))
    await asyncio.wait_for(w.model.waiting.wait(), 5)
    assert await w.conversation.stop(WHO, w.thread.id) is True
    events = await read_all(turn)
    done = events[-1]
    assert isinstance(done, Done)
    assert done == Done(ok=True, content="so far", usage=done.usage, stopped=True)
    assert [r.status for r in await w.runs()] == ["stopped"]


async def test_stop_without_a_running_reply_answers_false() -> None:
    w = await world()
    assert await w.conversation.stop(WHO, w.thread.id) is False
    await send(w)
    assert await w.conversation.stop(WHO, w.thread.id) is False


async def test_stop_of_a_stale_run_answers_false() -> None:
    w = await world()
    w.clock.advance(100)
    await store_run(w, a_stored_run(w, heartbeat_at=w.clock.now() - timedelta(seconds=46)))
    assert await w.conversation.stop(WHO, w.thread.id) is False


async def test_stop_checks_the_caller_may_use_the_thread() -> None:
    w = await world(thread={"created_by": "bob"})
    with pytest.raises(PermissionDenied):
        await w.conversation.stop(USER, w.thread.id)


class Orphans:
    """The memory store, whose runs of other processes are gone (crashed)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.orphaned: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def interrupt_orphaned(self, org_id: str, run_id: uuid.UUID, at: Any) -> bool:
        self.orphaned.append((org_id, run_id, at))
        return True


async def test_stop_of_a_run_whose_process_is_gone_marks_it_interrupted() -> None:
    store: Orphans | None = None

    def wrap(inner: Any) -> Orphans:
        nonlocal store
        store = Orphans(inner)
        return store

    w = await world(store=wrap)
    run = a_stored_run(w)
    await store_run(w, run)
    published: list[uuid.UUID] = []
    w.stops.publish = published.append  # type: ignore[assignment,method-assign]
    assert await w.conversation.stop(WHO, w.thread.id) is True
    assert store is not None
    assert store.orphaned == [(ORG, run.id, w.clock.now())]
    assert published == []


async def test_stop_of_another_processs_live_run_is_published() -> None:
    w = await world()
    run = a_stored_run(w)
    await store_run(w, run)
    published: list[uuid.UUID] = []

    async def publish(run_id: uuid.UUID) -> None:
        published.append(run_id)

    w.stops.publish = publish  # type: ignore[method-assign]
    assert await w.conversation.stop(WHO, w.thread.id) is True
    assert published == [run.id]


async def test_sweep_interrupts_runs_whose_heartbeat_is_stale() -> None:
    w = await world()
    w.clock.advance(100)
    stale = a_stored_run(w, heartbeat_at=w.clock.now() - timedelta(seconds=45.001))
    await store_run(w, stale)
    other = await w.storage.threads.add(msgspec.structs.replace(w.thread, id=uuid.uuid4()))
    fresh = msgspec.structs.replace(
        a_stored_run(w, heartbeat_at=w.clock.now() - timedelta(seconds=45)), thread_id=other.id
    )
    w.store.runs_of(ORG, other.id).append(fresh)
    assert await w.conversation.sweep() == 1
    (swept,) = await w.runs()
    assert (swept.status, swept.finished_at) == ("interrupted", w.clock.now())
    assert (await w.storage.conversations.latest_run(ORG, other.id)).status == "running"  # type: ignore[union-attr]


# --- shutdown -------------------------------------------------------------------


async def test_a_send_after_close_is_refused_with_a_retry_hint() -> None:
    w = await world()
    await w.conversation.close(0)
    with pytest.raises(
        Unavailable, match=r"^the service is shutting down; send again in a moment$"
    ):
        await w.conversation.send(WHO, w.thread.id, SendInput(content="hi"))


async def test_a_reply_stored_after_the_grace_is_interrupted_at_once() -> None:
    w = await world(Script([TextDelta("partial"), HANG]))
    w.conversation._interrupting = True  # the grace is over, the drain runs
    turn = await w.conversation.send(WHO, w.thread.id, SendInput(content="hi"))
    events = await read_all(turn)
    assert events[-1] == ErrorEvent(
        code="INTERRUPTED", detail="the service is shutting down; the partial reply was kept"
    )
    assert [r.status for r in await w.runs()] == ["interrupted"]


async def test_the_drain_waits_out_the_grace_for_a_reply_that_finishes() -> None:
    release = asyncio.Event()

    async def slow(arguments: dict[str, Any]) -> str:
        await release.wait()
        return "done"

    tools = Tools("slow")
    tools.answers["slow"] = slow
    w = await world(Script(calls("slow"), says("fine")), tools)
    turn = await w.conversation.send(WHO, w.thread.id, SendInput(content="hi"))
    drain = w.conversation.close(5.0)
    await asyncio.sleep(0)
    release.set()
    await asyncio.wait_for(drain, 5)
    events = await read_all(turn)
    assert isinstance(events[-1], Done)
    assert [r.status for r in await w.runs()] == ["completed"]


async def test_the_drain_cancels_a_reply_that_ignores_its_stop(monkeypatch: Any) -> None:
    monkeypatch.setattr(heartbeats_module, "INTERRUPT_WAIT_S", 0.01)
    assert INTERRUPT_WAIT_S == 1.0
    hung = asyncio.Event()

    async def hang(arguments: dict[str, Any]) -> str:
        hung.set()
        await asyncio.Event().wait()
        return ""

    tools = Tools("hang")
    tools.answers["hang"] = hang
    w = await world(Script(calls("hang", text="looking"), says("never")), tools)
    turn = await w.conversation.send(WHO, w.thread.id, SendInput(content="hi"))
    await asyncio.wait_for(hung.wait(), 5)
    await asyncio.wait_for(w.conversation.close(0), 5)
    events = await read_all(turn)
    assert events[-1] == ErrorEvent(
        code="INTERRUPTED", detail="the service is shutting down; the partial reply was kept"
    )
    (run,) = await w.runs()
    assert run.status == "interrupted"
    assert [(m.role, m.content, m.status) for m in await w.messages()][1] == (
        "assistant",
        "looking",
        "interrupted",
    )


async def test_a_finished_reply_leaves_nothing_to_drain_or_beat() -> None:
    w = await world()
    await send(w)
    await asyncio.sleep(0)
    assert w.conversation._running == {}
    assert w.stops._events == {}  # its stop is no longer watched


async def test_usage_of_every_step_adds_up_in_done() -> None:
    w = await world(
        Script(
            calls("x", usage=Usage(input_tokens=1, output_tokens=2)),
            says("ok", usage=Usage(input_tokens=10, output_tokens=20, cached_input_tokens=3)),
        ),
        Tools("x"),
    )
    events = await send(w)
    done = events[-1]
    assert isinstance(done, Done)
    assert done.usage is not None
    assert (done.usage.input_tokens, done.usage.output_tokens, done.usage.total_tokens) == (
        11,
        22,
        33,
    )
    assert done.usage.cached_input_tokens == 3


async def test_the_last_usage_report_of_a_call_counts() -> None:
    w = await world(
        Script(
            [
                UsageReport(Usage(input_tokens=1)),
                TextDelta("a"),
                UsageReport(Usage(input_tokens=5, output_tokens=1)),
            ]
        )
    )
    events = await send(w)
    (record,) = await w.usage()
    assert record.usage == Usage(input_tokens=5, output_tokens=1)
    assert isinstance(events[-1], Done)


class HeldBegin:
    """The memory store, whose begin_turn waits for ``release``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def begin_turn(self, *args: Any, **kwargs: Any) -> Any:
        self.entered.set()
        await self.release.wait()
        return await self.inner.begin_turn(*args, **kwargs)


async def test_a_reply_whose_run_is_stored_after_the_drain_is_interrupted_at_once() -> None:
    held: HeldBegin | None = None

    def wrap(inner: Any) -> HeldBegin:
        nonlocal held
        held = HeldBegin(inner)
        return held

    w = await world(Script([TextDelta("partial"), HANG]), store=wrap)
    assert held is not None
    sending = asyncio.create_task(w.conversation.send(WHO, w.thread.id, SendInput(content="hi")))
    await asyncio.wait_for(held.entered.wait(), 5)
    await asyncio.wait_for(w.conversation.close(0), 5)  # nothing registered yet to wait for
    held.release.set()
    events = await read_all(await sending)
    assert events[-1] == ErrorEvent(
        code="INTERRUPTED", detail="the service is shutting down; the partial reply was kept"
    )


async def test_a_grace_under_a_second_is_waited_for() -> None:
    release = asyncio.Event()

    async def slow(arguments: dict[str, Any]) -> str:
        await release.wait()
        return "done"

    tools = Tools("slow")
    tools.answers["slow"] = slow
    w = await world(Script(calls("slow"), says("fine")), tools)
    turn = await w.conversation.send(WHO, w.thread.id, SendInput(content="hi"))
    drain = w.conversation.close(0.9)
    await asyncio.sleep(0)
    release.set()
    await asyncio.wait_for(drain, 5)
    assert isinstance((await read_all(turn))[-1], Done)


async def test_the_drain_ends_though_a_cancelled_reply_does_not(monkeypatch: Any) -> None:
    monkeypatch.setattr(heartbeats_module, "INTERRUPT_WAIT_S", 0.01)
    hung, freed = asyncio.Event(), asyncio.Event()

    async def stubborn(arguments: dict[str, Any]) -> str:
        hung.set()
        while True:
            try:
                await freed.wait()
                return "late"
            except asyncio.CancelledError:
                if freed.is_set():
                    raise
                # ignores cancellation until freed

    tools = Tools("stubborn")
    tools.answers["stubborn"] = stubborn
    w = await world(Script(calls("stubborn"), says("never")), tools)
    turn = await w.conversation.send(WHO, w.thread.id, SendInput(content="hi"))
    await asyncio.wait_for(hung.wait(), 5)
    await asyncio.wait_for(w.conversation.close(0), 5)  # bounded, though the task lives on
    freed.set()
    events = await read_all(turn)
    assert isinstance(events[-1], ErrorEvent)


async def test_the_turn_names_its_run_and_thread() -> None:
    w = await world()
    turn = await w.conversation.send(WHO, w.thread.id, SendInput(content="hi"))
    meta = (await read_all(turn))[0]
    assert isinstance(meta, Meta)
    assert (turn.run_id, turn.thread_id) == (meta.run_id, w.thread.id)


def holding() -> tuple[list[HeldBegin], Any]:
    helds: list[HeldBegin] = []

    def wrap(inner: Any) -> HeldBegin:
        helds.append(HeldBegin(inner))
        return helds[-1]

    return helds, wrap


async def test_sends_to_two_threads_both_call_the_model_while_their_runs_are_stored() -> None:
    helds, wrap = holding()
    w = await world(store=wrap)
    (held,) = helds
    other = await w.storage.threads.add(msgspec.structs.replace(w.thread, id=uuid.uuid4()))
    one = asyncio.create_task(w.conversation.send(WHO, w.thread.id, SendInput(content="a")))
    two = asyncio.create_task(w.conversation.send(WHO, other.id, SendInput(content="b")))
    await asyncio.wait_for(held.entered.wait(), 5)
    for _ in range(20):
        await asyncio.sleep(0)
    assert len(w.model.requests) == 2  # neither waited for the other's write
    held.release.set()
    await read_all(await one)
    await read_all(await two)


async def test_after_a_send_the_next_one_to_the_thread_calls_the_model_early_again() -> None:
    helds, wrap = holding()
    w = await world(store=wrap)
    (held,) = helds
    held.release.set()
    await send(w)
    held.release.clear()
    held.entered.clear()
    sending = asyncio.create_task(w.conversation.send(WHO, w.thread.id, SendInput(content="b")))
    await asyncio.wait_for(held.entered.wait(), 5)
    for _ in range(20):
        await asyncio.sleep(0)
    assert len(w.model.requests) == 2
    held.release.set()
    await read_all(await sending)


class Racing:
    """The memory store, whose begin_turn loses to another send."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def begin_turn(self, *args: Any, **kwargs: Any) -> Any:
        raise ThreadBusy()


async def test_a_refused_run_stops_watching_its_stop() -> None:
    w = await world(store=Racing)
    with pytest.raises(ThreadBusy):
        await w.conversation.send(WHO, w.thread.id, SendInput(content="hi"))
    assert w.stops._events == {}


async def test_summary_compaction_is_for_the_beta_family_only() -> None:
    summaries = []
    for provider in ("alpha", "beta"):
        w, model = await with_compaction(provider, enabled=True, threshold=1)
        for _ in range(4):  # a history long enough to summarise
            await send(w)
        summaries.append(len([r for r in model.requests if r.system == SUMMARY_PROMPT]))
    assert summaries[0] == 0
    assert summaries[1] > 0
    w, model = await with_compaction("beta", enabled=False, threshold=1)
    for _ in range(4):
        await send(w)
    assert [r for r in model.requests if r.system == SUMMARY_PROMPT] == []  # off


async def test_an_enabled_resolver_without_a_key_broker_leaves_the_platform_key() -> None:
    w, model = await with_compaction("beta", enabled=False, resolver=True)
    events = await send(w)
    assert isinstance(events[-1], Done)
    assert model.requests[0].api_key is None


# --- idempotent sends, the live turns, the sweep's purges (merged from main) ----


KEY_A = RequestKey("key-a", b"fingerprint-1")


async def test_a_retried_send_gets_the_first_reply_and_stores_nothing_more() -> None:
    w = await world(Script(says("Hel", "lo")), stored=True)
    msg = SendInput(content="hi")
    first = await read_all(await w.conversation.send_once(WHO, w.thread.id, msg, KEY_A))
    await asyncio.sleep(0)  # the reply's turn is over: the retry reads its stored events
    assert isinstance(first[0], Meta)
    assert w.conversation.turn(first[0].run_id) is None
    w.clock.advance(60)
    await w.conversation.sweep()  # they are kept past a sweep
    again = await read_all(await w.conversation.send_once(WHO, w.thread.id, msg, KEY_A))
    assert again == first
    assert len(await w.runs()) == 1
    assert [m.role for m in await w.messages()] == ["user", "assistant"]
    assert len(w.model.requests) == 1


async def test_a_key_used_for_another_request_is_refused() -> None:
    w = await world(stored=True)
    await read_all(await w.conversation.send_once(WHO, w.thread.id, SendInput(content="a"), KEY_A))
    other = RequestKey("key-a", b"fingerprint-2")
    with pytest.raises(IdempotencyKeyReused):
        await w.conversation.send_once(WHO, w.thread.id, SendInput(content="b"), other)
    assert len(await w.runs()) == 1


async def test_without_a_key_store_a_keyed_send_is_a_send() -> None:
    w = await world()
    for _ in range(2):
        await read_all(
            await w.conversation.send_once(WHO, w.thread.id, SendInput(content="a"), KEY_A)
        )
    assert len(await w.runs()) == 2


async def test_a_retry_while_the_first_reply_runs_follows_it() -> None:
    w = await world(Script([TextDelta("so far"), HANG]), stored=True)
    msg = SendInput(content="hi")
    live = await w.conversation.send_once(WHO, w.thread.id, msg, KEY_A)
    await asyncio.wait_for(w.model.waiting.wait(), 5)
    again = await w.conversation.send_once(WHO, w.thread.id, msg, KEY_A)
    assert again is live
    assert len(await w.runs()) == 1
    await w.conversation.stop(WHO, w.thread.id)
    await read_all(live)


async def test_the_live_turn_is_found_by_its_run_until_it_ends() -> None:
    w = await world(Script([TextDelta("so far"), HANG]))
    turn = await w.conversation.send(WHO, w.thread.id, SendInput(content="hi"))
    assert w.conversation.turn(turn.run_id) is turn
    await asyncio.wait_for(w.model.waiting.wait(), 5)
    await w.conversation.stop(WHO, w.thread.id)
    await read_all(turn)
    await asyncio.sleep(0)
    assert w.conversation.turn(turn.run_id) is None


async def test_the_sweep_drops_keys_past_their_day() -> None:
    w = await world(stored=True)
    msg = SendInput(content="hi")
    await read_all(await w.conversation.send_once(WHO, w.thread.id, msg, KEY_A))
    w.clock.advance(24 * 3600 - 1)
    await w.conversation.sweep()
    await read_all(await w.conversation.send_once(WHO, w.thread.id, msg, KEY_A))
    assert len(await w.runs()) == 1  # still the first reply's
    w.clock.advance(2)
    await w.conversation.sweep()
    assert await w.storage.idempotency.find(ORG, "key-a", T0) is None
    await read_all(await w.conversation.send_once(WHO, w.thread.id, msg, KEY_A))
    assert len(await w.runs()) == 2


class Follows:
    """Follow requests within the test: ``ask`` is what another process would send."""

    def __init__(self) -> None:
        self.callbacks: list[Any] = []
        self.published: list[uuid.UUID] = []

    async def publish_follow(self, run_id: uuid.UUID) -> None:
        self.published.append(run_id)
        self.ask(run_id)

    def on_follow(self, callback: Any) -> None:
        self.callbacks.append(callback)

    def ask(self, run_id: uuid.UUID) -> None:
        for callback in self.callbacks:
            callback(run_id)


async def test_a_followed_reply_stores_its_events_as_they_come() -> None:
    follows = Follows()
    w = await world(Script([TextDelta("so far"), HANG]), stored=True, follows=follows, flush_s=0)
    turn = await w.conversation.send(WHO, w.thread.id, SendInput(content="hi"))
    await asyncio.wait_for(w.model.waiting.wait(), 5)
    follows.ask(uuid.uuid4())  # not a reply of this process: nothing happens
    follows.ask(turn.run_id)
    follows.ask(turn.run_id)  # asked again: still one writer
    for _ in range(20):
        await asyncio.sleep(0)
    stored = await w.storage.streams.stream(ORG, turn.run_id, 0)
    assert stored is not None
    events = [e for _, data in stored.batches for e in decode_events(data)]
    assert events == turn.events[: len(events)]
    assert [type(e).__name__ for e in events] == ["Meta", "Token"]
    assert turn.followed
    await w.conversation.stop(WHO, w.thread.id)
    await read_all(turn)


async def test_two_sends_with_one_key_racing_get_one_reply() -> None:
    helds, wrap = holding()
    w = await world(stored=True, store=wrap)
    (held,) = helds
    msg = SendInput(content="hi")
    one = asyncio.create_task(w.conversation.send_once(WHO, w.thread.id, msg, KEY_A))
    two = asyncio.create_task(w.conversation.send_once(WHO, w.thread.id, msg, KEY_A))
    await asyncio.wait_for(held.entered.wait(), 5)
    for _ in range(20):
        await asyncio.sleep(0)
    held.release.set()
    first, second = await asyncio.wait_for(asyncio.gather(one, two), 5)
    assert await read_all(first) == await read_all(second)
    assert len(await w.runs()) == 1


async def test_a_retried_send_replays_its_reply_for_a_day_not_only_the_replay_window() -> None:
    w = await world(Script(says("Hel", "lo")), stored=True)
    msg = SendInput(content="hi")
    first = await read_all(await w.conversation.send_once(WHO, w.thread.id, msg, KEY_A))
    await asyncio.sleep(0)
    w.clock.advance(2 * 3600)  # past the 10 minutes of re-attach
    await w.conversation.sweep()
    again = await read_all(await w.conversation.send_once(WHO, w.thread.id, msg, KEY_A))
    assert again == first


async def test_re_attach_without_a_run_follows_the_threads_running_reply() -> None:
    w = await world(Script([TextDelta("so far"), HANG]))
    turn = await w.conversation.send(WHO, w.thread.id, SendInput(content="hi"))
    assert await w.conversation.streams.follow(WHO, w.thread.id, None, 0) is turn
    await asyncio.wait_for(w.model.waiting.wait(), 5)
    await w.conversation.stop(WHO, w.thread.id)
    await read_all(turn)


async def test_re_attach_uses_the_services_stale_span_and_replay_window() -> None:
    follows = Follows()
    w = await world(stored=True, follows=follows, stale_after_s=10.0, replay_s=60.0)
    w.clock.advance(100)
    elsewhere = a_stored_run(w, heartbeat_at=w.clock.now() - timedelta(seconds=9))
    await store_run(w, elsewhere)
    # running in another process: followed through storage, which is asked to write
    await w.conversation.streams.follow(WHO, w.thread.id, None, 0)
    assert follows.published == [elsewhere.id]
    w.clock.advance(2)  # its heartbeat is 11 s old now: stale, nothing runs
    with pytest.raises(NotFound):
        await w.conversation.streams.follow(WHO, w.thread.id, None, 0)
    w.store.runs_of(ORG, w.thread.id)[0] = msgspec.structs.replace(
        elsewhere, status="completed", finished_at=w.clock.now()
    )
    await w.conversation.streams.follow(WHO, w.thread.id, elsewhere.id, 0)
    w.clock.advance(61)  # past the replay window
    with pytest.raises(NotFound):
        await w.conversation.streams.follow(WHO, w.thread.id, elsewhere.id, 0)
