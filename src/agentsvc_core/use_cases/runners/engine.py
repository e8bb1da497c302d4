"""What a run does: its steps, one after the other, on the job queue (docs/runners.md).

A run's row is the truth. Each step is checkpointed twice: when it starts (its
``attempt`` counted, an agent step's thread noted) and when it ends (its output,
tokens and cost, and the run's ``cursor`` moved on), each a compare-and-set on the
run's version, so a cancel or a resume written meanwhile is never overwritten.

A process killed mid-step leaves the step ``running``; the job is picked again
(its heartbeat goes stale) or queued again by the sweep, and the step starts
again, at most ``MAX_ATTEMPTS`` times in all. No step does its work twice to
completion unless it is idempotent by design: an agent step first looks at its
thread, and a turn that finished there is taken as the step's output instead of
asking again; a webhook step's call carries the same ``Idempotency-Key`` on every
attempt; a condition has no effect.

Budgets are checked before each step, whatever its kind, and before each model
call of an agent step (``Plan.gate``): a limit reached (spent >= limit) pauses the
run (``paused_reason: "budget"``) or fails it, as the runner's budget says; resume
continues from the step that paused. A model call under way is not cut: what it
spends may take the run past a limit, and the run stops at the next check. Each
step's end notes the share of a limit used (``budget_warning``) once past the
budget's soft limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_core.entities import Principal, Usage
from agentsvc_core.entities.runner import (
    Runner,
    RunnerRun,
    Step,
    StepRun,
)
from agentsvc_core.errors import Conflict, DomainError, NotFound
from agentsvc_core.ports import AgentRepository, Clock, ConversationStore, SecretBox
from agentsvc_core.ports.runners import RunnerStore
from agentsvc_core.ports.telemetry import CURRENT, SpanContext
from agentsvc_core.ports.traces import TraceStore
from agentsvc_core.ports.webhooks import WebhookCall, WebhookCaller
from agentsvc_core.pricing import PriceTable
from agentsvc_core.use_cases.conversation import Conversation
from agentsvc_core.use_cases.mcp_servers import McpServers
from agentsvc_core.use_cases.reply import BUDGET_EXCEEDED
from agentsvc_core.use_cases.runners.budgets import BudgetCheck, day_start
from agentsvc_core.use_cases.runners.expressions import evaluate, render, truthy
from agentsvc_core.use_cases.runners.runs import RunnerRuns, read_payload
from agentsvc_core.use_cases.runners.steps import step_headers_context
from agentsvc_core.use_cases.runners.trace import run_trace, step_span_id
from agentsvc_core.use_cases.runners.transitions import (
    MAX_OUTPUT_CHARS,
    Busy,
    Later,
    Outcome,
    Taken,
    context_of,
    json_or_none,
    next_index,
    reply_output,
    still,
    update_run,
    with_step,
    with_turn,
)
from agentsvc_core.use_cases.send_input import SendInput
from agentsvc_core.use_cases.threads import ThreadDraft, Threads
from agentsvc_core.use_cases.turn import Done, ErrorEvent, UsageOut, last_event
from agentsvc_core.use_cases.webhook_tools import SigningSecrets, idempotency_key

__all__ = ["MAX_ATTEMPTS", "RunnerEngine"]

log = logging.getLogger("agentsvc.runners")

MAX_ATTEMPTS = 3  # starts of one step (a killed process's step is started again)
BUSY_RETRY_S = 2.0  # a thread still busy with an earlier attempt's turn: try again then
WEBHOOK_MAX_BYTES = 1_000_000
_enc = msgspec.json.Encoder()
_headers = msgspec.json.Decoder(dict[str, str])


class RunnerEngine:
    def __init__(
        self,
        store: RunnerStore,
        runs: RunnerRuns,
        conversation: Conversation,
        threads: Threads,
        turns: ConversationStore,
        agents: AgentRepository,
        mcps: McpServers,
        caller: WebhookCaller,
        signing: SigningSecrets,
        box: SecretBox,
        clock: Clock,
        prices: PriceTable,
        traces: TraceStore | None = None,
        retention: timedelta = timedelta(0),
        stale_after: timedelta = timedelta(seconds=45),
    ) -> None:
        """``traces``: where a run's trace record goes when it ends (kept for
        ``retention``; zero or None: not stored)."""
        self._stale = stale_after  # a running step's run not renewed for this long: its job died
        self._traces = traces if retention > timedelta(0) else None
        self._retention = retention
        self._store = store
        self._runs = runs
        self._conversation = conversation
        self._threads = threads
        self._turns = turns
        self._agents = agents
        self._mcps = mcps
        self._caller = caller
        self._signing = signing
        self._box = box
        self._clock = clock
        self._prices = prices
        runs.stop_step = self.stop_step

    # --- the job ------------------------------------------------------------------

    async def execute(self, payload: bytes) -> None:
        """The ``runner.run`` job: run the run's remaining steps."""
        org, run_id = read_payload(payload)
        try:
            run = await self._execute(org, run_id)
        except Taken:
            return
        except Later as later:
            # the run's lease renewed (the sweep leaves it alone), and a job of its own
            # key queued (this job still holds the run's key while it runs)
            run = await self._store.get_run(org, run_id)
            run = await self._update(
                run, lambda r: still(r, r.status, updated_at=self._clock.now())
            )
            await self._runs.enqueue(
                run, delay_s=later.delay_s, key=f"run:{run.id}:later:{time.time_ns()}"
            )
            return
        except Exception:
            # a defect: the run fails readably rather than waiting for a sweep forever
            log.exception("run %s failed", run_id)
            run = await self._store.get_run(org, run_id)
            now = self._clock.now()
            run = await self._update(
                run,
                lambda r: (
                    None
                    if r.ended
                    else msgspec.structs.replace(
                        r,
                        status="failed",
                        error="the run failed (an internal error; see the logs)",
                        ended_at=now,
                        updated_at=now,
                    )
                ),
            )
        if run is not None and run.ended:
            await self.record(run)
        elif run is not None and run.status == "queued":
            await self._runs.enqueue(
                run, key=f"run:{run.id}:again:{run.version}"
            )  # resumed meanwhile

    async def _execute(self, org: str, run_id: UUID) -> RunnerRun | None:
        """The run as this job left it (None: it is gone)."""
        try:
            run = await self._store.get_run(org, run_id)
        except NotFound:
            return None  # deleted with its runner
        if run.status not in ("queued", "running"):
            return None  # ended, paused, or cancelled meanwhile (recorded then)
        runner: Runner | None = None
        if run.runner_id is not None:
            try:
                runner = await self._store.get(org, run.runner_id)
            except NotFound:
                return None
        if run.status == "queued":
            await self._wait_for_earlier(run)
            run = await self._begin(run, runner)
        while run.status == "running":
            if run.cursor >= len(run.pipeline):
                return await self._end(run, "succeeded")
            run = await self._step(run, runner)
        return run

    async def _wait_for_earlier(self, run: RunnerRun) -> None:
        """``overlap: queue``: a cron run waits for the earlier runs of its trigger."""
        if run.trigger_id is None or run.trigger_kind != "cron":
            return
        earlier = await self._store.runs(run.org_id, runner_id=run.runner_id, status="running")
        if any(r.trigger_id == run.trigger_id and r.id != run.id for r in earlier):
            raise Later(BUSY_RETRY_S)

    async def _begin(self, run: RunnerRun, runner: Runner | None) -> RunnerRun:
        fields: dict[str, Any] = {"status": "running"}
        if run.started_at is None:
            fields["started_at"] = self._clock.now()
        if run.trace_id is None:
            fields["trace_id"] = uuid.uuid4().hex  # the run's trace: its steps' turns join it
        if not run.pipeline and runner is not None:
            # a cron tick's run takes the runner's steps as they are when it starts
            fields["pipeline"] = runner.steps
            fields["steps"] = tuple(StepRun(step_id=s.id) for s in runner.steps)
        return await self._update(run, lambda r: still(r, "queued", **fields))

    # --- one step -----------------------------------------------------------------

    async def _step(self, run: RunnerRun, runner: Runner | None) -> RunnerRun:
        index = run.cursor
        step, state = run.pipeline[index], run.steps[index]
        retry = state.status == "running"  # started by a job before this one
        if retry:
            if run.updated_at > self._clock.now() - self._stale:
                raise Taken()  # its job is alive (it renews the run's lease): it goes on
            if state.attempt >= MAX_ATTEMPTS:
                return await self._fail(
                    run, index, f"step {step.id!r} was interrupted {state.attempt} times; not again"
                )
        prepared = await self._prepare(run, runner, index)
        if isinstance(prepared, RunnerRun):
            return prepared  # paused or failed before it started
        started, budget = prepared
        run = await self._update(run, lambda r: with_step(r, index, started, expect=state))
        if run.status != "running":
            return run  # cancelled meanwhile
        if run.steps[index] != started:
            raise Taken()  # another job started the step meanwhile: it goes on
        try:
            async with self._lease(run):
                outcome = await self._do(run, runner, step, started, budget, retry)
        except Busy:
            # the thread is busy with a turn that is not this step's: no attempt was
            # made; the step waits as it was
            await self._update(run, lambda r: with_step(r, index, state, expect=started))
            raise Later(BUSY_RETRY_S) from None
        except (Later, Taken):
            raise
        except DomainError as exc:
            outcome = Outcome(ok=False, error=exc.detail)
        except Exception:
            log.exception("step %s of run %s failed", step.id, run.id)
            outcome = Outcome(ok=False, error="the step failed (an internal error; see the logs)")
        return await self._ended_step(run, runner, index, outcome, budget, started)

    async def _prepare(
        self, run: RunnerRun, runner: Runner | None, index: int
    ) -> tuple[StepRun, BudgetCheck | None] | RunnerRun:
        """The step's start (its budget checked, an agent step's thread made), or
        the run as it ended before the step could start."""
        step, state = run.pipeline[index], run.steps[index]
        try:
            # every step, whatever its kind: a run that has reached a limit stops
            # here (the step that crossed it ran to its end)
            budget = await self._budget(run, runner)
            why = None if budget is None else budget.why()
            if budget is not None and why is not None:
                return await self._over_budget(run, runner, why, budget.warning())
            now = self._clock.now()
            started = msgspec.structs.replace(
                state, status="running", attempt=state.attempt + 1, started_at=now, error=None
            )
            if step.kind == "agent" and started.thread_id is None:
                thread = await self._thread(run, step)
                started = msgspec.structs.replace(started, thread_id=thread)
        except DomainError as exc:  # an agent gone since the runner was saved, say
            return await self._fail(run, index, f"step {step.id!r}: {exc.detail}")
        return started, budget

    @contextlib.asynccontextmanager
    async def _lease(self, run: RunnerRun) -> AsyncIterator[None]:
        """While a step runs, the run's ``updated_at`` is renewed (a quarter of the
        stale time): the sweep queues again, and another job takes over, only a run
        whose job stopped renewing it (a killed process)."""

        async def renew() -> None:
            while True:
                await asyncio.sleep(self._stale.total_seconds() / 4)
                try:
                    fresh = await self._store.get_run(run.org_id, run.id)
                    await self._update(
                        fresh, lambda r: still(r, "running", updated_at=self._clock.now())
                    )
                except DomainError as exc:
                    log.warning("the lease of run %s was not renewed: %s", run.id, exc.detail)

        task = asyncio.create_task(renew())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _do(
        self,
        run: RunnerRun,
        runner: Runner | None,
        step: Step,
        state: StepRun,
        budget: BudgetCheck | None,
        retry: bool,
    ) -> Outcome:
        context = context_of(run)
        match step.kind:
            case "agent":
                return await self._agent(run, runner, step, state, context, budget, retry)
            case "webhook":
                return await self._webhook(run, step, context)
            case "condition":
                assert step.expression is not None
                try:
                    value = evaluate(step.expression, context)
                except ValueError as exc:
                    return Outcome(ok=False, error=f"the condition cannot be evaluated: {exc}")
                chosen = step.if_true if truthy(value) else step.if_false
                return Outcome(ok=True, output={"value": value, "next": chosen}, next=chosen)
        return Outcome(ok=False, error=f"unknown step kind {step.kind!r}")

    async def _ended_step(
        self,
        run: RunnerRun,
        runner: Runner | None,
        index: int,
        outcome: Outcome,
        budget: BudgetCheck | None,
        started: StepRun,
    ) -> RunnerRun:
        now = self._clock.now()
        # the share of a limit used with what this step spent
        warning = budget.warning(outcome.tokens, outcome.cost_usd) if budget is not None else None
        taken: list[bool] = []

        def change(r: RunnerRun) -> RunnerRun | None:
            state = r.steps[index]
            if (state.attempt, state.started_at) != (started.attempt, started.started_at):
                taken.append(True)  # another job started the step again: its write wins
                return None
            done = msgspec.structs.replace(
                state,
                status="succeeded" if outcome.ok else ("pending" if outcome.paused else "failed"),
                ended_at=now,
                output=outcome.output,
                error=outcome.error,
                tokens=state.tokens + outcome.tokens,
                cost_usd=state.cost_usd + outcome.cost_usd,
                model=outcome.model or state.model,
            )
            steps = list(r.steps)
            steps[index] = done
            target = next_index(r, index, outcome.next) if outcome.ok else index + 1
            for skipped in range(index + 1, target):  # a condition's jump
                steps[skipped] = msgspec.structs.replace(steps[skipped], status="skipped")
            fields: dict[str, Any] = {
                "steps": tuple(steps),
                "tokens": r.tokens + outcome.tokens,
                "cost_usd": r.cost_usd + outcome.cost_usd,
                "budget_warning": warning,
                "updated_at": now,
            }
            if r.status != "running":  # cancelled meanwhile: keep what was spent
                return msgspec.structs.replace(r, **fields)
            if outcome.paused:
                paused = budget is None or (
                    runner is not None and runner.budget.on_exceed == "pause"
                )
                if paused:
                    fields.update(status="paused", paused_reason="budget", error=outcome.paused)
                else:
                    fields.update(status="failed", error=outcome.paused, ended_at=now)
                return msgspec.structs.replace(r, **fields)
            if not outcome.ok:
                fields.update(status="failed", error=f"step {done.step_id!r}: {outcome.error}")
                fields["ended_at"] = now
                return msgspec.structs.replace(r, **fields)
            if r.pipeline[index].kind != "condition":
                fields["output"] = outcome.output
            fields["cursor"] = target
            return msgspec.structs.replace(r, **fields)

        run = await self._update(run, change)
        if taken:
            raise Taken()
        return run

    async def _over_budget(
        self, run: RunnerRun, runner: Runner | None, why: str, warning: str | None
    ) -> RunnerRun:
        pause = runner is None or runner.budget.on_exceed == "pause"
        now = self._clock.now()
        fields: dict[str, Any] = (
            {"status": "paused", "paused_reason": "budget", "error": why, "updated_at": now}
            if pause
            else {"status": "failed", "error": why, "ended_at": now, "updated_at": now}
        )
        fields["budget_warning"] = warning
        return await self._update(run, lambda r: still(r, "running", **fields))

    async def _budget(self, run: RunnerRun, runner: Runner | None) -> BudgetCheck | None:
        if runner is None:
            return None
        b = runner.budget
        today = (0, 0.0)
        if b.daily_cost_usd is not None or b.daily_tokens is not None:
            today = await self._store.spent_since(
                run.org_id, runner.id, day_start(self._clock.now())
            )
        if all(
            v is None
            for v in (
                b.max_cost_usd_per_run,
                b.max_tokens_per_run,
                b.daily_cost_usd,
                b.daily_tokens,
            )
        ):
            return None
        return BudgetCheck(b, run, today, self._prices)

    # --- agent steps --------------------------------------------------------------

    async def _thread(self, run: RunnerRun, step: Step) -> UUID:
        if run.thread_id is not None:
            return run.thread_id  # a scheduled task's own thread
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

    def _message(self, step: Step, context: dict[str, Any]) -> str:
        mapped = {k: evaluate(v, context) for k, v in step.input_mapping.items()}
        parts: list[str] = []
        if step.prompt:
            parts.append(render(step.prompt, context))
        if mapped:
            parts.append(_enc.encode(mapped).decode())
        elif not step.prompt:
            parts.append(_enc.encode(context["input"]).decode())
        return "\n\n".join(parts)

    async def _agent(
        self,
        run: RunnerRun,
        runner: Runner | None,
        step: Step,
        state: StepRun,
        context: dict[str, Any],
        budget: BudgetCheck | None,
        retry: bool,
    ) -> Outcome:
        assert step.agent_id is not None
        assert state.thread_id is not None
        who = Principal.organization(run.org_id)
        agent = await self._agents.get(run.org_id, step.agent_id)
        model_id = step.model or agent.default_model
        if retry:
            done = await self._finished_before(who, run, state)
            if done is not None:
                return msgspec.structs.replace(done, model=model_id)
        try:
            message = self._message(step, context)
        except ValueError as exc:
            return Outcome(ok=False, error=f"the step's input cannot be built: {exc}")
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
                stored_parent=step_span_id(run, state) if parent is not None else None,
            )
        except Conflict as exc:
            if exc.code == "THREAD_BUSY":
                raise Busy() from None
            raise
        finally:
            if parent is not None:
                CURRENT.reset(parent)
        # the turn is the step's: a retry finds it (and only it) on the thread
        index = run.pipeline.index(step)
        run = await self._update(run, lambda r: with_turn(r, index, state, turn.run_id))
        if run.status != "running":
            # cancelled while the turn was being started (the cancel found none)
            await self._conversation.stop(who, state.thread_id)
        return self._agent_outcome(await last_event(turn), model_id, state.thread_id)

    def _spent(self, usage: UsageOut | None, model_id: str) -> tuple[int, float]:
        if usage is None:
            return 0, 0.0
        counted = Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cached_input_tokens=usage.cached_input_tokens or 0,
        )
        return usage.total_tokens, self._prices.cost(model_id, counted) or 0.0

    def _agent_outcome(
        self, final: Done | ErrorEvent | None, model_id: str, thread_id: UUID
    ) -> Outcome:
        # what the turn's model calls used counts, whatever the outcome
        tokens, cost = self._spent(None if final is None else final.usage, model_id)
        spent: dict[str, Any] = {"model": model_id, "tokens": tokens, "cost_usd": cost}
        if isinstance(final, ErrorEvent):
            if final.code == BUDGET_EXCEEDED:
                return Outcome(ok=False, paused=final.detail or "over budget", **spent)
            return Outcome(ok=False, error=f"{final.code}: {final.detail or ''}", **spent)
        if final is None or final.stopped:
            return Outcome(ok=False, error="the agent's turn was stopped", **spent)
        return Outcome(
            ok=True,
            output=reply_output(final.content, thread_id, final.message_id),
            tokens=tokens,
            cost_usd=cost,
            model=model_id,
        )

    async def _finished_before(
        self, who: Principal, run: RunnerRun, state: StepRun
    ) -> Outcome | None:
        """The output of the turn an earlier attempt of the step started (the process
        died before the step's end was stored), when that turn completed; a turn of
        it still counted as running (its process is gone) is stopped. Nothing of a
        turn that is not the step's is touched."""
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
        return Outcome(ok=True, output=reply_output(last[-1].content, state.thread_id, last[-1].id))

    async def record(self, run: RunnerRun) -> None:
        """Store the trace record of an ended run (its own span and one per step;
        its agent steps' turns stored theirs under the same trace id). Once: a
        second record of the run (a cancel racing the job) is dropped."""
        if self._traces is None or run.trace_id is None:
            return
        name = "scheduled task"
        if run.runner_id is not None:
            try:
                name = (await self._store.get(run.org_id, run.runner_id)).name
            except NotFound:
                return
        record = run_trace(run, name, self._clock.now() + self._retention)
        try:
            await self._traces.add_trace(record)
        except Conflict:
            pass  # recorded already
        except DomainError as exc:
            log.warning("the trace of run %s could not be stored: %s", run.id, exc.detail)

    async def stop_step(self, run: RunnerRun) -> None:
        """A cancelled run's agent step in flight: stop its turn; a run with none
        in flight has ended here: its trace is recorded."""
        if not any(s.status == "running" for s in run.steps):
            await self.record(run)
        for state in run.steps:
            if state.status == "running" and state.thread_id is not None:
                try:
                    await self._conversation.stop(
                        Principal.organization(run.org_id), state.thread_id
                    )
                except DomainError as exc:
                    log.warning("could not stop the turn of run %s: %s", run.id, exc.detail)

    # --- webhook steps --------------------------------------------------------------

    async def _webhook(self, run: RunnerRun, step: Step, context: dict[str, Any]) -> Outcome:
        assert step.url is not None
        try:
            mapped = {k: evaluate(v, context) for k, v in step.input_mapping.items()}
        except ValueError as exc:
            return Outcome(ok=False, error=f"the step's input cannot be built: {exc}")
        body = _enc.encode(
            {
                "runnerId": None if run.runner_id is None else str(run.runner_id),
                "runId": str(run.id),
                "stepId": step.id,
                "orgId": run.org_id,
                "input": mapped if step.input_mapping else run.input,
            }
        )
        headers = (
            _headers.decode(
                self._box.open(
                    step.headers,
                    step_headers_context(run.org_id, run.runner_id or run.id, step.id),
                )
            )
            if step.headers
            else {}
        )
        answer = await self._caller.call(
            WebhookCall(
                url=step.url,
                method=step.method,
                headers=headers,
                body=body,
                secrets=await self._signing.signing_secrets(run.org_id),
                timeout_ms=step.timeout_ms,
                max_bytes=WEBHOOK_MAX_BYTES,
                # the same on every attempt: a receiver can drop a repeated call
                idempotency_key=idempotency_key(run.org_id, run.id, step.id),
            )
        )
        output = {
            "status_code": answer.status_code,
            "body": answer.body[:MAX_OUTPUT_CHARS],
            "json": json_or_none(answer.body),
        }
        if answer.outcome == "ok":
            return Outcome(ok=True, output=output)
        if answer.outcome == "status":
            return Outcome(
                ok=False, output=output, error=f"the webhook answered {answer.status_code}"
            )
        return Outcome(ok=False, error=f"the webhook call failed: {answer.reason}")

    # --- writes ---------------------------------------------------------------------

    async def _update(
        self, run: RunnerRun, change: Callable[[RunnerRun], RunnerRun | None]
    ) -> RunnerRun:
        """``update_run`` on this engine's store."""
        return await update_run(self._store, run, change)

    async def _end(self, run: RunnerRun, status: str) -> RunnerRun:
        now = self._clock.now()
        return await self._update(
            run, lambda r: still(r, "running", status=status, ended_at=now, updated_at=now)
        )

    async def _fail(self, run: RunnerRun, index: int, error: str) -> RunnerRun:
        now = self._clock.now()

        def change(r: RunnerRun) -> RunnerRun | None:
            if r.status != "running":
                return None
            steps = list(r.steps)
            steps[index] = msgspec.structs.replace(
                steps[index], status="failed", error=error, ended_at=now
            )
            return msgspec.structs.replace(
                r, steps=tuple(steps), status="failed", error=error, ended_at=now, updated_at=now
            )

        return await self._update(run, change)
