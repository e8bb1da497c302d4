"""What a run does: its steps, one after the other, on the job queue (docs/runners.md).

A run's row is the truth. Each step is checkpointed twice: when it starts (its
``attempt`` counted, an agent step's thread noted) and when it ends (its output,
tokens and cost, and the run's ``cursor`` moved on), each a compare-and-set on the
run's version (``runs.save_run`` with a change of ``transitions.py``), so a cancel
or a resume written meanwhile is never overwritten.

A process killed mid-step leaves the step ``running``; the job is picked again
(its heartbeat goes stale) or queued again by the sweep, and the step starts
again, at most ``MAX_ATTEMPTS`` times in all. No step does its work twice to
completion unless it is idempotent by design: an agent step first looks at its
thread, and a turn that finished there is taken as the step's output instead of
asking again; a webhook step's call carries the same ``Idempotency-Key`` on every
attempt; a condition has no effect.

Budgets are checked before each step, whatever its kind, and before each model
call of an agent step (``BudgetCheck.gate``): a limit reached (spent >= limit)
pauses the run (``paused_reason: "budget"``) or fails it, as the runner's budget
says; resume continues from the step that paused. A model call under way is not
cut: what it spends may take the run past a limit, and the run stops at the next
check. Each step's end notes the share of a limit used (``budget_warning``) once
past the budget's soft limit.

What a pass of the job came to is a value, passed up: the run as the job left
it, ``Again`` (the queue runs the job again later, under its key: the step's
thread is busy, or an earlier run of its trigger still runs) or ``TAKEN``
(another job runs the step: this one leaves it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from uuid import UUID

import msgspec

from agentsvc_core.entities.runner import Runner, RunnerRun, StepRun
from agentsvc_core.errors import DomainError, NotFound
from agentsvc_core.ports import Clock, ThreadNews
from agentsvc_core.ports.event_webhooks import EventPublisher, NoEvents
from agentsvc_core.ports.jobs import Again
from agentsvc_core.ports.runners import RunnerStore
from agentsvc_core.use_cases.event_webhooks.payloads import run_data, run_event
from agentsvc_core.use_cases.runners.budgets import BudgetCheck, Budgets
from agentsvc_core.use_cases.runners.runs import read_payload, save_run
from agentsvc_core.use_cases.runners.trace import RunTraces
from agentsvc_core.use_cases.runners.transitions import (
    TAKEN,
    Busy,
    Failed,
    Refused,
    StepEnd,
    begun,
    failed_internally,
    over_budget,
    start_of,
    step_ended,
    step_failed,
    step_started,
    succeeded,
    touched,
)
from agentsvc_core.use_cases.runners.work import StepWork

__all__ = ["BUSY_RETRY_S", "MAX_ATTEMPTS", "EngineSettings", "RunnerEngine"]

log = logging.getLogger("agentsvc.runners")

MAX_ATTEMPTS = 3  # starts of one step (a killed process's step is started again)
BUSY_RETRY_S = 2.0  # a thread still busy with an earlier attempt's turn: try again then
STEP_DEFECT = "the step failed (an internal error; see the logs)"

# What a pass of the job came to: the run as it left it (None: it is gone, or
# not this job's to run), the job again later, or the step left to another job.
Pass = RunnerRun | Again | Refused | None


class EngineSettings(msgspec.Struct, frozen=True, kw_only=True):
    """``stale_after``: a running step's run not renewed for this long has lost its
    job (a killed process): another job may start the step again."""

    stale_after: timedelta = timedelta(seconds=45)


class RunnerEngine:
    def __init__(
        self,
        store: RunnerStore,
        clock: Clock,
        work: StepWork,
        budgets: Budgets,
        traces: RunTraces,
        settings: EngineSettings | None = None,
        *,
        events: EventPublisher | None = None,
        news: ThreadNews | None = None,
    ) -> None:
        """``events``: told when a run succeeds, pauses or fails (event webhooks);
        ``news``: the runs' followers' (``events.RunFeed``)."""
        self._news = news
        self._store = store
        self._events = events or NoEvents()
        self._clock = clock
        self._work = work
        self._budgets = budgets
        self._traces = traces
        self._stale = (settings or EngineSettings()).stale_after

    # --- the job ------------------------------------------------------------------

    async def execute(self, payload: bytes) -> Again | None:
        """The ``runner.run`` job: run the run's remaining steps. ``Again``: the
        queue runs this job again after the delay, under its key."""
        org, run_id = read_payload(payload)
        try:
            went = await self._execute(org, run_id)
        except Exception:
            log.exception("run %s failed", run_id)
            went = await self._change(org, run_id, failed_internally)
        if isinstance(went, Again):
            # the run's lease renewed while its job waits (the sweep leaves it alone)
            await self._change(org, run_id, touched)
            return went
        if isinstance(went, RunnerRun):
            await self._tell(went)
        if isinstance(went, RunnerRun) and went.ended:
            await self._traces.record(went)
        elif isinstance(went, RunnerRun) and went.status == "queued":
            return Again(0.0)  # resumed meanwhile
        return None

    async def _tell(self, run: RunnerRun) -> None:
        """The run's event, once per state (a pause at another step is another)."""
        type_ = run_event(run)
        if type_ is not None:
            key = f"{run.id}:{run.status}:{run.cursor}"
            await self._events.publish(run.org_id, type_, run_data(run), key=key)

    async def _change(
        self, org: str, run_id: UUID, change: Callable[..., RunnerRun | Refused | None]
    ) -> RunnerRun | Refused:
        run = await self._store.get_run(org, run_id)
        now = self._clock.now()
        return await save_run(self._store, run, lambda r: change(r, now), self._news)

    async def _execute(self, org: str, run_id: UUID) -> Pass:
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
            if await self._earlier_running(run):
                return Again(BUSY_RETRY_S)
            run = await self._begin(run, runner)
        while run.status == "running":
            if run.cursor >= len(run.pipeline):
                return await self._save(run, succeeded)
            went = await self._step(run, runner)
            if not isinstance(went, RunnerRun):
                return went
            run = went
        return run

    async def _earlier_running(self, run: RunnerRun) -> bool:
        """``overlap: queue``: a cron run waits for the earlier runs of its trigger."""
        if run.trigger_id is None or run.trigger_kind != "cron":
            return False
        earlier = await self._store.runs(run.org_id, runner_id=run.runner_id, status="running")
        return any(r.trigger_id == run.trigger_id and r.id != run.id for r in earlier)

    async def _begin(self, run: RunnerRun, runner: Runner | None) -> RunnerRun:
        # a cron tick's run takes the runner's steps as they are when it starts; the
        # run's trace id: its steps' turns join it
        steps = runner.steps if runner is not None else None
        trace_id = uuid.uuid4().hex
        saved = await self._save(run, lambda r, now: begun(r, now, trace_id, steps))
        assert isinstance(saved, RunnerRun)  # begun refuses nothing
        return saved

    # --- one step -----------------------------------------------------------------

    async def _step(self, run: RunnerRun, runner: Runner | None) -> Pass:
        index = run.cursor
        step, state = run.pipeline[index], run.steps[index]
        retry = state.status == "running"  # started by a job before this one
        if retry:
            if run.updated_at > self._clock.now() - self._stale:
                return TAKEN  # its job is alive (it renews the run's lease): it goes on
            if state.attempt >= MAX_ATTEMPTS:
                error = f"step {step.id!r} was interrupted {state.attempt} times; not again"
                return await self._save(run, lambda r, now: step_failed(r, index, error, now))
        ready = await self._prepare(run, runner, index)
        if not isinstance(ready, tuple):
            return ready  # paused or failed before it started
        started, budget = ready
        saved = await save_run(
            self._store, run, lambda r: step_started(r, index, started, expect=state), self._news
        )
        if not isinstance(saved, RunnerRun) or saved.status != "running":
            return saved  # another job started the step meanwhile, or a cancel came
        end = await self._attempt(saved, runner, index, started, budget, retry)
        if isinstance(end, Busy):
            # no attempt was made: the step waits as it was (unless taken meanwhile)
            await save_run(
                self._store,
                saved,
                lambda r: step_started(r, index, state, expect=started),
                self._news,
            )
            return Again(BUSY_RETRY_S)
        # the share of a limit used with what this step spent
        warning = budget.warning(end.tokens, end.cost_usd) if budget is not None else None
        pause = budget is None or budget.pauses
        return await self._save(
            saved,
            lambda r, now: step_ended(
                r, index, started, end, warning=warning, pause=pause, now=now
            ),
        )

    async def _prepare(
        self, run: RunnerRun, runner: Runner | None, index: int
    ) -> tuple[StepRun, BudgetCheck | None] | RunnerRun | Refused:
        """The step's start (its budget checked, an agent step's thread made), or
        the run as it ended before the step could start."""
        step, state = run.pipeline[index], run.steps[index]
        try:
            # every step, whatever its kind: a run that has reached a limit stops
            # here (the step that crossed it ran to its end)
            budget = await self._budgets.check(run, runner)
            why = None if budget is None else budget.why()
            if budget is not None and why is not None:
                warning, pause = budget.warning(), budget.pauses
                return await self._save(
                    run, lambda r, now: over_budget(r, index, why, warning, pause=pause, now=now)
                )
            started = start_of(state, self._clock.now())
            if step.kind == "agent" and started.thread_id is None:
                thread = await self._work.thread(run, step)
                started = msgspec.structs.replace(started, thread_id=thread)
        except DomainError as exc:  # an agent gone since the runner was saved, say
            error = f"step {step.id!r}: {exc.detail}"
            return await self._save(run, lambda r, now: step_failed(r, index, error, now))
        return started, budget

    async def _attempt(
        self,
        run: RunnerRun,
        runner: Runner | None,
        index: int,
        started: StepRun,
        budget: BudgetCheck | None,
        retry: bool,
    ) -> StepEnd | Busy:
        """The step's work, its run's lease renewed meanwhile; a domain error is
        the step's failure, any other exception a defect (logged)."""
        step = run.pipeline[index]
        try:
            async with self._lease(run):
                return await self._work.do(run, runner, step, started, budget, retry)
        except DomainError as exc:
            return Failed(error=exc.detail)
        except Exception:
            log.exception("step %s of run %s failed", step.id, run.id)
            return Failed(error=STEP_DEFECT)

    @contextlib.asynccontextmanager
    async def _lease(self, run: RunnerRun) -> AsyncIterator[None]:
        """While a step runs, the run's ``updated_at`` is renewed (a quarter of the
        stale time): the sweep queues again, and another job takes over, only a run
        whose job stopped renewing it (a killed process)."""

        async def renew() -> None:
            while True:
                await asyncio.sleep(self._stale.total_seconds() / 4)
                try:
                    await self._change(
                        run.org_id, run.id, lambda r, now: touched(r, now, status="running")
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

    # --- writes ---------------------------------------------------------------------

    async def _save(
        self, run: RunnerRun, change: Callable[..., RunnerRun | Refused | None]
    ) -> RunnerRun | Refused:
        """``change(run, now)`` applied with compare-and-set (``runs.save_run``)."""
        now = self._clock.now()
        return await save_run(self._store, run, lambda r: change(r, now), self._news)
