"""The reply loop: compaction, then model call, tools, model call... then the store.

``Reply.run`` is the task ``Conversation.send`` starts (use_cases/turn/conversation.py).
It streams into the ``Turn`` buffer from the first token, but stores nothing and
runs nothing (tools, compaction) before ``begun`` says the run is stored. Its
storage round trips: none per token or per step; one ``finish_turn`` at the end;
with compaction on a checkpoint read before the first call (alpha, beta), and for
beta a checkpoint write when it summarises and one after the reply (the provider's token
count, for the next turn's estimate); per server tool call, what the tool reads
(an MCP tool: the agent's attached servers, and its OAuth token when it has one).
With the agent's credential resolver on, the first model call asks for the key
(``TurnKeys``: a read of the signing secret, then the signed webhook); the turn's
later calls and its compaction summary reuse it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_core.entities import (
    KeySource,
    Message,
    Role,
    Run,
    ToolCall,
    Usage,
    UsagePurpose,
    UsageRecord,
    key_source,
)
from agentsvc_core.errors import DomainError, Upstream
from agentsvc_core.ports import (
    Clock,
    CompactionBlock,
    ConversationStore,
    Finished,
    ModelEvent,
    ModelRequest,
    ServerTools,
    StopSignal,
    TextDelta,
    ToolCallRequested,
    UsageReport,
)
from agentsvc_core.ports.llm import SUMMARY_COMPACTION_FAMILIES
from agentsvc_core.ports.telemetry import COLLECTED, CURRENT, FinishedSpan, Span, Tracer
from agentsvc_core.telemetry import SpanTracer
from agentsvc_core.use_cases.branches import chained
from agentsvc_core.use_cases.traces.build import TraceConfig, TurnFacts, build_trace
from agentsvc_core.use_cases.turn._private import (
    INTERRUPTED,
    Called,
    Plan,
    ReplyState,
    interrupted,
    message_status,
    new_message,
    tool_out,
    usage_out,
)
from agentsvc_core.use_cases.turn.compaction import (
    Checkpoint,
    Compactor,
    estimate,
    native_tokens,
)
from agentsvc_core.use_cases.turn.context import model_history
from agentsvc_core.use_cases.turn.events import (
    AfterTurn,
    CompactionEvent,
    Done,
    ErrorEvent,
    EventData,
    RequiresAction,
    Token,
    Turn,
    TurnEnded,
)
from agentsvc_core.use_cases.turn.reply_tools import TOOL_TIMEOUT_S, run_tool
from agentsvc_core.use_cases.turn.spans import (
    chat_ended,
    chat_span,
    compaction_span,
    reply_ended,
    reply_span,
    usage_attributes,
)

__all__ = ["MAX_STEPS", "TOOL_TIMEOUT_S", "Reply"]

log = logging.getLogger("agentsvc.turn")

MAX_STEPS = 8  # model calls per turn (tool loop bound)
# the error of a reply a runner's budget ended before a model call (``Plan.gate``)
BUDGET_EXCEEDED = "BUDGET_EXCEEDED"


# what the model reads of a call needing approval where nobody can give it
NOBODY_TO_APPROVE = (
    "error: this call needs a person's approval, which cannot be asked for in this "
    "conversation; it was not run"
)


def _needs_approval(plan: Plan, call: ToolCall) -> bool:
    """Whether a server-side call waits for a person's approval: the source that
    listed the tool said so for this agent (``ToolSpec.approval``), from what the
    turn read already, so asking costs nothing."""
    spec = plan.server_tools.get(call.name)
    return spec is not None and spec.approval


class Reply:
    """Runs replies: one ``run`` task per turn; the object holds only its ports."""

    def __init__(
        self,
        store: ConversationStore,
        tools: ServerTools,
        clock: Clock,
        compactor: Compactor | None = None,
        tracer: Tracer | None = None,
        traces: TraceConfig | None = None,
        after_turn: Sequence[AfterTurn] = (),
    ) -> None:
        """``traces``: the prices of model calls (``cost_usd`` on usage records) and
        how the reply's trace is stored with its final write (None: neither).
        ``after_turn``: what runs once a stored reply's last event is out."""
        self._after = tuple(after_turn)
        self._store = store
        self._tools = tools
        self._clock = clock
        self._compactor = compactor
        self.tracer: Tracer = tracer or SpanTracer()
        self._traces = traces
        self._keep_traces = traces is not None and traces.retention > timedelta(0)

    async def run(
        self,
        plan: Plan,
        run: Run,
        history: list[Message],
        turn: Turn,
        begun: asyncio.Future[None],
        stop: StopSignal,
        span: Span | None = None,
    ) -> None:
        """The reply. ``begun`` resolves once the run is stored; until then the model
        call may stream into ``turn`` (which nobody reads yet) but nothing is stored
        or run. When it is cancelled instead, the run was never stored: this task is
        cancelled too and leaves nothing behind. ``span`` (``invoke_agent``) is the
        reply's span, ended here with the outcome."""
        span = span or reply_span(self.tracer, plan, run)
        CURRENT.set(span.context)  # this task's own context: its spans are the reply's children
        collected: list[FinishedSpan] | None = None
        if self._keep_traces:
            collected = []  # this task's spans (and the reply's own), for its stored trace
            COLLECTED.set(collected)
        parent = history[-1].id if plan.branched and history else None  # a branched thread's
        state = ReplyState(messages=model_history(history), begun=begun, parent=parent)
        failure: Exception | None = None
        try:
            if plan.approved:
                await self._run_approved(plan, run, turn, state)
            checkpoint = await self._compact(plan, run, state, turn)
            await self._steps(plan, run, turn, stop, state)
            await self._remember_usage(plan, run, state, checkpoint)
        except asyncio.CancelledError:
            if not begun.done() or begun.cancelled():
                raise  # the run was never stored: nothing to keep
            # The process is shutting down and this reply did not end when interrupted
            # (a tool call): keep what was said, mark it interrupted.
            interrupted(state)
            final: EventData = state.error or INTERRUPTED
            with contextlib.suppress(DomainError):
                await self._finish(plan, run, state, turn, final, span, collected)
            reply_ended(span, state)  # (with a stored trace: ended already, before the write)
            turn.emit(final)
            turn.close()
            raise
        except Exception as exc:  # noqa: BLE001 (logged below, once the run is stored)
            failure = exc
            state.status = "failed"
            state.error = ErrorEvent(code="INTERNAL_ERROR", detail="the reply failed")
        await begun  # the run is stored (a failure can come before that)
        if stop.interrupted and state.status == "stopped":
            interrupted(state)  # stopped by the shutdown, not by the user
        if failure is not None:
            log.error("turn %s failed", run.id, exc_info=failure)
        stored = await self._store_and_end(plan, run, state, turn, span, collected)
        if self._after and stored:
            await self._ended(plan, run, state)

    async def _store_and_end(
        self,
        plan: Plan,
        run: Run,
        state: ReplyState,
        turn: Turn,
        span: Span,
        collected: list[FinishedSpan] | None,
    ) -> bool:
        """Store the reply, then send its final event and end its stream: ``done``,
        its ``error``, or ``STORAGE_ERROR`` when the write failed (False)."""
        final = state.error or self._done(state)
        stored = True
        try:
            await self._finish(plan, run, state, turn, final, span, collected)
        except DomainError as exc:
            stored = False
            log.error("turn %s could not be stored: %s", run.id, exc.detail)
            final = state.error or ErrorEvent(
                code="STORAGE_ERROR", detail="the reply could not be stored"
            )
            span.fail("STORAGE_ERROR")
        reply_ended(span, state)  # (with a stored trace: ended already, before the write)
        turn.emit(final)
        turn.close()
        return stored

    async def _ended(self, plan: Plan, run: Run, state: ReplyState) -> None:
        ended = TurnEnded(
            org_id=run.org_id,
            agent_id=plan.agent.id,
            thread_id=run.thread_id,
            run_id=run.id,
            status=state.status,
            model_id=plan.model_id,
            user_id=plan.user_id,
            records=plan.tool_setup.records if plan.tool_setup is not None else {},
            metadata=plan.metadata,
        )
        for hook in self._after:
            try:
                await hook(ended)
            except Exception:  # what follows a reply must not fail it (it is over)
                log.exception("what runs after turn %s failed", run.id)

    async def _run_approved(self, plan: Plan, run: Run, turn: Turn, state: ReplyState) -> None:
        """The calls a person approved since the last reply, run before the first
        model call (once the run is stored), with the events of any server-side
        call; their results join the model's context right after the calls' other
        results (before the message that came with the approvals)."""
        await state.begun
        # a call whose result is stored ran already: two sends answered the same
        # approvals, and the other's reply got there first (its history, re-read)
        ran = {m.tool_call_id for m in state.messages if m.role == "tool"}
        for call in plan.approved:
            if call.id in ran:
                continue
            result = await run_tool(self._tools, self.tracer, plan, call, turn)
            state.add(self._tool_message(run, call, result))
        state.messages = model_history(state.messages)

    async def _compact(
        self, plan: Plan, run: Run, state: ReplyState, turn: Turn
    ) -> Checkpoint | None:
        """Summary-based compaction: the thread's summary, when it has one, is sent
        (in ``plan.system``, which this replaces) with the messages after it; for the
        beta family, above the agent's threshold, the older messages are summarised
        first (a model call paid with the turn's key), and a send that asked is told
        (a ``compaction`` event). Returns the thread's checkpoint (None: compaction
        is off)."""
        config, compactor = plan.compaction, self._compactor
        if config is None or not config.enabled or compactor is None:
            return None
        await state.begun  # compaction may call a model and store a summary
        try:
            cp = compactor.on_branch(
                await compactor.checkpoint(run.org_id, run.thread_id), state.messages
            )
            system, recent = compactor.applied(cp, plan.system, state.messages)
            before = compactor.tokens(cp, system, recent)
            if (
                plan.model.provider in SUMMARY_COMPACTION_FAMILIES
                and before > config.beta_compact_threshold
            ):
                done = await self.summarise(plan, run.id, cp, recent)
                if done is not None:
                    cp, record = done
                    state.records.append(record)
                    system, recent = compactor.applied(cp, plan.system, recent)
                    if plan.show_compaction:
                        after = estimate(system, recent)
                        turn.emit(CompactionEvent(before, after, "summary"))
        except DomainError as exc:
            log.warning("compaction skipped for turn %s: %s", run.id, exc.detail)
            return None
        state.messages = list(recent)
        plan.system = system
        return cp

    async def summarise(
        self, plan: Plan, run_id: UUID, cp: Checkpoint, messages: list[Message]
    ) -> tuple[Checkpoint, UsageRecord] | None:
        """Summarise all but the recent ``messages`` into the thread's new checkpoint
        (stored) with the plan's model and key, in a ``compaction`` span; the usage
        record of that call (purpose ``compaction``, not stored here). None: nothing
        to summarise, or the call failed. The turn, and ``POST .../compact``."""
        compactor = self._compactor
        assert compactor is not None  # the callers checked
        api_key = await self._key(plan)
        with compaction_span(self.tracer, plan) as span:
            done = await compactor.compact(plan.model, plan.model_name, cp, messages, api_key)
            span.set("agentsvc.compaction.outcome", "skipped" if done is None else "done")
            if done is not None:
                usage_attributes(span, done[1])
        if done is None:
            return None
        cp, usage = done
        await compactor.save(plan.who.org_id, plan.thread.id, cp)
        return cp, self._record(plan, run_id, None, usage, key_source(api_key), "compaction")

    async def _remember_usage(
        self, plan: Plan, run: Run, state: ReplyState, cp: Checkpoint | None
    ) -> None:
        """Keep the provider's input-token count for the next turn's estimate."""
        if (
            cp is None
            or self._compactor is None
            or not state.records
            or plan.model.provider not in SUMMARY_COMPACTION_FAMILIES
        ):
            return
        last = state.records[-1].usage.input_tokens
        counted = max(0, len(state.messages) - 1)
        with contextlib.suppress(DomainError):
            await self._compactor.save(
                run.org_id,
                run.thread_id,
                msgspec.structs.replace(cp, input_tokens=last, counted=counted),
            )

    @staticmethod
    async def _key(plan: Plan) -> str | None:
        """The key of the turn's model calls (None: the platform's): the first call
        asks the resolver, the later ones and the compaction summary reuse its answer."""
        if plan.keys is None or plan.model.provider == "local":
            return None
        return await plan.keys.key(plan.model.provider, plan.model_name)

    @staticmethod
    def _done(state: ReplyState) -> Done:
        stopped = state.status == "stopped"
        last = next((m for m in reversed(state.new) if m.role == "assistant"), None)
        return Done(
            ok=True,
            content="".join(state.shown),
            message_id=None if stopped or last is None else last.id,
            usage=usage_out(state.total),
            stopped=True if stopped else None,
        )

    async def _steps(
        self, plan: Plan, run: Run, turn: Turn, stop: StopSignal, state: ReplyState
    ) -> None:
        """The tool loop: model call, tools, model call... at most MAX_STEPS calls."""
        for _ in range(MAX_STEPS):
            if plan.gate is not None:
                why = await plan.gate(state.total, plan.model_id)
                if why is not None:
                    state.status = "failed"
                    state.error = ErrorEvent(
                        code=BUDGET_EXCEEDED, detail=why, usage=usage_out(state.total)
                    )
                    return
            text: list[str] = []
            calls: list[ToolCall] = []
            blocks: list[dict[str, Any]] = []
            called = await self._call_model(plan, state.messages, turn, stop, text, calls, blocks)
            await state.begun  # no tool runs before the run is stored
            state.total = state.total + called.usage
            state.shown.extend(text)
            assistant = self._message(
                run,
                "assistant",
                "".join(text),
                tool_calls=() if called.stopped or called.failure else tuple(calls),
                status=message_status(called.stopped, called.failure),
                provider_blocks=tuple(blocks),
            )
            state.add(assistant)
            state.records.append(
                self._record(plan, run.id, assistant.id, called.usage, called.source)
            )
            if called.stopped:
                state.status = "stopped"
                return
            if called.failure is not None:
                state.status = "failed"
                state.error = ErrorEvent(code=called.failure.code, detail=called.failure.detail)
                return
            if not calls:
                if called.finish == "compaction":
                    continue  # paused after compacting: the next call goes on from the block
                return
            waiting = await self._step_tools(plan, run, turn, state, calls)
            if waiting:
                state.pending = tuple(waiting)
                state.status = "requires_action"
                turn.emit(RequiresAction(tool_calls=[tool_out(c) for c in waiting]))
                return
            if stop.is_set():
                state.status = "stopped"
                return
        state.step_limit = True
        log.warning("turn %s reached %d model calls; ending it", run.id, MAX_STEPS)

    async def _step_tools(
        self, plan: Plan, run: Run, turn: Turn, state: ReplyState, calls: list[ToolCall]
    ) -> list[ToolCall]:
        """Run the step's server-side calls that need no approval, in order; return
        the calls the turn waits for: the client's, and those waiting for a person's
        approval (marked ``approval``). A step may mix both: one requires_action
        lists them all, and the next send answers each kind."""
        waiting: list[ToolCall] = []
        for call in calls:
            if call.name in plan.client_tools:
                waiting.append(call)
            elif _needs_approval(plan, call) and plan.ask_approval:
                waiting.append(msgspec.structs.replace(call, approval=True))
            elif _needs_approval(plan, call):
                state.add(self._tool_message(run, call, NOBODY_TO_APPROVE))
            else:
                result = await run_tool(self._tools, self.tracer, plan, call, turn)
                state.add(self._tool_message(run, call, result))
        return waiting

    def _tool_message(self, run: Run, call: ToolCall, result: str) -> Message:
        return self._message(run, "tool", result, tool_call_id=call.id, sender_name=call.name)

    def _message(self, run: Run, role: Role, content: str, **extra: Any) -> Message:
        return new_message(self._clock, run, role, content, **extra)

    async def _call_model(
        self,
        plan: Plan,
        messages: list[Message],
        turn: Turn,
        stop: StopSignal,
        text: list[str],
        calls: list[ToolCall],
        blocks: list[dict[str, Any]],
    ) -> Called:
        """One model call in its ``chat {model}`` span (``_model_call``)."""
        times: list[int] = []
        with chat_span(self.tracer, plan) as span:
            called = await self._model_call(plan, messages, turn, stop, text, calls, blocks, times)
            chat_ended(span, called, times)
            span.payload(
                input={"messages": len(messages), "tools": len(plan.offered)},
                output={"text": "".join(text), "tool_calls": [tool_out(c) for c in calls]}
                if calls
                else {"text": "".join(text)},
            )
        return called

    async def _model_call(
        self,
        plan: Plan,
        messages: list[Message],
        turn: Turn,
        stop: StopSignal,
        text: list[str],
        calls: list[ToolCall],
        blocks: list[dict[str, Any]],
        times: list[int],
    ) -> Called:
        """One model call, streamed into ``turn``: how it ended; the text, tool calls
        and compaction blocks received are appended to ``text``, ``calls``, ``blocks``;
        ``times`` gets when the request went out and when its first event came."""
        api_key = await self._key(plan)
        request = ModelRequest(
            # a snapshot: the reply goes on appending to ``messages``
            model=plan.model_name,
            system=plan.system,
            messages=list(messages),
            tools=plan.offered,
            api_key=api_key,
            native_compaction=plan.native,
            max_tokens=plan.max_tokens,
            params=plan.params,
        )
        usage_box: list[Usage] = []
        finish: list[str] = []

        async def consume() -> None:
            stream: AsyncIterator[ModelEvent] = plan.model.stream(request)
            times.append(time.time_ns())
            try:
                async for event in stream:
                    if len(times) == 1:
                        times.append(time.time_ns())  # the time to the first chunk
                    if isinstance(event, TextDelta):
                        if event.text:
                            text.append(event.text)
                            turn.emit(Token(delta=event.text))
                    elif isinstance(event, ToolCallRequested):
                        calls.append(event.call)
                    elif isinstance(event, UsageReport):
                        usage_box.append(event.usage)
                    elif isinstance(event, CompactionBlock):
                        blocks.append(event.block)
                        if plan.show_compaction:  # asked for: no work otherwise
                            before, after = native_tokens(request.system, messages, event.block)
                            turn.emit(CompactionEvent(before, after, "native"))
                    elif isinstance(event, Finished):
                        finish.append(event.reason)
            finally:
                with contextlib.suppress(Exception):
                    await stream.aclose()  # type: ignore[attr-defined]

        source = key_source(api_key)
        consumer = asyncio.create_task(consume())
        remove = stop.on_set(consumer.cancel)  # a stop cancels the call at once
        try:
            await consumer
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not consumer.cancelled() or (current is not None and current.cancelling()):
                raise  # this reply itself is being cancelled (shutdown)
            return Called(True, None, usage_box[-1] if usage_box else Usage(), source, "stop")
        except Upstream as exc:
            reason = finish[-1] if finish else "other"
            return Called(False, exc, usage_box[-1] if usage_box else Usage(), source, reason)
        finally:
            remove()
        usage = usage_box[-1] if usage_box else Usage()
        return Called(False, None, usage, source, finish[-1] if finish else "other")

    def _record(
        self,
        plan: Plan,
        run_id: UUID,
        message_id: UUID | None,
        usage: Usage,
        source: KeySource,
        purpose: UsagePurpose = "reply",
    ) -> UsageRecord:
        traces = self._traces
        return UsageRecord(
            id=uuid.uuid4(),
            org_id=plan.who.org_id,
            agent_id=plan.agent.id,
            thread_id=plan.thread.id,
            run_id=run_id,
            message_id=message_id,
            provider=plan.model.provider,
            model=plan.model_id,
            usage=usage,
            key_source=source,
            metadata=plan.metadata,
            created_at=self._clock.now(),
            cost_usd=None if traces is None else traces.prices.cost(plan.model_id, usage),
            purpose=purpose,
        )

    async def _finish(
        self,
        plan: Plan,
        run: Run,
        state: ReplyState,
        turn: Turn,
        last: EventData,
        span: Span,
        collected: list[FinishedSpan] | None,
    ) -> None:
        """Store the run's final state, its messages, usage, the events not yet
        stored with ``last`` (the reply's final event, emitted after this) at the
        end, and its trace (``collected``: its spans; ``span``, the reply's own, is
        ended here), in one write."""
        now = self._clock.now()
        final = msgspec.structs.replace(
            run,
            status=state.status,
            finished_at=now,
            heartbeat_at=now,
            pending_tool_calls=state.pending,
        )
        trace = None
        if collected is not None and self._traces is not None:
            said: dict[str, object] = {"messages": list(plan.inputs)}
            if plan.tool_results:
                said["tool_results"] = [
                    {"tool_call_id": i, "output": o} for i, o in plan.tool_results
                ]
            span.payload(input=said, output="".join(state.shown))
            reply_ended(span, state)
            try:
                trace = build_trace(self._traces, self._facts(plan, final, state), collected, now)
            except Exception:  # a trace is not worth losing the reply for
                log.exception("the trace of turn %s could not be built", run.id)
        new, head = state.new, None
        if plan.branched:  # they name their parents; the last (or the one answered) is the head
            new = chained(new, state.parent)
            head = new[-1].id if new else state.parent
        await self._store.finish_turn(
            final, new, state.records, turn.batch(last, now + plan.keep_events), trace, head=head
        )

    @staticmethod
    def _facts(plan: Plan, run: Run, state: ReplyState) -> TurnFacts:
        last = next((m for m in reversed(state.new) if m.role == "assistant"), None)
        return TurnFacts(
            org_id=run.org_id,
            agent_id=plan.agent.id,
            agent_name=plan.agent.name,
            model=plan.model_id,
            run=run,
            message_id=None if last is None else last.id,
            input_messages=len(plan.inputs),
            step_limit=state.step_limit,
            empty=run.status == "completed" and not state.shown and not state.pending,
            error=None if state.error is None else state.error.code,
            known_secrets=plan.keys.known() if plan.keys is not None else (),
            stored_parent=plan.stored_parent,
        )
