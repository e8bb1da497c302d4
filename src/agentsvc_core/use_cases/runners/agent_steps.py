"""An agent step: a turn of the step's agent on a thread of its own (or a
scheduled task's thread), its message the prompt with placeholders filled and
the mapped input, its model calls gated by the runner's budget.

A retried step (its process died) first looks at its thread: a turn of the
earlier attempt that completed there is taken as the step's output instead of
asking again, and one still counted as running (its process is gone) is
stopped. Nothing of a turn that is not the step's is touched.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import msgspec

from agentsvc_core.entities import Principal, Usage
from agentsvc_core.entities.runner import Runner, RunnerRun, Step, StepRun
from agentsvc_core.errors import Conflict
from agentsvc_core.ports import AgentRepository, ConversationStore
from agentsvc_core.ports.runners import RunnerStore
from agentsvc_core.ports.telemetry import CURRENT, SpanContext
from agentsvc_core.pricing import PriceTable
from agentsvc_core.use_cases.mcp_servers import McpServers
from agentsvc_core.use_cases.runners.budgets import BudgetCheck
from agentsvc_core.use_cases.runners.expressions import evaluate, json_or_none, render
from agentsvc_core.use_cases.runners.runs import save_run
from agentsvc_core.use_cases.runners.trace import step_span_id
from agentsvc_core.use_cases.runners.transitions import (
    MAX_OUTPUT_CHARS,
    Busy,
    Done,
    Failed,
    OverBudget,
    StepEnd,
    turn_noted,
)
from agentsvc_core.use_cases.threads import ThreadDraft, Threads
from agentsvc_core.use_cases.turn.conversation import Conversation
from agentsvc_core.use_cases.turn.events import Done as TurnDone
from agentsvc_core.use_cases.turn.events import ErrorEvent, UsageOut, last_event
from agentsvc_core.use_cases.turn.reply import BUDGET_EXCEEDED
from agentsvc_core.use_cases.turn.send_input import SendInput

__all__ = ["AgentSteps", "reply_output"]

_enc = msgspec.json.Encoder()


def reply_output(text: str, thread_id: UUID, message_id: UUID | None) -> dict[str, Any]:
    """An agent step's output: its reply (cut at ``MAX_OUTPUT_CHARS``), the reply as
    JSON when it is JSON, and where it is."""
    text = text[:MAX_OUTPUT_CHARS]
    return {
        "text": text,
        "json": json_or_none(text),
        "thread_id": str(thread_id),
        "message_id": None if message_id is None else str(message_id),
    }


def message_of(step: Step, context: dict[str, Any]) -> str:
    """What the step sends: the prompt filled in, then the mapped input as JSON
    (the run's input when there is neither a mapping nor a prompt). Raises
    ``ValueError`` when an expression cannot be evaluated."""
    mapped = {k: evaluate(v, context) for k, v in step.input_mapping.items()}
    parts: list[str] = []
    if step.prompt:
        parts.append(render(step.prompt, context))
    if mapped:
        parts.append(_enc.encode(mapped).decode())
    elif not step.prompt:
        parts.append(_enc.encode(context["input"]).decode())
    return "\n\n".join(parts)


class AgentSteps:
    def __init__(
        self,
        store: RunnerStore,
        conversation: Conversation,
        threads: Threads,
        turns: ConversationStore,
        agents: AgentRepository,
        mcps: McpServers,
        prices: PriceTable,
    ) -> None:
        self._store = store
        self._conversation = conversation
        self._threads = threads
        self._turns = turns
        self._agents = agents
        self._mcps = mcps
        self._prices = prices

    async def thread(self, run: RunnerRun, step: Step) -> UUID:
        """The step's thread: a scheduled task's own, or a new one named after
        the run."""
        if run.thread_id is not None:
            return run.thread_id
        assert step.agent_id is not None
        name = f"run {str(run.id)[:8]} · {step.id}"
        thread = await self._threads.create(
            Principal.organization(run.org_id),
            ThreadDraft(
                agent_id=step.agent_id,
                title=name,
                metadata={
                    k: v
                    for k, v in (
                        ("runner_id", str(run.runner_id) if run.runner_id else None),
                        ("runner_run_id", str(run.id)),
                        ("runner_step", step.id),
                    )
                    if v is not None
                },
            ),
        )
        return thread.id

    async def run(
        self,
        run: RunnerRun,
        runner: Runner | None,
        step: Step,
        state: StepRun,
        context: dict[str, Any],
        budget: BudgetCheck | None,
        retry: bool,
    ) -> StepEnd | Busy:
        assert step.agent_id is not None
        assert state.thread_id is not None
        who = Principal.organization(run.org_id)
        agent = await self._agents.get(run.org_id, step.agent_id)
        model_id = step.model or agent.default_model
        if retry:
            done = await self._finished_before(who, state)
            if done is not None:
                return msgspec.structs.replace(done, model=model_id)
        try:
            message = message_of(step, context)
        except ValueError as exc:
            return Failed(error=f"the step's input cannot be built: {exc}")
        extra = (
            [(a.attachment, a.server) for a in await self._mcps.attached(who, "runner", runner.id)]
            if runner is not None
            else []
        )
        # the turn's trace is the run's: its reply span a child of the step's span
        parent = (
            CURRENT.set(SpanContext(trace_id=run.trace_id, span_id=step_span_id(run, state)))
            if run.trace_id is not None
            else None
        )
        try:
            turn = await self._conversation.send(
                who,
                state.thread_id,
                SendInput(content=message, model_override=step.model),
                gate=budget.gate if budget is not None else None,
                extra_mcp=extra,
                extra_skills=runner.skills if runner is not None else (),
                stored_parent=step_span_id(run, state) if parent is not None else None,
            )
        except Conflict as exc:
            if exc.code == "THREAD_BUSY":
                return Busy()
            raise
        finally:
            if parent is not None:
                CURRENT.reset(parent)
        # the turn is the step's: a retry finds it (and only it) on the thread
        index = run.pipeline.index(step)
        noted = await save_run(self._store, run, lambda r: turn_noted(r, index, state, turn.run_id))
        if isinstance(noted, RunnerRun) and noted.status != "running":
            # cancelled while the turn was being started (the cancel found none)
            await self._conversation.stop(who, state.thread_id)
        return self._end(await last_event(turn), model_id, state.thread_id)

    def _spent(self, usage: UsageOut | None, model_id: str) -> tuple[int, float]:
        if usage is None:
            return 0, 0.0
        counted = Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cached_input_tokens=usage.cached_input_tokens or 0,
        )
        return usage.total_tokens, self._prices.cost(model_id, counted) or 0.0

    def _end(self, final: TurnDone | ErrorEvent | None, model_id: str, thread_id: UUID) -> StepEnd:
        # what the turn's model calls used counts, whatever the outcome
        tokens, cost = self._spent(None if final is None else final.usage, model_id)
        spent: dict[str, Any] = {"model": model_id, "tokens": tokens, "cost_usd": cost}
        if isinstance(final, ErrorEvent):
            if final.code == BUDGET_EXCEEDED:
                return OverBudget(why=final.detail or "over budget", **spent)
            return Failed(error=f"{final.code}: {final.detail or ''}", **spent)
        if final is None or final.stopped:
            return Failed(error="the agent's turn was stopped", **spent)
        return Done(output=reply_output(final.content, thread_id, final.message_id), **spent)

    async def _finished_before(self, who: Principal, state: StepRun) -> Done | None:
        """The output of the turn an earlier attempt of the step started (the process
        died before the step's end was stored), when that turn completed; a turn of
        it still counted as running (its process is gone) is stopped."""
        assert state.thread_id is not None
        if state.turn_id is None:
            return None  # the earlier attempt died before its turn started
        latest = await self._turns.latest_run(who.org_id, state.thread_id)
        if latest is None or latest.id != state.turn_id:
            return None
        if latest.status == "running":
            await self._conversation.stop(who, state.thread_id)  # frees an orphaned turn
            return None
        if latest.status != "completed":
            return None
        _, total = await self._threads.history(who, state.thread_id, offset=0, limit=1)
        if total == 0:
            return None
        last, _ = await self._threads.history(who, state.thread_id, offset=total - 1, limit=1)
        if (
            not last
            or last[-1].role != "assistant"
            or last[-1].status != "complete"
            or last[-1].run_id != state.turn_id
        ):
            return None
        return Done(output=reply_output(last[-1].content, state.thread_id, last[-1].id))
