"""Runs of runners: starting them (the API, an inbound webhook or button, a cron
tick), reading, cancelling and resuming them (docs/runners.md). What a run does is
``engine.py``'s; this module creates the row and queues the job.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta
from typing import Any, Protocol
from uuid import UUID

import msgspec

from agentsvc_core.entities import Principal
from agentsvc_core.entities.runner import (
    RunEvent,
    Runner,
    RunnerRun,
    Step,
    StepRun,
    Trigger,
    TriggerKind,
)
from agentsvc_core.errors import Conflict, DomainError, InvalidInput, NotFound, PermissionDenied
from agentsvc_core.ports import Clock, ThreadNews
from agentsvc_core.ports.jobs import JobQueue
from agentsvc_core.ports.runners import Firing, RunnerStore
from agentsvc_core.use_cases.runners.definitions import Runners
from agentsvc_core.use_cases.runners.events import RunFeed, run_events
from agentsvc_core.use_cases.runners.trace import RunTraces
from agentsvc_core.use_cases.runners.transitions import Refused, cancelled, resumed
from agentsvc_core.use_cases.runners.triggers import MAX_INPUT_BYTES, next_tick
from agentsvc_core.use_cases.webhook_tools import argument_problem

__all__ = [
    "RUN_JOB",
    "RunNotActive",
    "RunNotPaused",
    "RunnerRuns",
    "TurnStopper",
    "job_payload",
    "new_run",
    "read_payload",
    "save_run",
]

log = logging.getLogger("agentsvc.runners")

RUN_JOB = "runner.run"
MAX_IDEMPOTENCY_KEY = 255
_enc = msgspec.json.Encoder()
_object = msgspec.json.Decoder(dict[str, Any])
# a tick this late (the service was down) is skipped unless catchup is "once"
LATE_TICK = timedelta(minutes=1)


class RunNotPaused(Conflict):
    def __init__(self) -> None:
        super().__init__("the run is not paused", code="RUN_NOT_PAUSED")


class RunNotActive(Conflict):
    def __init__(self) -> None:
        super().__init__("the run has ended", code="RUN_NOT_ACTIVE")


class TurnStopper(Protocol):
    async def stop(self, who: Principal, thread_id: UUID) -> bool:
        """Stop the thread's running turn (``Conversation.stop``)."""
        ...


async def save_run(
    store: RunnerStore,
    run: RunnerRun,
    change: Callable[[RunnerRun], RunnerRun | Refused | None],
    news: ThreadNews | None = None,
) -> RunnerRun | Refused:
    """Apply ``change`` (a function of ``transitions.py``) to the run and store it
    (compare-and-set on its version) with the events it tells (``events.py``),
    reading it again as long as another write comes first; ``news`` carries the
    run's id to its followers after a change with events. ``change`` answering
    None leaves the run as last read (which is answered); a ``Refused`` is
    answered as it is, nothing written."""
    while True:
        changed = change(run)
        if changed is None:
            return run
        if isinstance(changed, Refused):
            return changed
        events = run_events(run, changed)
        saved = await store.save_run(changed, events)
        if saved is not None:
            if events and news is not None:
                # best effort: a follower that misses the word reads the store soon
                with contextlib.suppress(DomainError):
                    await news.publish_news(run.id)
            return saved
        run = await store.get_run(run.org_id, run.id)


def _checked_key(key: str | None) -> str | None:
    if key is not None and not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY:
        raise InvalidInput("Idempotency-Key", f"1 to {MAX_IDEMPOTENCY_KEY} characters")
    return key


def job_payload(org: str, run_id: UUID) -> bytes:
    return f"{org}\n{run_id}".encode()


def read_payload(payload: bytes) -> tuple[str, UUID]:
    org, _, run_id = payload.decode().partition("\n")
    return org, UUID(run_id)


def new_run(
    *,
    org: str,
    runner: Runner | None,
    trigger: Trigger | None,
    kind: TriggerKind,
    input: dict[str, Any],
    now: datetime,
    pipeline: tuple[Step, ...] | None = None,
    agent_id: UUID | None = None,
    thread_id: UUID | None = None,
    idempotency_key: str | None = None,
    scheduled_for: datetime | None = None,
) -> RunnerRun:
    steps = pipeline if pipeline is not None else (runner.steps if runner else ())
    return RunnerRun(
        id=uuid.uuid4(),
        org_id=org,
        runner_id=runner.id if runner else None,
        agent_id=agent_id,
        trigger_id=trigger.id if trigger else None,
        trigger_kind=kind,
        status="queued",
        input=input,
        pipeline=steps,
        steps=tuple(StepRun(step_id=s.id) for s in steps),
        thread_id=thread_id,
        idempotency_key=idempotency_key,
        scheduled_for=scheduled_for,
        created_at=now,
        updated_at=now,
    )


class RunnerRuns:
    def __init__(
        self,
        store: RunnerStore,
        runners: Runners,
        jobs: JobQueue,
        clock: Clock,
        turns: TurnStopper,
        traces: RunTraces,
        news: ThreadNews | None = None,
    ) -> None:
        """``turns``: where a cancelled run's agent step in flight is stopped;
        ``traces``: where a run cancelled with no step in flight is recorded;
        ``news``: the runs' followers' (``events.RunFeed``)."""
        self._news = news
        self._feed = RunFeed(store, news)
        self._store = store
        self._runners = runners
        self._jobs = jobs
        self._clock = clock
        self._turns = turns
        self._traces = traces

    async def enqueue(self, run: RunnerRun, key: str | None = None) -> None:
        """Queue the run's job (``key``: the run's own by default, so queuing a run
        whose job waits or runs does nothing)."""
        await self._jobs.enqueue(
            RUN_JOB, job_payload(run.org_id, run.id), key=key or f"run:{run.id}"
        )

    # --- starting -----------------------------------------------------------------

    async def start(
        self,
        who: Principal,
        runner_id: UUID,
        input: dict[str, Any],
        idempotency_key: str | None = None,
    ) -> tuple[RunnerRun, bool]:
        """A run from the API (``api`` for an API key, ``manual`` for a user): the
        run and whether it is new (False: the idempotency key's earlier run)."""
        if not who.is_admin:
            raise PermissionDenied("runs are started by the organization's admins")
        runner = await self._store.get(who.org_id, runner_id)
        kind: TriggerKind = "api" if who.method == "api_key" else "manual"
        return await self._create(runner, None, kind, input, _checked_key(idempotency_key))

    async def from_token(
        self, token: str, body: bytes, idempotency_key: str | None, *, kinds: tuple[str, ...]
    ) -> tuple[RunnerRun, bool]:
        """A run from an inbound webhook or a button (their token): the body is the
        run's input (a JSON object; empty is ``{}``)."""
        trigger = await self._runners.by_token(token, kinds)
        assert trigger.runner_id is not None  # by_token answers runners' triggers only
        try:
            given = _object.decode(body) if body.strip() else {}
        except msgspec.DecodeError:
            raise InvalidInput("body", "must be a JSON object (the run's input)") from None
        runner = await self._store.get(trigger.org_id, trigger.runner_id)
        # keys are the trigger's own: a public button's token cannot take the keys
        # another trigger's sender will use
        key = _checked_key(idempotency_key)
        key = None if key is None else f"{trigger.id}:{key}"
        return await self._create(runner, trigger, trigger.kind, given, key)

    async def _create(
        self,
        runner: Runner,
        trigger: Trigger | None,
        kind: TriggerKind,
        given: dict[str, Any],
        idempotency_key: str | None,
    ) -> tuple[RunnerRun, bool]:
        if not runner.steps:
            raise InvalidInput("steps", "the runner has no steps")
        run_input = {**(trigger.input if trigger else {}), **given}
        if len(_enc.encode(run_input)) > MAX_INPUT_BYTES:
            raise InvalidInput("input", f"at most {MAX_INPUT_BYTES} bytes of JSON")
        problem = argument_problem(runner.input_schema, run_input)
        if problem is not None:
            raise InvalidInput("input", f"does not fit the runner's input_schema: {problem}")
        run, created = await self._store.add_run(
            new_run(
                org=runner.org_id,
                runner=runner,
                trigger=trigger,
                kind=kind,
                input=run_input,
                now=self._clock.now(),
                idempotency_key=idempotency_key,
            )
        )
        if created:
            await self.enqueue(run)
        return run, created

    # --- cron ---------------------------------------------------------------------

    def decide(self, trigger: Trigger, busy: bool, now: datetime) -> Firing:
        """A due cron trigger's next tick, and its run for this tick (None: skipped
        because a run of it is still active with ``overlap=skip``, the tick is late
        with ``catchup=none``, or the trigger's agent or runner has no step)."""
        tick = trigger.next_fire_at or now
        assert trigger.cron is not None  # due triggers are cron triggers
        nxt: datetime | None = next_tick(trigger.cron, trigger.timezone, max(now, tick))
        if trigger.end_at is not None and nxt is not None and nxt > trigger.end_at:
            nxt = None
        late = tick < now - LATE_TICK and trigger.catchup == "none"
        if late or (busy and trigger.overlap == "skip"):
            return nxt, None
        # an agent's task is a run of one agent step; a runner's tick has no steps
        # yet: the engine takes the runner's steps when the run starts
        pipeline: tuple[Step, ...] = ()
        if trigger.agent_id is not None:
            if not trigger.prompt:
                return nxt, None
            pipeline = (
                Step(id="task", kind="agent", agent_id=trigger.agent_id, prompt=trigger.prompt),
            )
        run = new_run(
            org=trigger.org_id,
            runner=None,
            trigger=trigger,
            kind="cron",
            input=dict(trigger.input),
            now=now,
            pipeline=pipeline,
            agent_id=trigger.agent_id,
            thread_id=trigger.thread_id,
            scheduled_for=tick,
        )
        return nxt, msgspec.structs.replace(run, runner_id=trigger.runner_id)

    async def fire_due(self) -> list[RunnerRun]:
        """Take the due cron ticks (once across every process) and queue their runs."""
        now = self._clock.now()
        created = await self._store.fire_due(now, lambda t, busy: self.decide(t, busy, now))
        for run in created:
            await self.enqueue(run)
        return created

    async def resume_stale(self, stale_after: timedelta) -> int:
        """Queue again the queued and running runs not written for ``stale_after``
        (their job was lost: a process killed between storing a run and queuing it);
        a job still waiting or running keeps its key, so nothing doubles."""
        stale = await self._store.stale_runs(self._clock.now() - stale_after)
        queued = 0
        for org, run_id in stale:
            if await self._jobs.enqueue(RUN_JOB, job_payload(org, run_id), key=f"run:{run_id}"):
                queued += 1
        return queued

    # --- reading and changing -------------------------------------------------------

    async def runs(
        self,
        who: Principal,
        runner_id: UUID,
        *,
        status: str | None,
        before: tuple[datetime, UUID] | None,
        limit: int,
    ) -> list[RunnerRun]:
        await self._store.get(who.org_id, runner_id)
        return await self._store.runs(
            who.org_id, runner_id=runner_id, status=status, before=before, limit=limit
        )

    async def get(self, who: Principal, runner_id: UUID, run_id: UUID) -> RunnerRun:
        run = await self._store.get_run(who.org_id, run_id)
        if run.runner_id != runner_id:
            raise NotFound("run not found")
        return run

    async def events(
        self, who: Principal, runner_id: UUID, run_id: UUID, *, after: int, limit: int
    ) -> tuple[list[RunEvent], int | None]:
        """A page of the run's events, oldest first, and the ``after`` of the next
        page (None: nothing more for now)."""
        await self.get(who, runner_id, run_id)
        return await self._feed.page(who.org_id, run_id, after=after, limit=limit)

    async def follow(
        self, who: Principal, runner_id: UUID, run_id: UUID, after: int, keepalive_s: float
    ) -> AsyncIterator[list[RunEvent] | None]:
        """The run's events live (``RunFeed.follow``), after checking the run is the
        runner's, in the caller's organization (``NotFound`` before the stream)."""
        await self.get(who, runner_id, run_id)
        return self._feed.follow(who.org_id, run_id, after, keepalive_s)

    async def cancel(self, who: Principal, runner_id: UUID, run_id: UUID) -> RunnerRun:
        """Cancel a queued, running or paused run: no further step starts, and the
        agent step in flight is stopped. ``RunNotActive`` when it has ended."""
        if not who.is_admin:
            raise PermissionDenied("runs are managed by the organization's admins")
        now = self._clock.now()
        run = await self.get(who, runner_id, run_id)
        saved = await save_run(self._store, run, lambda r: cancelled(r, now), self._news)
        if isinstance(saved, Refused):
            raise RunNotActive()
        await self._stop_steps(saved)
        return saved

    async def _stop_steps(self, run: RunnerRun) -> None:
        """A cancelled run's agent step in flight: stop its turn (the job records
        the run once the step ends); a run with none in flight has ended here: its
        trace is recorded."""
        if not any(s.status == "running" for s in run.steps):
            await self._traces.record(run)
        for state in run.steps:
            if state.status == "running" and state.thread_id is not None:
                try:
                    await self._turns.stop(Principal.organization(run.org_id), state.thread_id)
                except DomainError as exc:
                    log.warning("could not stop the turn of run %s: %s", run.id, exc.detail)

    async def resume(
        self,
        who: Principal,
        runner_id: UUID,
        run_id: UUID,
        *,
        raise_usd: float = 0.0,
        raise_tokens: int = 0,
    ) -> RunnerRun:
        """Continue a paused run from the step that paused, its per-run limits raised
        by ``raise_*`` (a daily limit still holds). ``RunNotPaused`` otherwise."""
        if not who.is_admin:
            raise PermissionDenied("runs are managed by the organization's admins")
        if not (0 <= raise_usd <= 1_000_000 and 0 <= raise_tokens <= 10**12):
            raise InvalidInput("raiseBudgetUsd", "must not be negative")
        now = self._clock.now()
        run = await self.get(who, runner_id, run_id)
        saved = await save_run(
            self._store, run, lambda r: resumed(r, raise_usd, raise_tokens, now), self._news
        )
        if isinstance(saved, Refused):
            raise RunNotPaused()
        # a key of its own: the job that paused may not have ended yet, and it holds
        # the run's key until it does (two jobs of a run never run one step twice)
        await self.enqueue(saved, key=f"run:{saved.id}:resume:{saved.version}")
        return saved
