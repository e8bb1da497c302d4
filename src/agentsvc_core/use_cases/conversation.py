"""The turn: store the user's message, call the model, stream, run tools, store the reply.

``Conversation.send`` does everything that can fail with an HTTP error (access,
validation, the one-reply-per-thread rule) before it returns, then the reply runs
in a task of its own: a client that disconnects does not cancel it; only
``stop`` does, from any process, through the ``StopBus``.

Round trips to storage per turn: ``turn_inputs`` (the thread, its agent, the
latest run, the agent's MCP servers and sealed settings, the history, read
together), ``begin_turn`` (the run and the user's message, checking that the
history read is still whole) and ``finish_turn`` (the run, the assistant messages
and the usage records). Nothing is written per token. The model call starts
while ``begin_turn`` is on its way, so the first token does not wait for it;
nothing the reply produces is shown, stored or acted on before the run is stored.

Shutting down (``close``): new sends are refused, running replies get a grace
period to finish, then the rest are interrupted through their stop signal: the
partial text is stored as the assistant's message (status ``interrupted``) and the
stream ends with an ``INTERRUPTED`` error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_core.entities import (
    Agent,
    KeySource,
    Message,
    MessageStatus,
    Principal,
    Role,
    Run,
    RunStatus,
    Thread,
    ToolCall,
    Usage,
    UsageRecord,
)
from agentsvc_core.errors import (
    DomainError,
    InvalidInput,
    NotFound,
    PermissionDenied,
    ThreadBusy,
    Unavailable,
    Upstream,
)
from agentsvc_core.ports import (
    ChatModel,
    Clock,
    CompactionBlock,
    ConversationStore,
    Finished,
    ModelEvent,
    ModelRequest,
    ModelRouter,
    NativeCompaction,
    ServerTools,
    StopBus,
    StopSignal,
    TextDelta,
    ToolAuthRequired,
    ToolCallRequested,
    ToolSpec,
    TurnInputs,
    TurnReader,
    UsageReport,
)
from agentsvc_core.rules import (
    MAX_CLIENT_TOOLS,
    MAX_CONTENT,
    MAX_PREAMBLE,
    MAX_TITLE,
    MAX_USER_ID,
    check_metadata,
    check_model_id,
    check_text,
)
from agentsvc_core.use_cases.compaction import Checkpoint, Compactor
from agentsvc_core.use_cases.context import (
    PROPOSE_PROFILE_SWITCH,
    effective_profile,
    gate_tools,
    merged_metadata,
    model_history,
    profile_switch_tool,
    system_prompt,
)
from agentsvc_core.use_cases.org_settings import (
    AgentConfigs,
    CompactionConfig,
    KeyBroker,
    TurnKeys,
)
from agentsvc_core.use_cases.threads import Threads
from agentsvc_core.use_cases.turn import (
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
    Turn,
    UsageOut,
)

log = logging.getLogger("agentsvc.turn")

MAX_STEPS = 8  # model calls per turn (tool loop bound)
TOOL_TIMEOUT_S = 60.0
# at shutdown, how long an interrupted reply has to store itself, then again once
# cancelled (a tool call ignores the stop): the drain ends within grace + twice this
INTERRUPT_WAIT_S = 1.0
INTERRUPTED_DETAIL = "the service is shutting down; the partial reply was kept"


class ToolResultIn(msgspec.Struct, frozen=True, kw_only=True):
    tool_call_id: str
    output: str


class SendInput(msgspec.Struct, frozen=True, kw_only=True):
    content: str
    tools: list[ToolSpec] = []
    tool_results: list[ToolResultIn] = []
    model_override: str | None = None
    sender_name: str | None = None
    sender_id: str | None = None
    tool_profile: str | None = None
    system_prompt_overlay: str | None = None
    metadata: dict[str, str] = {}


class _Plan(msgspec.Struct, kw_only=True):
    """Everything the running reply needs, decided before it starts."""

    who: Principal
    thread: Thread
    agent: Agent
    model: ChatModel
    model_name: str
    model_id: str
    system: str
    server_tools: dict[str, ToolSpec]
    client_tools: dict[str, ToolSpec]
    offered: list[ToolSpec]
    metadata: dict[str, str]
    keys: TurnKeys | None = None  # the turn's keys: resolved once, reused, never stored
    compaction: CompactionConfig | None = None
    native: NativeCompaction | None = None


class _ReplyState(msgspec.Struct, kw_only=True):
    """What a running reply has produced so far."""

    messages: list[Message]  # the model's context, growing with each step
    shown: list[str] = msgspec.field(default_factory=list)  # every delta the user saw
    new: list[Message] = msgspec.field(default_factory=list)  # to store at the end
    records: list[UsageRecord] = msgspec.field(default_factory=list)
    total: Usage = msgspec.field(default_factory=Usage)
    status: RunStatus = "completed"
    pending: tuple[ToolCall, ...] = ()
    error: ErrorEvent | None = None
    begun: asyncio.Future[None]  # resolved once the run is stored

    def add(self, message: Message) -> None:
        self.new.append(message)
        self.messages.append(message)


def _usage_out(u: Usage) -> UsageOut:
    return UsageOut(
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        total_tokens=u.total_tokens,
        cached_input_tokens=u.cached_input_tokens,
    )


def _source(api_key: str | None) -> KeySource:
    """The key that paid for a model call: the user's own (resolved) or the platform's."""
    return "byok" if api_key else "platform"


def _out(call: ToolCall) -> ToolCallOut:
    return ToolCallOut(id=call.id, name=call.name, arguments=call.arguments)


_INTERRUPTED = ErrorEvent(code="INTERRUPTED", detail=INTERRUPTED_DETAIL)


def _interrupted(state: _ReplyState) -> None:
    """The reply ends because the process shuts down: what it said is kept, marked
    interrupted, and the stream ends with an INTERRUPTED error."""
    state.status = "interrupted"
    if state.new and state.new[-1].role == "assistant":
        state.new[-1] = msgspec.structs.replace(state.new[-1], status="interrupted")
    state.error = _INTERRUPTED


class Conversation:
    def __init__(
        self,
        threads: Threads,
        reader: TurnReader,
        store: ConversationStore,
        router: ModelRouter,
        tools: ServerTools,
        stops: StopBus,
        clock: Clock,
        stale_after_s: float = 45.0,
        keys: KeyBroker | None = None,
        configs: AgentConfigs | None = None,
        compactor: Compactor | None = None,
    ) -> None:
        """``stale_after_s``: a running reply whose heartbeat is older than this is
        taken for dead (its process crashed) and marked interrupted; the running
        process refreshes the heartbeat four times in that span."""
        self._keys = keys
        self._configs = configs
        self._compactor = compactor
        self._stale_after = timedelta(seconds=stale_after_s)
        self._heartbeat_s = stale_after_s / 4
        self._threads = threads
        self._reader = reader
        self._store = store
        self._router = router
        self._tools = tools
        self._stops = stops
        self._clock = clock
        # run id -> (organization, reply task, its stop): what shutdown waits for and
        # interrupts, what heartbeats name
        self._running: dict[UUID, tuple[str, asyncio.Task[None], StopSignal]] = {}
        # (organization, thread) of the sends whose reply started before their run was stored
        self._beginning: set[tuple[str, UUID]] = set()
        self._beats: asyncio.Task[None] | None = None
        self._closing: asyncio.Task[None] | None = None  # the drain, once shutdown began
        self._interrupting = False  # the grace is over: a reply stored now ends at once

    # --- the HTTP-facing operations -------------------------------------------

    async def send(self, who: Principal, thread_id: UUID, msg: SendInput) -> Turn:
        """Validate, store the user's message and start the reply. Raises
        ``NotFound``, ``PermissionDenied``, ``InvalidInput`` or ``Conflict``
        (THREAD_BUSY) before anything streams; ``Unavailable`` once shutdown began."""
        if self._closing is not None:
            raise Unavailable("the service is shutting down; send again in a moment")
        self._check_input(msg)
        inputs = await self._reader.turn_inputs(
            who.org_id, thread_id, list(AgentConfigs.KINDS) if self._configs else []
        )
        thread = await self._threads.check_visible(who, inputs.thread)
        sender_id, sender_name = await self._sender(who, thread, msg)
        agent = inputs.agent
        if agent is None:
            raise NotFound("agent not found")
        now = self._clock.now()
        latest = inputs.latest_run
        if latest and latest.status == "running" and latest.heartbeat_at >= now - self._stale_after:
            raise ThreadBusy()  # before anything else (begin_turn would refuse it too)
        pending = latest.pending_tool_calls if latest and latest.status == "requires_action" else ()
        self._check_tool_results(pending, msg)

        model_id = msg.model_override or agent.default_model
        model, model_name = self._router.route(model_id)
        resolver, compaction = (
            self._configs.opened(who.org_id, agent.id, inputs.records)
            if self._configs
            else (None, None)
        )
        profile = effective_profile(agent, thread, msg.tool_profile)
        offered_server = await self._tools.list_tools(who, agent, inputs.mcp)
        server = {t.name: t for t in gate_tools(agent, profile, offered_server)}
        client = {t.name: t for t in msg.tools}
        offered = [*server.values(), *client.values()]
        switch = profile_switch_tool(agent, profile)
        if switch is not None:
            offered.append(switch)
        plan = _Plan(
            who=who,
            thread=thread,
            agent=agent,
            model=model,
            model_name=model_name,
            model_id=model_id,
            system=system_prompt(
                agent.stable_preamble, thread.system_prompt_overlay, msg.system_prompt_overlay
            ),
            server_tools=server,
            client_tools=client,
            offered=offered,
            metadata=merged_metadata(thread.metadata, msg.metadata),
            keys=self._keys.for_turn(resolver, user_id=sender_id or "")
            if self._keys is not None and resolver is not None
            else None,
            compaction=compaction if model.provider == "beta" else None,
            native=NativeCompaction(
                trigger_tokens=compaction.alpha_trigger_tokens,
                instructions=compaction.alpha_instructions,
                pause_after=compaction.alpha_pause_after,
            )
            if compaction is not None and compaction.enabled and model.provider == "alpha"
            else None,
        )

        run = Run(
            id=uuid.uuid4(),
            org_id=who.org_id,
            thread_id=thread.id,
            status="running",
            started_at=now,
            heartbeat_at=now,
        )
        names = {c.id: c.name for c in pending}
        new = [
            self._message(
                run,
                "tool",
                r.output,
                tool_call_id=r.tool_call_id,
                sender_name=names.get(r.tool_call_id),
            )
            for r in msg.tool_results
        ]
        if msg.content or not msg.tool_results:
            new.append(
                self._message(
                    run, "user", msg.content, sender_name=sender_name, sender_id=sender_id
                )
            )
        meta = Meta(started_at=now, run_id=run.id, thread_id=thread.id, model=model_id)
        return await self._begin(plan, run, new, inputs, meta)

    async def _begin(
        self, plan: _Plan, run: Run, new: list[Message], inputs: TurnInputs, meta: Meta
    ) -> Turn:
        """Store the run and start the reply, both at once: the model call is made
        while begin_turn stores the run, so its first token is not held up by that
        write. Nothing the reply says leaves the turn's buffer (nobody reads it before
        this returns), and nothing is stored or run (tools, compaction) before the run
        is stored. When the run is refused (two sends racing), the reply is cancelled
        and leaves nothing behind. While one send of a thread is at that stage in this
        process, another waits for its write before calling the model, so a burst of
        sends to one thread costs at most one call made for nothing."""
        history = [*inputs.history, *new]
        key = (run.org_id, run.thread_id)
        early = key not in self._beginning
        # watched here, not by the reply: a restarted reply keeps the same signal
        stop = self._stops.watch(run.id)
        if early:
            self._beginning.add(key)
            turn, task, begun = self._start(plan, run, history, meta, stop)
        try:
            fresh = await self._store.begin_turn(
                run, new, run.started_at - self._stale_after, inputs.history_mark
            )
        except BaseException:
            if early:
                begun.cancel()
                task.cancel()
            self._stops.unwatch(run.id)
            raise
        finally:
            if early:
                self._beginning.discard(key)
        if not early or fresh is not None:
            if early:
                # A message came between the read and the write: the reply starts
                # again with the whole history (its first start said nothing yet).
                begun.cancel()
                task.cancel()
            turn, task, begun = self._start(plan, run, fresh or history, meta, stop)
        begun.set_result(None)
        self._running[run.id] = (run.org_id, task, stop)
        task.add_done_callback(lambda _: self._ended(run.id))
        if self._interrupting:
            stop.interrupt()
        beats = self._beats
        if beats is None or beats.done() or beats.get_loop() is not asyncio.get_running_loop():
            self._beats = asyncio.create_task(self._heartbeats(), name="turn-heartbeats")
        return turn

    def _ended(self, run_id: UUID) -> None:
        self._running.pop(run_id, None)
        self._stops.unwatch(run_id)

    def _start(
        self, plan: _Plan, run: Run, history: list[Message], meta: Meta, stop: StopSignal
    ) -> tuple[Turn, asyncio.Task[None], asyncio.Future[None]]:
        turn = Turn(run.id, run.thread_id)
        turn.emit(meta)
        begun: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(
            self._reply(plan, run, history, turn, begun, stop), name=f"turn-{run.id}"
        )
        return turn, task, begun

    async def stop(self, who: Principal, thread_id: UUID) -> bool:
        """Stop the thread's running reply, in whichever process runs it. False when
        nothing is running. A reply whose process is gone (crashed, killed) is marked
        interrupted here, which frees the thread at once; that answers True too."""
        thread = await self._threads.visible(who, thread_id)
        now = self._clock.now()
        run = await self._store.running(who.org_id, thread.id, now - self._stale_after)
        if run is None:
            return False
        if run.id not in self._running and await self._store.interrupt_orphaned(
            who.org_id, run.id, now
        ):
            return True
        await self._stops.publish(run.id)
        return True

    async def sweep(self) -> int:
        """Mark replies whose process died as interrupted: those whose process is
        known to be gone, and those whose heartbeat is stale (run at start-up and
        periodically)."""
        now = self._clock.now()
        return await self._store.interrupt_stale(now - self._stale_after, now)

    def close(self, grace_s: float) -> asyncio.Task[None]:
        """Begin shutting down: refuse new sends from now on, let running replies
        finish for ``grace_s`` seconds, then interrupt the rest (their streams end with
        an ``INTERRUPTED`` error, their partial text is stored). Returns the one task
        that does it: calling again returns the same task."""
        if self._closing is None:
            self._closing = asyncio.create_task(self._drain(grace_s), name="turn-drain")
        return self._closing

    async def shutdown(self, grace_s: float) -> None:
        """``close`` and wait for it; then this object serves sends again (a test
        may start the same services twice)."""
        await self.close(grace_s)
        if self._beats is not None:
            self._beats.cancel()
        self._closing, self._interrupting = None, False

    async def _drain(self, grace_s: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_s
        while self._running and (left := deadline - loop.time()) > 0:
            await asyncio.wait([task for _, task, _ in self._running.values()], timeout=left)
        self._interrupting = True
        ending = list(self._running.values())
        for _, _, stop in ending:
            stop.interrupt()  # the model call ends at once; the reply stores what it has
        if ending:
            _, stuck = await asyncio.wait([task for _, task, _ in ending], timeout=INTERRUPT_WAIT_S)
            for task in stuck:
                task.cancel()  # in a tool call, which a stop does not cut short
            if stuck:
                await asyncio.wait(stuck, timeout=INTERRUPT_WAIT_S)

    # --- validation -------------------------------------------------------------

    @staticmethod
    def _check_input(msg: SendInput) -> None:
        check_text("content", msg.content, max_len=MAX_CONTENT)
        if msg.model_override is not None:
            check_model_id("model_override", msg.model_override)
        if msg.system_prompt_overlay is not None:
            check_text("system_prompt_overlay", msg.system_prompt_overlay, max_len=MAX_PREAMBLE)
        check_metadata("metadata", msg.metadata)
        if len(msg.tools) > MAX_CLIENT_TOOLS:
            raise InvalidInput("tools", f"at most {MAX_CLIENT_TOOLS} tools")
        names = [t.name for t in msg.tools]
        if len(set(names)) != len(names):
            raise InvalidInput("tools", "tool names must be unique")
        if PROPOSE_PROFILE_SWITCH in names:
            raise InvalidInput("tools", f"{PROPOSE_PROFILE_SWITCH!r} is reserved")
        for r in msg.tool_results:
            check_text("tool_results", r.output, max_len=MAX_CONTENT)
        if not msg.content.strip() and not msg.tool_results:
            raise InvalidInput("content", "must not be empty")

    async def _sender(
        self, who: Principal, thread: Thread, msg: SendInput
    ) -> tuple[str | None, str | None]:
        sender_id = msg.sender_id
        if msg.sender_name is not None:
            check_text("sender_name", msg.sender_name, max_len=MAX_TITLE)
        if sender_id is not None:
            check_text("sender_id", sender_id, max_len=MAX_USER_ID, required=True)
        if who.user_id is not None:
            if sender_id is not None and sender_id != who.user_id:
                raise PermissionDenied("a user token may only post as its own user")
            sender_id = who.user_id
        if thread.kind == "multiplayer":
            if sender_id is None:
                raise InvalidInput(
                    "sender_id", "required to post to a multiplayer thread with an API key"
                )
            member = await self._threads.participant(who.org_id, thread.id, sender_id)
            if member is None:
                raise PermissionDenied("only participants may post to this thread")
            return sender_id, msg.sender_name or member.display_name
        return sender_id, msg.sender_name

    @staticmethod
    def _check_tool_results(pending: tuple[ToolCall, ...], msg: SendInput) -> None:
        answered = [r.tool_call_id for r in msg.tool_results]
        expected = [c.id for c in pending]
        if pending and sorted(answered) != sorted(expected):
            raise InvalidInput(
                "tool_results",
                "the previous reply is waiting for client tool results: send toolResults "
                f"answering exactly the calls {expected}",
            )
        if not pending and answered:
            raise InvalidInput("tool_results", "no reply is waiting for client tool results")

    # --- the reply --------------------------------------------------------------

    async def _reply(
        self,
        plan: _Plan,
        run: Run,
        history: list[Message],
        turn: Turn,
        begun: asyncio.Future[None],
        stop: StopSignal,
    ) -> None:
        """The reply. ``begun`` resolves once the run is stored; until then the model
        call may stream into ``turn`` (which nobody reads yet) but nothing is stored
        or run. When it is cancelled instead, the run was never stored: this task is
        cancelled too and leaves nothing behind."""
        state = _ReplyState(messages=model_history(history), begun=begun)
        failure: Exception | None = None
        try:
            checkpoint = await self._compact(plan, run, state)
            await self._steps(plan, run, turn, stop, state)
            await self._remember_usage(plan, run, state, checkpoint)
        except asyncio.CancelledError:
            if not begun.done() or begun.cancelled():
                raise  # the run was never stored: nothing to keep
            # The process is shutting down and this reply did not end when interrupted
            # (a tool call): keep what was said, mark it interrupted.
            _interrupted(state)
            with contextlib.suppress(DomainError):
                await self._finish(run, state)
            turn.emit(state.error or _INTERRUPTED)
            turn.close()
            raise
        except Exception as exc:  # noqa: BLE001 (logged below, once the run is stored)
            failure = exc
            state.status = "failed"
            state.error = ErrorEvent(code="INTERNAL_ERROR", detail="the reply failed")
        await begun  # the run is stored (a failure can come before that)
        if stop.interrupted and state.status == "stopped":
            _interrupted(state)  # stopped by the shutdown, not by the user
        if failure is not None:
            log.error("turn %s failed", run.id, exc_info=failure)
        try:
            await self._finish(run, state)
        except DomainError as exc:
            log.error("turn %s could not be stored: %s", run.id, exc.detail)
            state.error = state.error or ErrorEvent(
                code="STORAGE_ERROR", detail="the reply could not be stored"
            )
        turn.emit(state.error or self._done(state))
        turn.close()

    async def _compact(self, plan: _Plan, run: Run, state: _ReplyState) -> Checkpoint | None:
        """Summary-based compaction (beta family): send summary + recent messages."""
        config, compactor = plan.compaction, self._compactor
        if config is None or not config.enabled or compactor is None:
            return None
        await state.begun  # compaction may call a model and store a summary
        try:
            cp = await compactor.checkpoint(run.org_id, run.thread_id)
            recent = compactor.after(cp, state.messages)
            system = compactor.with_summary(plan.system, cp)
            if compactor.tokens(cp, system, recent) > config.beta_compact_threshold:
                api_key = await self._key(plan)
                done = await compactor.compact(plan.model, plan.model_name, cp, recent, api_key)
                if done is not None:
                    cp, usage = done
                    await compactor.save(run.org_id, run.thread_id, cp)
                    state.records.append(self._record(plan, run, None, usage, _source(api_key)))
                    recent = compactor.after(cp, recent)
                    system = compactor.with_summary(plan.system, cp)
        except DomainError as exc:
            log.warning("compaction skipped for turn %s: %s", run.id, exc.detail)
            return None
        state.messages = list(recent)
        plan.system = system
        return cp

    async def _remember_usage(
        self, plan: _Plan, run: Run, state: _ReplyState, cp: Checkpoint | None
    ) -> None:
        """Keep the provider's input-token count for the next turn's estimate."""
        if cp is None or self._compactor is None or not state.records:
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
    async def _key(plan: _Plan) -> str | None:
        """The key of the turn's model calls (None: the platform's): the first call
        asks the resolver, the later ones and the compaction summary reuse its answer."""
        if plan.keys is None or plan.model.provider == "local":
            return None
        return await plan.keys.key(plan.model.provider, plan.model_name)

    @staticmethod
    def _done(state: _ReplyState) -> Done:
        stopped = state.status == "stopped"
        last = next((m for m in reversed(state.new) if m.role == "assistant"), None)
        return Done(
            ok=True,
            content="".join(state.shown),
            message_id=None if stopped or last is None else last.id,
            usage=_usage_out(state.total),
            stopped=True if stopped else None,
        )

    async def _steps(
        self, plan: _Plan, run: Run, turn: Turn, stop: StopSignal, state: _ReplyState
    ) -> None:
        """The tool loop: model call, tools, model call... at most MAX_STEPS calls."""
        for _ in range(MAX_STEPS):
            text: list[str] = []
            calls: list[ToolCall] = []
            blocks: list[dict[str, Any]] = []
            stopped, failure, usage, source, finish = await self._call_model(
                plan, state.messages, turn, stop, text, calls, blocks
            )
            await state.begun  # no tool runs before the run is stored
            state.total = state.total + usage
            state.shown.extend(text)
            assistant = self._message(
                run,
                "assistant",
                "".join(text),
                tool_calls=() if stopped or failure else tuple(calls),
                status=self._message_status(stopped, failure),
                provider_blocks=tuple(blocks),
            )
            state.add(assistant)
            state.records.append(self._record(plan, run, assistant.id, usage, source))
            if stopped:
                state.status = "stopped"
                return
            if failure is not None:
                state.status = "failed"
                state.error = ErrorEvent(code=failure.code, detail=failure.detail)
                return
            if not calls:
                if finish == "compaction":
                    continue  # paused after compacting: the next call goes on from the block
                return
            for call in calls:
                if call.name not in plan.client_tools:
                    result = await self._run_tool(plan, call, turn)
                    state.add(
                        self._message(
                            run, "tool", result, tool_call_id=call.id, sender_name=call.name
                        )
                    )
            client_calls = tuple(c for c in calls if c.name in plan.client_tools)
            if client_calls:
                state.pending = client_calls
                state.status = "requires_action"
                turn.emit(RequiresAction(tool_calls=[_out(c) for c in client_calls]))
                return
            if stop.is_set():
                state.status = "stopped"
                return
        log.warning("turn %s reached %d model calls; ending it", run.id, MAX_STEPS)

    def _message(self, run: Run, role: Role, content: str, **extra: Any) -> Message:
        return Message(
            id=uuid.uuid4(),
            org_id=run.org_id,
            thread_id=run.thread_id,
            role=role,
            content=content,
            created_at=self._clock.now(),
            run_id=run.id,
            **extra,
        )

    @staticmethod
    def _message_status(stopped: bool, failure: Upstream | None) -> MessageStatus:
        if stopped:
            return "stopped"
        return "failed" if failure is not None else "complete"

    async def _call_model(
        self,
        plan: _Plan,
        messages: list[Message],
        turn: Turn,
        stop: StopSignal,
        text: list[str],
        calls: list[ToolCall],
        blocks: list[dict[str, Any]],
    ) -> tuple[bool, Upstream | None, Usage, KeySource, str]:
        """One model call, streamed into ``turn``. Returns (stopped, failure, usage);
        the text and tool calls received so far are appended to ``text``/``calls``."""
        api_key = await self._key(plan)
        request = ModelRequest(
            # a snapshot: the reply goes on appending to ``messages``
            model=plan.model_name,
            system=plan.system,
            messages=list(messages),
            tools=plan.offered,
            api_key=api_key,
            native_compaction=plan.native,
        )
        usage_box: list[Usage] = []
        finish: list[str] = []

        async def consume() -> None:
            stream: AsyncIterator[ModelEvent] = plan.model.stream(request)
            try:
                async for event in stream:
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
                    elif isinstance(event, Finished):
                        finish.append(event.reason)
            finally:
                with contextlib.suppress(Exception):
                    await stream.aclose()  # type: ignore[attr-defined]

        source = _source(api_key)
        consumer = asyncio.create_task(consume())
        remove = stop.on_set(consumer.cancel)  # a stop cancels the call at once
        try:
            await consumer
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not consumer.cancelled() or (current is not None and current.cancelling()):
                raise  # this reply itself is being cancelled (shutdown)
            return True, None, usage_box[-1] if usage_box else Usage(), source, "stop"
        except Upstream as exc:
            reason = finish[-1] if finish else "other"
            return False, exc, usage_box[-1] if usage_box else Usage(), source, reason
        finally:
            remove()
        usage = usage_box[-1] if usage_box else Usage()
        return False, None, usage, source, finish[-1] if finish else "other"

    async def _run_tool(self, plan: _Plan, call: ToolCall, turn: Turn) -> str:
        turn.emit(ToolCallEvent(tool=_out(call)))
        turn.emit(ToolExecuting(tool_name=call.name, tool_call_id=call.id))
        if call.name == PROPOSE_PROFILE_SWITCH:
            target = str(call.arguments.get("target", ""))
            reason = str(call.arguments.get("reason", ""))
            turn.emit(ProfileSwitchProposal(target=target, reason=reason))
            result = (
                f"The proposal to switch to {target!r} was shown to the user. "
                "The profile has not changed."
            )
        elif call.name not in plan.server_tools:
            result = f"error: the tool {call.name!r} is not available in this conversation"
        else:
            try:
                result = await asyncio.wait_for(
                    self._tools.call(plan.who, plan.agent, call.name, call.arguments),
                    TOOL_TIMEOUT_S,
                )
            except ToolAuthRequired as auth:
                turn.emit(
                    AuthChallenge(
                        tool_name=call.name,
                        challenge=Challenge(
                            provider=auth.provider,
                            redirect_url=auth.redirect_url,
                            description=auth.description,
                        ),
                    )
                )
                result = (
                    f"The user must first authorize access to {auth.provider}; "
                    "they were shown a link to do so."
                )
            except TimeoutError:
                result = (
                    f"error: the tool {call.name!r} did not answer within {TOOL_TIMEOUT_S:.0f} s"
                )
            except DomainError as exc:
                result = f"error: {exc.detail}"
        turn.emit(ToolResult(tool_name=call.name, tool_call_id=call.id, result=result))
        return result

    def _record(
        self, plan: _Plan, run: Run, message_id: UUID | None, usage: Usage, source: KeySource
    ) -> UsageRecord:
        return UsageRecord(
            id=uuid.uuid4(),
            org_id=run.org_id,
            agent_id=plan.agent.id,
            thread_id=run.thread_id,
            run_id=run.id,
            message_id=message_id,
            provider=plan.model.provider,
            model=plan.model_id,
            usage=usage,
            key_source=source,
            metadata=plan.metadata,
            created_at=self._clock.now(),
        )

    async def _heartbeats(self) -> None:
        """Keep this process's running replies alive: one write per beat for all of
        them (not a task and a write per reply). Ends when none is left."""
        try:
            while self._running:
                await asyncio.sleep(self._heartbeat_s)
                runs = [(org, run_id) for run_id, (org, _, _) in self._running.items()]
                if runs:
                    with contextlib.suppress(DomainError):
                        await self._store.heartbeat(runs, self._clock.now())
        finally:
            if self._beats is asyncio.current_task():
                self._beats = None

    async def _finish(self, run: Run, state: _ReplyState) -> None:
        now = self._clock.now()
        final = msgspec.structs.replace(
            run,
            status=state.status,
            finished_at=now,
            heartbeat_at=now,
            pending_tool_calls=state.pending,
        )
        await self._store.finish_turn(final, state.new, state.records)
