"""The reply loop (use_cases/turn/reply.py; docs/client-guide.md, "Events", and
docs/api.md, "The turn, server side"): the events a turn streams, the messages, run
and usage records it stores, for text, server and client tools, stops, provider
failures, crashes and the step limit."""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import timedelta
from typing import Any

import pytest

from agentsvc_core.entities import Message, Principal, ToolCall, Usage
from agentsvc_core.errors import InvalidInput, Unavailable, Upstream
from agentsvc_core.ports import (
    CompactionBlock,
    Finished,
    TextDelta,
    ToolAuthRequired,
    ToolCallRequested,
    ToolSpec,
    UsageReport,
)
from agentsvc_core.use_cases.org_settings import CompactionConfig
from agentsvc_core.use_cases.sealed import SealedRecords
from agentsvc_core.use_cases.turn import heartbeats as heartbeats_module
from agentsvc_core.use_cases.turn import reply_tools as reply_tools_module
from agentsvc_core.use_cases.turn.compaction import SUMMARY_PROMPT, Checkpoint, Compactor
from agentsvc_core.use_cases.turn.conversation import SendInput
from agentsvc_core.use_cases.turn.events import (
    AuthChallenge,
    Challenge,
    Done,
    ErrorEvent,
    Meta,
    ProfileSwitchProposal,
    RequiresAction,
    Token,
    ToolCallEvent,
    ToolCallOut,
    ToolExecuting,
    ToolResult,
    UsageOut,
)
from agentsvc_core.use_cases.turn.reply import MAX_STEPS
from tests.contract.test_conversations_contract import a_message
from tests.unit.test_turn_keys import Resolver, turn_with
from tests.unit.turn_world import (
    BOX,
    HANG,
    ORG,
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


async def send(w: World, msg: SendInput | None = None) -> list[Any]:
    turn = await w.conversation.send(WHO, w.thread.id, msg or SendInput(content="hi"))
    return await read_all(turn)


def kinds(events: list[Any]) -> list[str]:
    return [type(e).__name__ for e in events]


async def test_a_text_reply_streams_tokens_then_done_and_is_stored() -> None:
    w = await world(Script(says("Hel", "", "lo", usage=Usage(input_tokens=4, output_tokens=2))))
    events = await send(w)
    assert kinds(events) == ["Meta", "Token", "Token", "Done"]  # no token for empty text
    assert [e.delta for e in events if isinstance(e, Token)] == ["Hel", "lo"]
    (_user, assistant) = await w.messages()
    assert (assistant.role, assistant.content, assistant.status) == (
        "assistant",
        "Hello",
        "complete",
    )
    assert events[-1] == Done(
        ok=True,
        content="Hello",
        message_id=assistant.id,
        usage=UsageOut(input_tokens=4, output_tokens=2, total_tokens=6),
    )
    (run,) = await w.runs()
    assert (run.status, run.finished_at, run.heartbeat_at) == (
        "completed",
        w.clock.now(),
        w.clock.now(),
    )
    assert run.pending_tool_calls == ()
    (record,) = await w.usage()
    assert (record.message_id, record.run_id, record.agent_id, record.thread_id) == (
        assistant.id,
        run.id,
        w.agent.id,
        w.thread.id,
    )
    assert (record.provider, record.model, record.key_source, record.usage) == (
        "local",
        "local",
        "platform",
        Usage(input_tokens=4, output_tokens=2),
    )
    assert record.created_at == w.clock.now()


async def test_a_server_tool_runs_and_its_result_feeds_the_next_call() -> None:
    w = await world(Script(calls("kb", text="let me look"), says("found it")), Tools("kb"))
    events = await send(w)
    assert kinds(events) == [
        "Meta",
        "Token",
        "ToolCallEvent",
        "ToolExecuting",
        "ToolResult",
        "Token",
        "Done",
    ]
    assert events[2] == ToolCallEvent(tool=ToolCallOut(id="c-kb", name="kb", arguments={"q": "kb"}))
    assert events[3] == ToolExecuting(tool_name="kb", tool_call_id="c-kb")
    assert events[4] == ToolResult(tool_name="kb", tool_call_id="c-kb", result="kb answered")
    assert w.tools.called == [("kb", {"q": "kb"})]
    stored = await w.messages()
    assert [(m.role, m.content) for m in stored] == [
        ("user", "hi"),
        ("assistant", "let me look"),
        ("tool", "kb answered"),
        ("assistant", "found it"),
    ]
    assert [c.name for c in stored[1].tool_calls] == ["kb"]
    assert (stored[2].tool_call_id, stored[2].sender_name) == ("c-kb", "kb")
    second = w.model.requests[1].messages
    assert [(m.role, m.content) for m in second] == [(m.role, m.content) for m in stored[:3]]
    done = events[-1]
    assert (done.content, done.message_id) == ("let me lookfound it", stored[3].id)
    records = await w.usage()
    assert [r.message_id for r in records] == [stored[1].id, stored[3].id]


async def test_the_request_carries_the_snapshot_of_the_context() -> None:
    w = await world(Script(calls("kb"), says("done")), Tools("kb"))
    await send(w)
    first, second = w.model.requests
    assert [m.role for m in first.messages] == ["user"]  # not appended to afterwards
    assert [m.role for m in second.messages] == ["user", "assistant", "tool"]
    assert (first.model, first.api_key, first.max_tokens) == ("local", None, 4096)


async def test_a_tool_not_offered_answers_an_error_to_the_model() -> None:
    w = await world(Script(calls("ghost"), says("sorry")))
    events = await send(w)
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.result == "error: the tool 'ghost' is not available in this conversation"
    assert w.tools.called == []


async def test_a_failing_tool_answers_its_error_detail() -> None:
    tools = Tools("kb")
    tools.answers["kb"] = InvalidInput("q", "too vague")
    w = await world(Script(calls("kb"), says("hmm")), tools)
    events = await send(w)
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.result == "error: q: too vague"
    assert isinstance(events[-1], Done)


async def test_a_tool_that_needs_authorization_shows_the_challenge() -> None:
    tools = Tools("gh__issues")
    tools.answers["gh__issues"] = ToolAuthRequired(
        "github", "https://example.test/authorize", "Read your issues"
    )
    w = await world(Script(calls("gh__issues"), says("please authorize")), tools)
    events = await send(w)
    challenge = next(e for e in events if isinstance(e, AuthChallenge))
    assert challenge == AuthChallenge(
        tool_name="gh__issues",
        challenge=Challenge(
            provider="github",
            redirect_url="https://example.test/authorize",
            description="Read your issues",
        ),
    )
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.result == (
        "The user must first authorize access to github; they were shown a link to do so."
    )


async def test_a_tool_that_does_not_answer_in_time_answers_a_timeout(monkeypatch: Any) -> None:
    monkeypatch.setattr(reply_tools_module, "TOOL_TIMEOUT_S", 0.01)

    async def hang(arguments: dict[str, Any]) -> str:
        await asyncio.Event().wait()
        return ""

    tools = Tools("slow")
    tools.answers["slow"] = hang
    w = await world(Script(calls("slow"), says("gave up")), tools)
    events = await send(w)
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.result == "error: the tool 'slow' did not answer within 0 s"
    assert isinstance(events[-1], Done)


async def test_a_profile_switch_proposal_is_shown_and_changes_nothing() -> None:

    ask = ToolCallRequested(
        ToolCall(
            id="p1",
            name="propose_profile_switch",
            arguments={"target": "admin", "reason": "needs writes"},
        )
    )
    w = await world(Script([ask], says("proposed")))
    events = await send(w)
    assert ProfileSwitchProposal(target="admin", reason="needs writes") in events
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.result == (
        "The proposal to switch to 'admin' was shown to the user. The profile has not changed."
    )
    assert w.tools.called == []


async def test_a_profile_switch_proposal_without_arguments_proposes_empty_strings() -> None:

    ask = ToolCallRequested(ToolCall(id="p1", name="propose_profile_switch", arguments={}))
    w = await world(Script([ask], says("proposed")))
    events = await send(w)
    assert ProfileSwitchProposal(target="", reason="") in events


async def test_client_tools_end_the_turn_with_requires_action() -> None:
    w = await world(Script(calls("kb", "pick"), says("never")), Tools("kb"))
    events = await send(w, SendInput(content="hi", tools=[ToolSpec(name="pick")]))
    assert kinds(events)[-2:] == ["RequiresAction", "Done"]
    assert events[-2] == RequiresAction(
        tool_calls=[ToolCallOut(id="c-pick", name="pick", arguments={"q": "pick"})]
    )
    assert w.tools.called == [("kb", {"q": "kb"})]  # the server tool ran, the client's did not
    assert len(w.model.requests) == 1
    (run,) = await w.runs()
    assert run.status == "requires_action"
    assert [c.id for c in run.pending_tool_calls] == ["c-pick"]
    stored = await w.messages()
    assert [m.role for m in stored] == ["user", "assistant", "tool"]


async def test_a_user_stop_ends_the_call_and_keeps_the_partial_text() -> None:
    w = await world(Script([TextDelta("par"), TextDelta("tial"), HANG]))
    turn = await w.conversation.send(WHO, w.thread.id, SendInput(content="hi"))
    await asyncio.wait_for(w.model.waiting.wait(), 5)
    await w.conversation.stop(WHO, w.thread.id)
    events = await read_all(turn)
    assert events[-1] == Done(
        ok=True,
        content="partial",
        message_id=None,
        usage=UsageOut(input_tokens=0, output_tokens=0, total_tokens=0),
        stopped=True,
    )
    assert w.model.closed == 1  # the stream was closed
    (_, assistant) = await w.messages()
    assert (assistant.content, assistant.status) == ("partial", "stopped")
    (run,) = await w.runs()
    assert run.status == "stopped"
    assert len(await w.usage()) == 1


async def test_a_stop_during_a_tool_step_ends_the_turn_before_the_next_call() -> None:
    tools = Tools("kb")
    w: World | None = None

    async def stop_now(arguments: dict[str, Any]) -> str:
        assert w is not None
        await w.conversation.stop(WHO, w.thread.id)
        return "found"

    tools.answers["kb"] = stop_now
    w = await world(Script(calls("kb"), says("more")), tools)
    events = await send(w)
    assert len(w.model.requests) == 1
    done = events[-1]
    assert isinstance(done, Done)
    assert done.stopped is True
    assert [r.status for r in await w.runs()] == ["stopped"]


async def test_a_provider_failure_ends_with_its_error_and_keeps_what_was_said() -> None:
    failure = Upstream("the provider is overloaded", code="PROVIDER_OVERLOADED")
    w = await world(Script([TextDelta("Hal"), UsageReport(Usage(input_tokens=2)), failure]))
    events = await send(w)
    assert events[-1] == ErrorEvent(code="PROVIDER_OVERLOADED", detail="the provider is overloaded")
    assert not any(isinstance(e, Done) for e in events)
    (_, assistant) = await w.messages()
    assert (assistant.content, assistant.status, assistant.tool_calls) == ("Hal", "failed", ())
    (run,) = await w.runs()
    assert run.status == "failed"
    (record,) = await w.usage()
    assert record.usage == Usage(input_tokens=2)  # what the provider reported is paid


async def test_a_provider_failure_after_a_tool_call_drops_the_call() -> None:
    failure = Upstream("cut", code="PROVIDER_ERROR")
    step = [*calls("kb")[:-2], failure]
    w = await world(Script(step), Tools("kb"))
    events = await send(w)
    assert events[-1] == ErrorEvent(code="PROVIDER_ERROR", detail="cut")
    assert w.tools.called == []
    assert (await w.messages())[1].tool_calls == ()


async def test_a_crash_in_the_reply_ends_with_an_internal_error_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = await world(Script([TextDelta("a"), RuntimeError("boom")]))
    with caplog.at_level(logging.ERROR, logger="agentsvc.turn"):
        events = await send(w)
    assert events[-1] == ErrorEvent(code="INTERNAL_ERROR", detail="the reply failed")
    (run,) = await w.runs()
    assert run.status == "failed"
    assert [m.role for m in await w.messages()] == ["user"]
    (logged,) = caplog.records
    assert logged.getMessage() == f"turn {run.id} failed"
    assert logged.exc_info is not None
    assert str(logged.exc_info[1]) == "boom"


class Refusing:
    """The memory store whose finish_turn fails."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def finish_turn(self, *args: Any, **kwargs: Any) -> None:

        raise Unavailable("the database is gone")


async def test_a_reply_that_cannot_be_stored_ends_with_a_storage_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = await world(store=Refusing)
    with caplog.at_level(logging.ERROR, logger="agentsvc.turn"):
        events = await send(w)
    assert events[-1] == ErrorEvent(code="STORAGE_ERROR", detail="the reply could not be stored")
    assert "could not be stored: the database is gone" in caplog.text


async def test_a_failed_reply_that_cannot_be_stored_keeps_its_own_error() -> None:
    failure = Upstream("down", code="PROVIDER_ERROR")
    w = await world(Script([failure]), store=Refusing)
    events = await send(w)
    assert events[-1] == ErrorEvent(code="PROVIDER_ERROR", detail="down")


async def test_a_reply_makes_at_most_max_steps_model_calls(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = await world(Script(calls("kb")), Tools("kb"))
    with caplog.at_level(logging.WARNING, logger="agentsvc.turn"):
        events = await send(w)
    assert len(w.model.requests) == MAX_STEPS == 8
    assert isinstance(events[-1], Done)
    (run,) = await w.runs()
    assert run.status == "completed"
    assert f"reached {MAX_STEPS} model calls" in caplog.text


async def test_a_call_paused_after_compacting_is_followed_by_another() -> None:
    block = {"type": "compaction", "content": "summary"}
    paused = [CompactionBlock(block), UsageReport(Usage(input_tokens=7)), Finished("compaction")]
    w = await world(Script(paused, says("go on")))
    events = await send(w)
    assert len(w.model.requests) == 2
    stored = await w.messages()
    assert stored[1].provider_blocks == (block,)
    assert stored[2].content == "go on"
    assert isinstance(events[-1], Done)
    assert events[-1].message_id == stored[2].id


async def test_a_call_that_finishes_for_another_reason_without_tools_ends_the_turn() -> None:
    w = await world(Script([TextDelta("cut"), Finished("length")], says("more")))
    await send(w)
    assert len(w.model.requests) == 1


async def test_meta_is_the_first_event_of_a_reply() -> None:
    w = await world()
    events = await send(w)
    assert isinstance(events[0], Meta)


async def test_a_server_tool_is_called_for_the_sender_and_the_agent() -> None:
    w = await world(Script(calls("kb"), says("ok")), Tools("kb"))
    await send(w)
    assert w.tools.callers == [(WHO, w.agent)]


async def test_every_usage_record_is_its_own_and_the_organizations() -> None:
    w = await world(Script(calls("kb"), says("ok")), Tools("kb"))
    await send(w)
    records = await w.usage()
    assert [r.org_id for r in records] == [ORG, ORG]
    assert len({r.id for r in records}) == 2
    assert all(isinstance(r.id, uuid.UUID) for r in records)


async def beta_turn(compactor: type[Compactor] = Compactor) -> World:
    """A beta turn with summary compaction on (no summary: a high threshold) and two
    tool steps, each call reporting more input tokens."""
    steps = [
        calls("kb", usage=Usage(input_tokens=100)),
        calls("kb", usage=Usage(input_tokens=200)),
        says("done", usage=Usage(input_tokens=300)),
    ]
    w = await world(
        Script(*steps, provider="beta"),
        Tools("kb"),
        agent={"default_model": "beta:m"},
        compactor=compactor,
    )
    await SealedRecords(w.storage.secrets, BOX).put(
        ORG,
        "compaction",
        str(w.agent.id),
        CompactionConfig(agent_id=w.agent.id, org_id=ORG, enabled=True),
    )
    return w


async def test_a_compacting_turn_keeps_the_providers_last_count_for_the_next() -> None:
    w = await beta_turn()
    events = await send(w)
    assert isinstance(events[-1], Done)
    cp = await Compactor(w.storage.secrets, BOX).checkpoint(ORG, w.thread.id)
    # the context of the last call: user, then (assistant, tool) twice, then the answer
    assert (cp.input_tokens, cp.counted, cp.summary) == (300, 5, "")


class FailingSave(Compactor):
    async def save(self, org: str, thread_id: uuid.UUID, cp: Any) -> None:
        raise Unavailable("no database")


async def test_a_checkpoint_that_cannot_be_kept_does_not_fail_the_turn() -> None:
    w = await beta_turn(FailingSave)
    events = await send(w)
    assert isinstance(events[-1], Done)
    assert [r.status for r in await w.runs()] == ["completed"]


async def test_the_stored_messages_belong_to_the_thread_and_carry_the_time() -> None:
    w = await world(Script(calls("kb"), says("ok")), Tools("kb"))
    w.clock.advance(3)
    await send(w)
    stored = await w.messages()
    assert {(m.org_id, m.thread_id, m.created_at) for m in stored} == {
        (ORG, w.thread.id, w.clock.now())
    }


async def test_a_finished_run_carries_the_time_it_finished() -> None:
    tools = Tools("tick")
    w: World | None = None

    async def tick(arguments: dict[str, Any]) -> str:
        assert w is not None
        w.clock.advance(30)
        return "ticked"

    tools.answers["tick"] = tick
    w = await world(Script(calls("tick"), says("ok")), tools)
    await send(w)
    (run,) = await w.runs()
    assert run.finished_at == run.heartbeat_at == run.started_at + timedelta(seconds=30)


async def test_a_successful_turn_logs_no_error(caplog: pytest.LogCaptureFixture) -> None:
    w = await world()
    with caplog.at_level(logging.ERROR, logger="agentsvc.turn"):
        await send(w)
    assert caplog.records == []


async def test_a_reply_cancelled_at_shutdown_that_cannot_be_stored_still_ends_its_stream(
    monkeypatch: Any,
) -> None:
    monkeypatch.setattr(heartbeats_module, "INTERRUPT_WAIT_S", 0.01)
    hung = asyncio.Event()

    async def hang(arguments: dict[str, Any]) -> str:
        hung.set()
        await asyncio.Event().wait()
        return ""

    tools = Tools("hang")
    tools.answers["hang"] = hang
    w = await world(Script(calls("hang"), says("never")), tools, store=Refusing)
    turn = await w.conversation.send(WHO, w.thread.id, SendInput(content="hi"))
    await asyncio.wait_for(hung.wait(), 5)
    await asyncio.wait_for(w.conversation.close(0), 5)
    events = await read_all(turn)
    assert events[-1] == ErrorEvent(
        code="INTERRUPTED", detail="the service is shutting down; the partial reply was kept"
    )


def long_history(w: World, n: int = 8) -> list[Message]:
    return [a_message(w.thread, content=f"message {i} " + "word " * 200) for i in range(n)]


async def summarising(threshold_from_estimate: int = 0) -> tuple[World, Script]:
    """A beta turn over a long history; the threshold is the context's estimate
    plus ``threshold_from_estimate`` (negative: the turn summarises)."""
    model = Script(says("answer", usage=Usage(input_tokens=50)), provider="beta")
    w = await world(
        model,
        agent={"default_model": "beta:m7", "stable_preamble": "Be kind."},
        compactor=Compactor,
    )
    old = long_history(w)
    await store_run(w, a_stored_run(w, status="completed"), old)
    new = a_message(w.thread, content="hi")
    context = Compactor(w.storage.secrets, BOX).tokens(Checkpoint(), "Be kind.", [*old, new])
    await SealedRecords(w.storage.secrets, BOX).put(
        ORG,
        "compaction",
        str(w.agent.id),
        CompactionConfig(
            agent_id=w.agent.id,
            org_id=ORG,
            enabled=True,
            beta_compact_threshold=context + threshold_from_estimate,
        ),
    )
    return w, model


def summary_step() -> list[Any]:
    return [TextDelta("the summary"), UsageReport(Usage(input_tokens=40, output_tokens=4))]


async def test_a_context_at_the_threshold_is_not_summarised() -> None:
    w, model = await summarising(0)
    await send(w)
    assert [r.system for r in model.requests] == ["Be kind."]


async def test_a_context_over_the_threshold_is_summarised_first() -> None:
    w, model = await summarising(-1)
    model.steps = [summary_step(), says("answer", usage=Usage(input_tokens=50))]
    events = await send(w)
    assert isinstance(events[-1], Done)
    summary_call, turn_call = model.requests
    assert (summary_call.system, summary_call.model) == (SUMMARY_PROMPT, "m7")
    assert turn_call.system == ("Be kind.\n\nSummary of the earlier conversation:\nthe summary")
    stored = await w.messages()
    cp = await Compactor(w.storage.secrets, BOX).checkpoint(ORG, w.thread.id)
    assert (cp.summary, cp.through) == ("the summary", stored[4].id)  # 9 messages: 4 kept
    assert [m.id for m in turn_call.messages] == [m.id for m in stored[5:9]]
    summary_record, answer_record = await w.usage()
    assert (summary_record.message_id, summary_record.usage) == (
        None,
        Usage(input_tokens=40, output_tokens=4),
    )
    assert summary_record.model == "beta:m7"
    assert answer_record.message_id == stored[-1].id
    # the next turn starts from the checkpoint: the summary, not the old messages
    model.steps = [says("again")]
    await send(w, SendInput(content="more"))
    assert model.requests[-1].system == turn_call.system


async def test_the_resolver_is_asked_for_the_model_name_and_never_for_local() -> None:
    resolver = Resolver()
    await turn_with(resolver, compact=False, model_id="beta:m1")
    assert [(c.provider, c.model) for c in resolver.calls] == [("beta", "m1")]
    local = Resolver()
    await turn_with(local, compact=False, model_id="local")
    assert local.calls == []


async def test_a_stopped_call_records_the_last_usage_reported_and_the_key_that_paid() -> None:
    reports = [UsageReport(Usage(input_tokens=n)) for n in (1, 2, 5)]
    w = await world(Script([*reports, TextDelta("so far"), HANG]))
    turn = await w.conversation.send(WHO, w.thread.id, SendInput(content="hi"))
    await asyncio.wait_for(w.model.waiting.wait(), 5)
    await w.conversation.stop(WHO, w.thread.id)
    await read_all(turn)
    (record,) = await w.usage()
    assert (record.usage, record.key_source) == (Usage(input_tokens=5), "platform")


async def test_a_failed_call_records_the_key_that_paid() -> None:
    w = await world(Script([UsageReport(Usage(input_tokens=2)), Upstream("down")]))
    await send(w)
    (record,) = await w.usage()
    assert record.key_source == "platform"


class BadClose:
    """A stream that hangs, and whose closing fails (a provider's connection)."""

    def __init__(self, model: Script) -> None:
        self.model = model

    def __aiter__(self) -> BadClose:
        return self

    async def __anext__(self) -> Any:
        self.model.waiting.set()
        await asyncio.Event().wait()

    async def aclose(self) -> None:
        raise RuntimeError("connection reset while closing")


class BadCloseModel(Script):
    def stream(self, request: Any) -> Any:
        self.requests.append(request)
        return BadClose(self)


async def test_a_stream_that_fails_to_close_does_not_fail_a_stopped_reply() -> None:
    w = await world(BadCloseModel())
    turn = await w.conversation.send(WHO, w.thread.id, SendInput(content="hi"))
    await asyncio.wait_for(w.model.waiting.wait(), 5)
    await w.conversation.stop(WHO, w.thread.id)
    events = await read_all(turn)
    done = events[-1]
    assert isinstance(done, Done)
    assert done.stopped is True


async def test_an_api_key_turn_asks_the_resolver_for_no_user() -> None:
    resolver = Resolver()
    api_key = Principal(org_id="org-keys", method="api_key")
    await turn_with(resolver, compact=False, model_id="beta:m1", who=api_key)
    assert [c.user_id for c in resolver.calls] == [""]


async def test_a_summary_is_kept_though_the_reply_after_it_crashes() -> None:
    w, model = await summarising(-1)
    model.steps = [summary_step(), [RuntimeError("boom")]]
    events = await send(w)
    assert events[-1] == ErrorEvent(code="INTERNAL_ERROR", detail="the reply failed")
    cp = await Compactor(w.storage.secrets, BOX).checkpoint(ORG, w.thread.id)
    assert cp.summary == "the summary"  # the next turn need not summarise again
