"""What the next turn would send (``GET /api/threads/{id}/context``) and compacting
a thread on request (``POST /api/threads/{id}/compact``; docs/compaction.md).

Both plan as a send does, with the same reads and functions (``turn_inputs``,
``choose``, the tool sources' listing, ``plan_reply``), and build the context as the
reply does (``model_history``, then ``Compactor.applied`` with the thread's
checkpoint), so what they show cannot drift from what a turn sends. The history is
the turn's own read of it (``TurnInputs.history``). ``compact`` summarises with
the reply's own code (``Reply.summarise``: the same model call, span, checkpoint and
usage record as a turn's summary), for both provider families: native compaction
only happens inside a provider's call, so a summary made here is what the next
turns of either family send, and the first family's provider goes on compacting
natively past its trigger.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Literal
from uuid import UUID

import msgspec

from agentsvc_core.entities import Message, Principal
from agentsvc_core.errors import InvalidInput, NotFound
from agentsvc_core.ports import (
    Clock,
    ConversationStore,
    ModelRouter,
    ServerTools,
    TurnInputs,
    TurnReader,
)
from agentsvc_core.use_cases.branches import branch_of
from agentsvc_core.use_cases.org_settings import AgentConfigs, KeyBroker
from agentsvc_core.use_cases.threads import Threads
from agentsvc_core.use_cases.turn._private import Plan
from agentsvc_core.use_cases.turn.compaction import Checkpoint, Compactor, estimate
from agentsvc_core.use_cases.turn.context import model_history
from agentsvc_core.use_cases.turn.reply import Reply
from agentsvc_core.use_cases.turn.reply_plan import choose, plan_reply
from agentsvc_core.use_cases.turn.send_input import SendInput, refuse_when_busy

__all__ = ["Compacted", "ThreadCompaction", "ThreadContext"]

_NOTHING_SENT = SendInput(content="")  # the next turn's own message is not known yet


class ThreadContext(msgspec.Struct, frozen=True, kw_only=True):
    """The system prompt and messages the next turn would send (before its own
    message), their estimated tokens, and the thread's summary (None: none sent)."""

    model: str
    system: str
    messages: list[Message]
    tokens: int
    summary: str | None
    summarised_through: UUID | None


class Compacted(msgspec.Struct, frozen=True, kw_only=True):
    """What ``compact`` did; tokens are estimates of the context before and after."""

    compacted: bool
    tokens_before: int
    tokens_after: int
    kind: Literal["native", "summary"]


class ThreadCompaction:
    def __init__(
        self,
        threads: Threads,
        reader: TurnReader,
        store: ConversationStore,
        router: ModelRouter,
        tools: ServerTools,
        clock: Clock,
        reply: Reply,
        *,
        compactor: Compactor | None,
        configs: AgentConfigs | None,
        keys: KeyBroker | None,
        kinds: Callable[[], list[str]],
        stale_after: timedelta,
    ) -> None:
        """``kinds``: the sealed records a turn reads with the thread (the send's);
        ``stale_after``: past this, a running reply's heartbeat is taken for dead."""
        self._threads, self._reader, self._store = threads, reader, store
        self._router, self._tools, self._clock = router, tools, clock
        self._reply, self._compactor = reply, compactor
        self._configs, self._keys, self._kinds = configs, keys, kinds
        self._stale_after = stale_after

    async def _plan(self, who: Principal, thread_id: UUID) -> tuple[Plan, TurnInputs]:
        """The plan a send to the thread would make now, with the agent's default
        model and no overlay of its own; whoever may read the thread's messages."""
        inputs = await self._reader.turn_inputs(who.org_id, thread_id, self._kinds())
        thread = await self._threads.check_visible(who, inputs.thread)
        if inputs.agent is None:
            raise NotFound("agent not found")
        chosen = choose(
            self._router, self._configs, who, thread, inputs.agent, _NOTHING_SENT, inputs, ()
        )
        listed = await self._tools.list_tools(who, inputs.agent, chosen.setup)
        plan = plan_reply(
            chosen,
            listed,
            user_id=who.user_id,
            keep_events=timedelta(0),
            keys=self._keys,
            gate=None,
            stored_parent=None,
        )
        return plan, inputs

    async def _checkpoint(self, plan: Plan, messages: list[Message]) -> Checkpoint | None:
        """The thread's checkpoint when its turns send summaries (None: they do not),
        as the turn takes it: none when it covers messages not on this branch."""
        config, compactor = plan.compaction, self._compactor
        if config is None or not config.enabled or compactor is None:
            return None
        cp = await compactor.checkpoint(plan.who.org_id, plan.thread.id)
        return compactor.on_branch(cp, messages)

    async def context(self, who: Principal, thread_id: UUID) -> ThreadContext:
        """What the next turn would send. ``NotFound``, ``PermissionDenied`` as the
        thread's messages; ``InvalidInput`` when no family serves the agent's model."""
        plan, inputs = await self._plan(who, thread_id)
        system, messages = plan.system, model_history(_branch(inputs))
        cp = await self._checkpoint(plan, messages)
        if cp is not None:
            system, messages = Compactor.applied(cp, system, messages)
        return ThreadContext(
            model=plan.model_id,
            system=system,
            messages=messages,
            tokens=estimate(system, messages),
            summary=cp.summary or None if cp is not None else None,
            summarised_through=None if cp is None else cp.through,
        )

    async def compact(self, who: Principal, thread_id: UUID) -> Compacted:
        """Summarise the thread's older messages now (all but the recent ones), as a
        turn past its threshold does, and record the call's usage. ``ThreadBusy``
        while a reply runs; ``InvalidInput`` when the agent's compaction is off or
        its model's family sends no summary (``local``)."""
        plan, inputs = await self._plan(who, thread_id)
        refuse_when_busy(inputs.latest_run, self._clock.now() - self._stale_after)
        config = plan.compaction
        if config is None:
            raise InvalidInput(
                "model", f"{plan.model_id!r}: the {plan.model.provider} model is not compacted"
            )
        if not config.enabled:
            raise InvalidInput(
                "compaction",
                "compaction is off for this agent: turn it on with "
                f"PUT /api/agents/{plan.agent.id}/compaction",
            )
        history = model_history(_branch(inputs))
        cp = await self._checkpoint(plan, history)
        if cp is None:  # a service wired without a compactor keeps no summaries
            raise InvalidInput("compaction", "this service keeps no summaries")
        system, recent = Compactor.applied(cp, plan.system, history)
        before = estimate(system, recent)
        done = await self._reply.summarise(plan, uuid.uuid4(), cp, recent)
        if done is None:
            return Compacted(
                compacted=False, tokens_before=before, tokens_after=before, kind="summary"
            )
        cp, record = done
        await self._store.add_usage([record])
        system, recent = Compactor.applied(cp, plan.system, recent)
        return Compacted(
            compacted=True,
            tokens_before=before,
            tokens_after=estimate(system, recent),
            kind="summary",
        )


def _branch(inputs: TurnInputs) -> list[Message]:
    """The thread's current branch, as the turn reads it (use_cases/branches.py)."""
    return branch_of(inputs.history, inputs.thread.head_id)
