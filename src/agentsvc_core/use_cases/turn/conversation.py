"""The turn's HTTP-facing operations: send, stop, sweep, close/shutdown.

The turn reads top to bottom: ``Conversation.send`` here checks the input
(use_cases/turn/send_input.py), plans the reply (use_cases/turn/reply_plan.py), stores the run
and the user's message and starts the reply (use_cases/turn/reply.py: compaction, model
calls, tools, the final store); use_cases/turn/heartbeats.py keeps this process's running
replies alive.

``send`` does everything that can fail with an HTTP error (access, validation, the
one-reply-per-thread rule) before it returns, then the reply runs in a task of its
own: a client that disconnects does not cancel it; only ``stop`` does, from any
process, through the ``StopBus``.

The turn's round trips to storage: the package's docstring
(use_cases/turn/__init__.py).

Shutting down (``close``): new sends are refused, running replies get a grace
period to finish, then the rest are interrupted through their stop signal: the
partial text is stored as the assistant's message (status ``interrupted``) and the
stream ends with an ``INTERRUPTED`` error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta
from uuid import UUID

from agentsvc_core.entities import (
    Message,
    Principal,
    Run,
)
from agentsvc_core.entities.skill import SkillBinding
from agentsvc_core.errors import (
    IdempotencyKeyInUse,
    IdempotencyKeyReused,
    ThreadBusy,
    Unavailable,
)
from agentsvc_core.ports import (
    Clock,
    ConversationStore,
    FollowRequests,
    ModelRouter,
    ServerTools,
    StopBus,
    StopSignal,
    StreamStore,
    TurnInputs,
    TurnReader,
)
from agentsvc_core.ports.event_webhooks import EventPublisher, NoEvents
from agentsvc_core.ports.idempotency import IdempotencyClaim, IdempotencyStore
from agentsvc_core.ports.telemetry import Tracer
from agentsvc_core.ports.tools import Attached
from agentsvc_core.use_cases import branches
from agentsvc_core.use_cases.branches import Start, branch_of, chained, pending_on, start_of
from agentsvc_core.use_cases.event_webhooks.payloads import messages_stored
from agentsvc_core.use_cases.idempotency import KEEP, RequestKey
from agentsvc_core.use_cases.multiplayer.posts import MultiplayerPosts
from agentsvc_core.use_cases.org_settings import AgentConfigs, KeyBroker
from agentsvc_core.use_cases.threads import Threads
from agentsvc_core.use_cases.traces.build import TraceConfig
from agentsvc_core.use_cases.turn._private import BudgetGate, Plan
from agentsvc_core.use_cases.turn.compaction import Compactor
from agentsvc_core.use_cases.turn.events import (
    AfterTurn,
    EventSource,
    Meta,
    Turn,
)
from agentsvc_core.use_cases.turn.halt import Halting
from agentsvc_core.use_cases.turn.heartbeats import INTERRUPT_WAIT_S, Heartbeats, drain
from agentsvc_core.use_cases.turn.queued import Waiting, reply_of
from agentsvc_core.use_cases.turn.reply import Reply
from agentsvc_core.use_cases.turn.reply_plan import choose, note_answered, plan_reply
from agentsvc_core.use_cases.turn.send_input import (
    SendInput,
    ToolApprovalIn,
    ToolResultIn,
    agent_of,
    approved_calls,
    check_input,
    check_tool_results,
    new_messages,
    new_run,
    refuse_when_busy,
    sender_of,
    waiting_calls,
)
from agentsvc_core.use_cases.turn.spans import reply_span
from agentsvc_core.use_cases.turn.streams import NoStoredEvents, Streams, follow_here

__all__ = ["INTERRUPT_WAIT_S", "Conversation", "SendInput", "ToolApprovalIn", "ToolResultIn"]


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
        *,
        streams: StreamStore | None = None,
        follows: FollowRequests | None = None,
        idempotency: IdempotencyStore | None = None,
        replay_s: float = 600.0,
        flush_s: float = 0.1,
        tracer: Tracer | None = None,
        traces: TraceConfig | None = None,
        after_turn: Sequence[AfterTurn] = (),
        multiplayer: MultiplayerPosts | None = None,
        events: EventPublisher | None = None,
    ) -> None:
        """``stale_after_s``: a running reply whose heartbeat is older than this is
        taken for dead (its process crashed) and marked interrupted; the running
        process refreshes the heartbeat four times in that span. ``replay_s``: how
        long a finished reply's events stay readable (re-attach). ``flush_s``: while
        a client in another process follows a reply, its events are written at most
        this long after they happen (``streams``, on ``follows`` requests). ``traces``:
        the prices of model calls and how turns' traces are stored (None: no cost,
        no stored trace). ``after_turn``: what runs after each stored reply (memory
        collection), in the reply's task once its last event is out. ``multiplayer``:
        what a post to a multiplayer thread does besides the turn (who it calls,
        news for the thread's followers). ``events``: told of each message stored."""
        self._multiplayer, self._events = multiplayer, events or NoEvents()
        self._keys = keys
        self._configs = configs
        self._stale_after = timedelta(seconds=stale_after_s)
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
        self._beats = Heartbeats(store, clock, stale_after_s / 4, self._running)
        self.reply = Reply(store, tools, clock, compactor, tracer, traces, after_turn)
        self.halting = Halting(store, stops, self._running, clock, self._stale_after)
        self._closing: asyncio.Task[None] | None = None  # the drain, once shutdown began
        self._turns: dict[UUID, Turn] = {}  # the running replies' event buffers
        self._streams = streams
        self.replay = timedelta(seconds=replay_s)
        self._flush_s = flush_s
        self._flushers: set[asyncio.Task[None]] = set()
        if follows is not None and streams is not None:
            follows.on_follow(self._followed)
        self._keys_store = idempotency
        # re-attach (and the replies of retried sends): this process's turns, or storage
        self.streams = Streams(
            threads,
            store,
            streams or NoStoredEvents(),
            self.turn,
            clock,
            follows=follows,
            stale_after_s=stale_after_s,
            replay=self.replay,
        )
        self._interrupting = False  # the grace is over: a reply stored now ends at once
        self._waiting = Waiting()  # sends waiting for their thread (``multitaskStrategy``)

    # --- the HTTP-facing operations -------------------------------------------

    async def send(
        self,
        who: Principal,
        thread_id: UUID,
        msg: SendInput,
        *,
        gate: BudgetGate | None = None,
        extra_mcp: Attached = (),
        extra_skills: tuple[SkillBinding, ...] = (),
        stored_parent: str | None = None,
    ) -> Turn:
        """Validate, store the user's message and start the reply. Raises
        ``NotFound``, ``PermissionDenied``, ``InvalidInput`` or ``Conflict``
        (THREAD_BUSY) before anything streams; ``Unavailable`` once shutdown began.
        A runner's step passes ``gate`` (asked before each model call) and
        ``extra_mcp``, its runner's MCP servers (the agent's own win),
        ``extra_skills``, its runner's skills, and ``stored_parent``, its step's span
        (the current span, stored in the run's trace record: the reply's span keeps
        it as parent)."""
        turn = await self._send(
            who, thread_id, msg, None, gate, extra_mcp, stored_parent, extra_skills
        )
        assert isinstance(turn, Turn)  # only a post may leave the agent out
        return turn

    async def post(self, who: Principal, thread_id: UUID, msg: SendInput) -> EventSource:
        """``send`` as a person posts a message (``POST /api/threads/{id}/messages``):
        on a multiplayer thread, the agent's configuration decides whether the
        message calls the agent; one that does not is stored and its stream is only
        ``done`` with ``replied: false``. A busy thread: as ``msg.multitask_strategy``
        says (``_queue``)."""
        try:
            return await self._send(who, thread_id, msg, None, posted=True)
        except ThreadBusy:
            if msg.multitask_strategy == "reject":
                raise
            return await self._queue(who, thread_id, msg, None)

    async def send_once(
        self, who: Principal, thread_id: UUID, msg: SendInput, key: RequestKey
    ) -> EventSource:
        """``send`` with an idempotency ``key`` (use_cases/idempotency.py), claimed
        with the run: a send whose key already started a reply gets that reply's
        stream from its first event (live or stored) and stores nothing; one whose
        key was used for another request is refused (``IdempotencyKeyReused``)."""
        if self._keys_store is None:
            return await self.post(who, thread_id, msg)
        claim = key.claim(self._clock)
        again = await self._sent_before(who, thread_id, claim)
        if again is not None:
            return again
        try:
            return await self._send(who, thread_id, msg, claim, posted=True)
        except (ThreadBusy, IdempotencyKeyInUse) as exc:
            # a retry racing the first: its reply is the one in the way
            again = await self._sent_before(who, thread_id, claim)
            if again is not None:
                return again
            if not isinstance(exc, ThreadBusy) or msg.multitask_strategy == "reject":
                raise
            return await self._queue(who, thread_id, msg, claim)

    async def _sent_before(
        self, who: Principal, thread_id: UUID, claim: IdempotencyClaim
    ) -> EventSource | None:
        assert self._keys_store is not None  # checked by send
        waiting = self._waiting.keyed(who.org_id, claim.key, claim.fingerprint)
        if waiting is not None:  # the send with this key waits for its thread, here
            return waiting
        held = await self._keys_store.find(who.org_id, claim.key, claim.at)
        if held is None:
            return None
        if held.fingerprint != claim.fingerprint or held.run_id is None:
            raise IdempotencyKeyReused()
        return await self.streams.follow(who, thread_id, held.run_id, 0, keep=KEEP)

    async def _send(
        self,
        who: Principal,
        thread_id: UUID,
        msg: SendInput,
        claim: IdempotencyClaim | None,
        gate: BudgetGate | None = None,
        extra_mcp: Attached = (),
        stored_parent: str | None = None,
        extra_skills: tuple[SkillBinding, ...] = (),
        *,
        posted: bool = False,
    ) -> EventSource:
        """The send, step by step: everything that can refuse it comes before the
        run is stored and the reply starts (``_begin``). ``posted``: sent through the
        API (a multiplayer thread's agent may leave it unanswered; a call needing
        approval waits for its sender), not by a runner, channel or public chat."""
        self._refuse_when_closing()
        check_input(msg)
        inputs = await self._reader.turn_inputs(who.org_id, thread_id, self.record_kinds())
        thread = await self._threads.check_visible(who, inputs.thread)
        sender_id, sender_name, role = await sender_of(self._threads, who, thread, msg)
        agent = agent_of(inputs)
        start = start_of(
            inputs.history,
            thread.head_id,
            edit_of=msg.edit_of,
            regenerate=msg.regenerate,
            multiplayer=thread.kind == "multiplayer",
        )
        multiplayer = self._multiplayer if thread.kind == "multiplayer" else None
        if multiplayer is not None and posted and not (msg.tool_results or msg.tool_approvals):
            heard = await multiplayer.unanswered(
                who, thread, agent, (sender_id, sender_name, role), msg.content
            )
            if heard is not None:
                return heard  # stored; the agent is not called (even while it replies)
        now = self._clock.now()
        refuse_when_busy(inputs.latest_run, now - self._stale_after)
        pending, expired = waiting_calls(inputs.latest_run, agent, now)
        if start.branched:  # a new branch waits for nothing; another, if it made the calls
            pending = () if msg.edit_of or msg.regenerate else pending_on(start.branch, pending)
        check_tool_results(pending, msg, expired)
        chosen = choose(
            self._router, self._configs, who, thread, agent, msg, inputs, extra_mcp, extra_skills
        )
        listed = await self._tools.list_tools(who, agent, chosen.setup)
        plan = plan_reply(
            chosen,
            listed,
            user_id=sender_id,
            keep_events=self._keep_events(claim),
            keys=self._keys,
            gate=gate,
            stored_parent=stored_parent,
        )
        run = new_run(who, thread.id, now)
        timeout = agent.approval_timeout_minutes if expired else None
        new = new_messages(self._clock, run, msg, pending, sender_id, sender_name, timeout)
        if start.branched:
            new, plan.branched = chained(new, start.parent), True
        note_answered(plan, new if new else list(start.branch[-1:]))
        plan.approved, plan.ask_approval = approved_calls(pending, msg, expired), posted
        meta = Meta(started_at=now, run_id=run.id, thread_id=thread.id, model=plan.model_id)
        turn = await self._begin(plan, run, new, inputs, meta, claim, start)
        if multiplayer is not None:  # the message and the reply, news for the followers
            # (its task taken before any await: a short reply may be over by then)
            multiplayer.tell_when_done(thread.id, self._running[run.id][1])
            await multiplayer.tell(thread.id)
        await messages_stored(self._events, new)
        return turn

    async def _queue(
        self, who: Principal, thread_id: UUID, msg: SendInput, claim: IdempotencyClaim | None
    ) -> EventSource:
        """A send that found its thread busy and may wait (use_cases/turn/queued.py):
        ``interrupt`` stops the running reply first; then the send waits its turn
        and for the thread's reply to end, and starts. Its stream answers at once."""
        if msg.multitask_strategy == "interrupt":
            await self.stop(who, thread_id)
        org, key = who.org_id, None if claim is None else (claim.key, claim.fingerprint)
        ask = reply_of(self._store, self._running, self._clock, self._stale_after, org, thread_id)
        send = lambda: self._send(who, thread_id, msg, claim, posted=True)  # noqa: E731
        return self._waiting.queue(org, thread_id, key, ask, send)

    def _refuse_when_closing(self) -> None:
        if self._closing is not None:
            raise Unavailable("the service is shutting down; send again in a moment")

    def record_kinds(self) -> list[str]:
        """The agent's sealed records the turn reads with the thread: its own
        configurations' and the tool sources'."""
        return [*(AgentConfigs.KINDS if self._configs else ()), *self._tools.kinds]

    def _keep_events(self, claim: IdempotencyClaim | None) -> timedelta:
        """How long the reply's events stay stored: a keyed send's as long as its key."""
        return self.replay if claim is None else max(self.replay, KEEP)

    async def _begin(
        self,
        plan: Plan,
        run: Run,
        new: list[Message],
        inputs: TurnInputs,
        meta: Meta,
        claim: IdempotencyClaim | None,
        start: Start,
    ) -> Turn:
        """Store the run and start the reply, both at once: the model call is made
        while begin_turn stores the run, so its first token is not held up by that
        write. Nothing the reply says leaves the turn's buffer (nobody reads it before
        this returns), and nothing is stored or run (tools, compaction) before the run
        is stored. When the run is refused (two sends racing), the reply is cancelled
        and leaves nothing behind. While one send of a thread is at that stage in this
        process, another waits for its write before calling the model, so a burst of
        sends to one thread costs at most one call made for nothing. A branched
        thread's head moves to the last new message (a regenerate's: the message
        answered again) with the same write."""
        history = [*start.branch, *new]
        head = (new[-1].id if new else start.parent) if start.branched else None
        key = (run.org_id, run.thread_id)
        early = key not in self._beginning
        # watched here, not by the reply: a restarted reply keeps the same signal
        stop = self._stops.watch(run.id)
        if early:
            self._beginning.add(key)
            turn, task, begun = self._start(plan, run, history, meta, stop)
        try:
            fresh = await self._store.begin_turn(
                run, new, run.started_at - self._stale_after, inputs.history_mark, claim, head=head
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
        if fresh is not None and head is None and new and branches.has_branched(fresh):
            # an edit overtook this send: its messages follow the one stored before
            # them, and its reply's finish makes that branch current
            head, plan.branched = new[-1].id, True
        if fresh is not None and head is not None:
            fresh = branch_of(fresh, head)  # the thread's every branch: the model reads one
        if not early or fresh is not None:
            if early:
                # A message came between the read and the write: the reply starts
                # again with the whole history (its first start said nothing yet).
                begun.cancel()
                task.cancel()
            turn, task, begun = self._start(plan, run, fresh or history, meta, stop)
        begun.set_result(None)
        self._running[run.id] = (run.org_id, task, stop)
        self._turns[run.id] = turn
        task.add_done_callback(lambda _: self._ended(run.id))
        if self._interrupting:
            stop.interrupt()
        self._beats.ensure()
        return turn

    def _ended(self, run_id: UUID) -> None:
        self._running.pop(run_id, None)
        self._turns.pop(run_id, None)
        self._stops.unwatch(run_id)

    def turn(self, run_id: UUID) -> Turn | None:
        """The event buffer of a reply this process runs (None: not here, or over)."""
        return self._turns.get(run_id)

    # --- followers in other processes ------------------------------------------

    def _followed(self, run_id: UUID) -> None:
        """A client in another process follows this reply (if it runs here)."""
        entry = self._running.get(run_id)
        if entry is not None and self._streams is not None:
            stored = self._turns.get(run_id)
            follow_here(self._streams, entry[0], stored, self._flush_s, self._clock, self._flushers)

    def _start(
        self, plan: Plan, run: Run, history: list[Message], meta: Meta, stop: StopSignal
    ) -> tuple[Turn, asyncio.Task[None], asyncio.Future[None]]:
        turn = Turn(run.id, run.thread_id)
        turn.keep = plan.keep_events
        span = reply_span(self.reply.tracer, plan, run)  # child of the request's span
        meta.trace_id = span.trace_id
        turn.emit(meta)
        begun: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(
            self.reply.run(plan, run, history, turn, begun, stop, span), name=f"turn-{run.id}"
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
        periodically); drop the stored events kept long enough. Returns how many
        replies it marked."""
        now = self._clock.now()
        count = await self._store.interrupt_stale(now - self._stale_after, now)
        if self._streams is not None:
            await self._streams.purge_events(now)  # kept long enough (``replay_s``)
        if self._keys_store is not None:
            await self._keys_store.purge_keys(now)  # past their 24 hours
        return count

    def close(self, grace_s: float) -> asyncio.Task[None]:
        """Begin shutting down: refuse new sends from now on, let running replies
        finish for ``grace_s`` seconds, then interrupt the rest (their streams end with
        an ``INTERRUPTED`` error, their partial text is stored). Returns the one task
        that does it: calling again returns the same task."""
        if self._closing is None:
            self._closing = asyncio.create_task(
                drain(self._running, grace_s, self._interrupt_now), name="turn-drain"
            )
        return self._closing

    def _interrupt_now(self) -> None:
        self._interrupting = True  # a reply stored from now on is interrupted at once

    async def shutdown(self, grace_s: float) -> None:
        """``close`` and wait for it; then this object serves sends again (a test
        may start the same services twice)."""
        await self.close(grace_s)
        self._waiting.cancel()  # sends still waiting for their thread
        self._beats.cancel()
        self._closing, self._interrupting = None, False
