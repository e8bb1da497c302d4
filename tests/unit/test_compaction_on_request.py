"""Compaction a client can see and ask for (docs/compaction.md): the ``compaction``
event, sent only to a send that asks (``includeEvents``); ``compact`` now
(``POST /api/threads/{id}/compact``) and the next turn's context
(``GET /api/threads/{id}/context``), built as the turn builds it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from agentsvc_core.entities import Principal, Usage
from agentsvc_core.errors import InvalidInput, PermissionDenied, ThreadBusy
from agentsvc_core.ports import CompactionBlock, Finished, TextDelta, UsageReport
from agentsvc_core.use_cases.org_settings import AgentConfigs, CompactionConfig
from agentsvc_core.use_cases.sealed import SealedRecords
from agentsvc_core.use_cases.threads import Threads
from agentsvc_core.use_cases.turn.compaction import SUMMARY_PROMPT, Compactor, estimate
from agentsvc_core.use_cases.turn.events import CompactionEvent, Done, EventData
from agentsvc_core.use_cases.turn.send_input import SendInput, check_input
from agentsvc_core.use_cases.turn.thread_context import ThreadCompaction
from tests.contract.test_conversations_contract import a_message
from tests.unit.turn_world import (
    BOX,
    ORG,
    WHO,
    Script,
    World,
    a_stored_run,
    read_all,
    says,
    store_run,
    world,
)

SUMMARY = "the summary of it all"
ASKING = frozenset({"compaction"})


async def long_world(
    provider: str = "beta",
    *steps: list[Any],
    enabled: bool = True,
    threshold: int = 100_000,
) -> World:
    """An agent on ``provider`` with compaction on (``enabled``) and a thread of ten
    long messages (user and assistant in turn); the model says ``SUMMARY`` first,
    then ``steps`` (by default: "answer")."""
    model = Script(says(SUMMARY), *(steps or [says("answer")]), provider=provider)
    w = await world(model, compactor=Compactor, agent={"default_model": f"{provider}:m"})
    config = CompactionConfig(
        agent_id=w.agent.id, org_id=ORG, enabled=enabled, beta_compact_threshold=threshold
    )
    await SealedRecords(w.storage.secrets, BOX).put(ORG, "compaction", str(w.agent.id), config)
    old = [
        a_message(w.thread, "user" if i % 2 == 0 else "assistant", f"message {i} " + "w " * 300)
        for i in range(10)
    ]
    await store_run(w, a_stored_run(w, status="completed"), old)
    return w


def ops_of(w: World) -> ThreadCompaction:
    """``/context`` and ``/compact`` over the world's turn, wired as bootstrap/turn.py does."""
    conv, storage = w.conversation, w.storage
    return ThreadCompaction(
        Threads(storage.threads, storage.agents, storage.conversations, w.clock),
        storage.turn_reader,
        storage.conversations,
        conv._router,
        w.tools,
        w.clock,
        conv.reply,
        compactor=Compactor(storage.secrets, BOX),
        configs=AgentConfigs(storage.secrets, BOX),
        keys=None,
        kinds=conv.record_kinds,
        stale_after=timedelta(seconds=45),
    )


async def send(w: World, include: frozenset[str] = frozenset()) -> list[EventData]:
    turn = await w.conversation.send(
        WHO, w.thread.id, SendInput(content="go on", include_events=include)
    )
    events = await read_all(turn)
    assert isinstance(events[-1], Done), events[-1]
    return events


def compactions(events: list[EventData]) -> list[CompactionEvent]:
    return [e for e in events if isinstance(e, CompactionEvent)]


async def test_a_turn_that_summarises_tells_a_send_that_asked() -> None:
    w = await long_world(threshold=1_000)
    [event] = compactions(await send(w, ASKING))
    assert event.kind == "summary"
    assert event.tokens_before > 1_000 > event.tokens_after
    turn_call = w.model.requests[-1]
    assert event.tokens_after == estimate(turn_call.system, turn_call.messages)


async def test_a_send_that_does_not_ask_sees_no_compaction_event() -> None:
    w = await long_world(threshold=1_000)
    events = await send(w)
    assert compactions(events) == []
    assert w.model.requests[0].system == SUMMARY_PROMPT  # it did summarise


async def test_a_native_compaction_tells_a_send_that_asked() -> None:
    block = {"type": "compaction", "content": "short"}
    step = [CompactionBlock(block), TextDelta("hi"), UsageReport(Usage()), Finished("stop")]
    w = await long_world("alpha", step)
    w.model.steps = [step]
    [event] = compactions(await send(w, ASKING))
    sent = w.model.requests[-1]
    assert event == CompactionEvent(
        estimate(sent.system, sent.messages), estimate(sent.system + "short", []), "native"
    )
    assert compactions(await send(w)) == []


def test_an_unknown_event_name_is_refused() -> None:
    with pytest.raises(InvalidInput, match="include_events"):
        check_input(SendInput(content="hi", include_events=frozenset({"compaction", "x"})))
    check_input(SendInput(content="hi", include_events=ASKING))


@pytest.mark.parametrize("provider", ["beta", "alpha"])
async def test_compact_now_summarises_and_the_context_and_next_turn_show_it(
    provider: str,
) -> None:
    w = await long_world(provider)
    ops = ops_of(w)
    before = await ops.context(WHO, w.thread.id)
    assert (before.summary, before.summarised_through, len(before.messages)) == (None, None, 10)
    assert before.tokens == estimate(before.system, before.messages)
    done = await ops.compact(WHO, w.thread.id)
    assert (done.compacted, done.kind, done.tokens_before) == (True, "summary", before.tokens)
    assert done.tokens_after < done.tokens_before
    assert w.model.requests[0].system == SUMMARY_PROMPT
    [record] = await w.usage()
    assert (record.purpose, record.provider, record.message_id) == ("compaction", provider, None)
    after = await ops.context(WHO, w.thread.id)
    assert after.summary == SUMMARY
    assert after.summarised_through == before.messages[-5].id  # all but the recent ones
    assert after.system.endswith(f"Summary of the earlier conversation:\n{SUMMARY}")
    assert after.tokens == done.tokens_after
    assert [m.content for m in after.messages] == [m.content for m in before.messages[-4:]]
    await send(w)
    turn_call = w.model.requests[-1]
    assert turn_call.system == after.system  # what /context showed is what the turn sent
    assert [m.content for m in turn_call.messages] == [
        *(m.content for m in after.messages),
        "go on",
    ]


async def test_compact_with_too_little_to_summarise_does_nothing() -> None:
    w = await long_world()
    w.store._messages[(ORG, w.thread.id)] = w.store._messages[(ORG, w.thread.id)][-3:]
    done = await ops_of(w).compact(WHO, w.thread.id)
    assert (done.compacted, done.tokens_before) == (False, done.tokens_after)
    assert w.model.requests == []
    assert await w.usage() == []


async def test_compact_waits_for_the_running_reply() -> None:
    w = await long_world()
    await store_run(w, a_stored_run(w))
    with pytest.raises(ThreadBusy):
        await ops_of(w).compact(WHO, w.thread.id)


async def test_compact_needs_compaction_on_and_a_compacted_family() -> None:
    off = await long_world(enabled=False)
    with pytest.raises(InvalidInput, match="compaction is off for this agent: turn it on") as e:
        await ops_of(off).compact(WHO, off.thread.id)
    assert e.value.field == "compaction"
    local = await world(Script(), compactor=Compactor)
    with pytest.raises(InvalidInput, match="'local': the local model is not compacted") as m:
        await ops_of(local).compact(WHO, local.thread.id)
    assert m.value.field == "model"
    shown = await ops_of(local).context(WHO, local.thread.id)
    assert (shown.summary, shown.messages, shown.model) == (None, [], "local")


async def test_the_context_is_for_whoever_may_read_the_thread() -> None:
    w = await long_world()
    stranger = Principal(org_id=ORG, method="jwt", user_id="mallory")
    with pytest.raises(PermissionDenied):
        await ops_of(w).context(stranger, w.thread.id)
    with pytest.raises(PermissionDenied):
        await ops_of(w).compact(stranger, w.thread.id)


async def test_the_context_and_a_compaction_read_the_current_branch_only() -> None:
    w = await long_world()
    first = (await w.messages())[0]
    edited = await w.conversation.send(
        WHO, w.thread.id, SendInput(content="a new start", edit_of=first.id)
    )
    await read_all(edited)
    seen = await ops_of(w).context(WHO, w.thread.id)
    assert next(m.content for m in seen.messages) == "a new start"
    assert len(seen.messages) == 2  # the new message and its reply
    assert not any(m.content.startswith("message ") for m in seen.messages)


async def test_a_service_without_summaries_refuses_a_compaction() -> None:
    w = await long_world()
    ops = ops_of(w)
    ops._compactor = None
    with pytest.raises(InvalidInput) as refused:
        await ops.compact(WHO, w.thread.id)
    assert (refused.value.field, refused.value.problem) == (
        "compaction",
        "this service keeps no summaries",
    )
    shown = await ops.context(WHO, w.thread.id)
    assert (shown.summary, shown.summarised_through) == (None, None)
