"""A run's state changes, as pure functions: the run as last read and what
happened, to the run to store.

Each answers the changed run, None (nothing to write: the run is left as it is,
say a cancel came first) or a ``Refused`` (the change does not apply, and the
caller must say so: the run has ended, is not paused, or another job started the
step). ``runs.save_run`` applies one with compare-and-set on the run's version,
and applies it again to the run read again when another write came first, so a
change is always judged against the newest run.

The run's life: ``queued`` -> ``begun`` -> ``running``, one step at a time
(``step_started`` then ``step_ended``: the cursor moves on, a condition may skip
steps), to ``succeeded``, or ``failed`` (a step failed, a step was interrupted
too often, a defect), or ``paused`` by a budget (``resumed``: ``queued`` again);
``cancelled`` from any state that has not ended.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import msgspec

from agentsvc_core.entities.runner import NEXT, STOP, RunnerRun, Step, StepRun

__all__ = [
    "INTERNAL_ERROR",
    "MAX_OUTPUT_CHARS",
    "NOT_ACTIVE",
    "NOT_PAUSED",
    "TAKEN",
    "Busy",
    "Done",
    "Failed",
    "OverBudget",
    "Refused",
    "StepEnd",
    "begun",
    "cancelled",
    "failed_internally",
    "next_index",
    "over_budget",
    "resumed",
    "start_of",
    "step_ended",
    "step_failed",
    "step_started",
    "succeeded",
    "touched",
    "turn_noted",
]

INTERNAL_ERROR = "the run failed (an internal error; see the logs)"
MAX_OUTPUT_CHARS = 100_000  # a step's text output kept in the run (the thread has it all)


class Refused(msgspec.Struct, frozen=True):
    """A change that does not apply to the run as it is."""

    why: Literal["taken", "not_active", "not_paused"]


TAKEN = Refused("taken")  # another job started the step again: its writes win
NOT_ACTIVE = Refused("not_active")  # the run has ended
NOT_PAUSED = Refused("not_paused")


# --- what a step's work came to ----------------------------------------------------


class Done(msgspec.Struct, frozen=True, kw_only=True):
    """The step succeeded; ``next``: where a condition goes."""

    output: Any = None
    tokens: int = 0
    cost_usd: float = 0.0
    model: str | None = None
    next: str = NEXT


class Failed(msgspec.Struct, frozen=True, kw_only=True):
    """The step failed (``output``: a webhook's answer that was not a 2xx)."""

    error: str
    output: Any = None
    tokens: int = 0
    cost_usd: float = 0.0
    model: str | None = None


class OverBudget(msgspec.Struct, frozen=True, kw_only=True):
    """A model call of the step found a limit reached (``why``): the step waits,
    pending, for the run to be resumed."""

    why: str
    tokens: int = 0
    cost_usd: float = 0.0
    model: str | None = None


StepEnd = Done | Failed | OverBudget


class Busy(msgspec.Struct, frozen=True):
    """No attempt was made: the step's thread is busy with a turn that is not the
    step's (a user's, on a scheduled task's thread; a killed process's, not yet
    marked interrupted). The step waits as it was."""


# --- the run ----------------------------------------------------------------------


def begun(
    run: RunnerRun, now: datetime, trace_id: str, steps: tuple[Step, ...] | None
) -> RunnerRun | None:
    """A queued run starts running: its start time and trace id kept from an
    earlier start; ``steps`` (a cron tick's runner, as it is now) fill an empty
    pipeline."""
    if run.status != "queued":
        return None
    fields: dict[str, Any] = {"status": "running"}
    if run.started_at is None:
        fields["started_at"] = now
    if run.trace_id is None:
        fields["trace_id"] = trace_id
    if not run.pipeline and steps is not None:
        fields["pipeline"] = steps
        fields["steps"] = tuple(StepRun(step_id=s.id) for s in steps)
    return msgspec.structs.replace(run, **fields)


def touched(run: RunnerRun, now: datetime, *, status: str | None = None) -> RunnerRun | None:
    """The run's ``updated_at`` renewed (its lease: the sweep leaves a run alone
    while it is renewed), if its status is still ``status`` (any when None)."""
    if status is not None and run.status != status:
        return None
    return msgspec.structs.replace(run, updated_at=now)


def succeeded(run: RunnerRun, now: datetime) -> RunnerRun | None:
    """A running run with no step left has succeeded."""
    if run.status != "running":
        return None
    return msgspec.structs.replace(run, status="succeeded", ended_at=now, updated_at=now)


def over_budget(
    run: RunnerRun, index: int, why: str, warning: str | None, *, pause: bool, now: datetime
) -> RunnerRun | None:
    """A limit reached before step ``index`` could start: the run pauses (``pause``)
    or fails, ``why`` its error. The step waits again (``pending``) if an earlier
    attempt's job died in it, its attempt kept, so a resume starts it at once."""
    if run.status != "running":
        return None
    steps = run.steps
    if steps[index].status == "running":
        waiting = msgspec.structs.replace(steps[index], status="pending")
        steps = (*steps[:index], waiting, *steps[index + 1 :])
    if pause:
        return msgspec.structs.replace(
            run,
            status="paused",
            paused_reason="budget",
            error=why,
            steps=steps,
            updated_at=now,
            budget_warning=warning,
        )
    return msgspec.structs.replace(
        run,
        status="failed",
        error=why,
        steps=steps,
        ended_at=now,
        updated_at=now,
        budget_warning=warning,
    )


def step_failed(run: RunnerRun, index: int, error: str, now: datetime) -> RunnerRun | None:
    """Step ``index`` failed before its work started (its agent is gone, it was
    interrupted too often): the run fails with it."""
    if run.status != "running":
        return None
    steps = list(run.steps)
    steps[index] = msgspec.structs.replace(steps[index], status="failed", error=error, ended_at=now)
    return msgspec.structs.replace(
        run, steps=tuple(steps), status="failed", error=error, ended_at=now, updated_at=now
    )


def failed_internally(run: RunnerRun, now: datetime) -> RunnerRun | None:
    """A defect stopped the run's job: the run fails readably rather than waiting
    for a sweep forever."""
    if run.ended:
        return None
    return msgspec.structs.replace(
        run, status="failed", error=INTERNAL_ERROR, ended_at=now, updated_at=now
    )


def cancelled(run: RunnerRun, now: datetime) -> RunnerRun | Refused:
    """Cancel a queued, running or paused run (``NOT_ACTIVE`` once it has ended)."""
    if run.ended:
        return NOT_ACTIVE
    return msgspec.structs.replace(
        run, status="cancelled", ended_at=now, updated_at=now, paused_reason=None
    )


def resumed(
    run: RunnerRun, raise_usd: float, raise_tokens: int, now: datetime
) -> RunnerRun | Refused:
    """A paused run queued again, its per-run limits raised (``NOT_PAUSED``
    unless it is paused)."""
    if run.status != "paused":
        return NOT_PAUSED
    return msgspec.structs.replace(
        run,
        status="queued",
        paused_reason=None,
        error=None,
        budget_extra_usd=run.budget_extra_usd + raise_usd,
        budget_extra_tokens=run.budget_extra_tokens + raise_tokens,
        updated_at=now,
    )


# --- one step -----------------------------------------------------------------------


def start_of(state: StepRun, now: datetime) -> StepRun:
    """A step's state as an attempt starts it (one more attempt)."""
    return msgspec.structs.replace(
        state, status="running", attempt=state.attempt + 1, started_at=now, error=None
    )


def step_started(
    run: RunnerRun, index: int, state: StepRun, *, expect: StepRun
) -> RunnerRun | Refused | None:
    """Step ``index`` checkpointed as ``state`` (an attempt's start, or the state
    it had put back), if it is still ``expect``: ``TAKEN`` when another job
    started it meanwhile, None when the run stopped running."""
    if run.status != "running":
        return None
    if run.steps[index] != expect:
        return TAKEN
    steps = list(run.steps)
    steps[index] = state
    return msgspec.structs.replace(
        run, steps=tuple(steps), updated_at=state.started_at or run.updated_at
    )


def _same_attempt(current: StepRun, started: StepRun) -> bool:
    return (current.attempt, current.started_at) == (started.attempt, started.started_at)


def turn_noted(run: RunnerRun, index: int, started: StepRun, turn_id: UUID) -> RunnerRun | None:
    """An agent step's turn noted, if the step is still this attempt's (a retry
    then finds that turn, and only it, on the thread)."""
    current = run.steps[index]
    if not _same_attempt(current, started):
        return None
    steps = list(run.steps)
    steps[index] = msgspec.structs.replace(current, turn_id=turn_id)
    return msgspec.structs.replace(run, steps=tuple(steps))


def next_index(run: RunnerRun, index: int, choice: str) -> int:
    """The index of the step after step ``index`` (``len(pipeline)``: the end)."""
    if choice == NEXT:
        return index + 1
    if choice == STOP:
        return len(run.pipeline)
    return next((i for i, s in enumerate(run.pipeline) if s.id == choice), len(run.pipeline))


def _ended_state(state: StepRun, end: StepEnd, now: datetime) -> StepRun:
    match end:
        case Done():
            status, output, error = "succeeded", end.output, None
        case Failed():
            status, output, error = "failed", end.output, end.error
        case OverBudget():
            status, output, error = "pending", None, None
    return msgspec.structs.replace(
        state,
        status=status,
        ended_at=now,
        output=output,
        error=error,
        tokens=state.tokens + end.tokens,
        cost_usd=state.cost_usd + end.cost_usd,
        model=end.model or state.model,
    )


def step_ended(
    run: RunnerRun,
    index: int,
    started: StepRun,
    end: StepEnd,
    *,
    warning: str | None,
    pause: bool,
    now: datetime,
) -> RunnerRun | Refused:
    """Step ``index``'s attempt ``started`` ended as ``end``: its state, what it
    spent (counted whatever the run's status), and the run moved on (a condition's
    jump skips the steps between), failed, or paused or failed by a budget
    (``pause``). ``TAKEN`` when another job started the step again meanwhile."""
    state = run.steps[index]
    if not _same_attempt(state, started):
        return TAKEN
    steps = list(run.steps)
    steps[index] = _ended_state(state, end, now)
    target = next_index(run, index, end.next) if isinstance(end, Done) else index + 1
    for skipped in range(index + 1, target):
        steps[skipped] = msgspec.structs.replace(steps[skipped], status="skipped")
    fields: dict[str, Any] = {
        "steps": tuple(steps),
        "tokens": run.tokens + end.tokens,
        "cost_usd": run.cost_usd + end.cost_usd,
        "budget_warning": warning,
        "updated_at": now,
    }
    if run.status != "running":
        pass  # cancelled meanwhile: what was spent is kept
    elif isinstance(end, OverBudget):
        if pause:
            fields.update(status="paused", paused_reason="budget", error=end.why)
        else:
            fields.update(status="failed", error=end.why, ended_at=now)
    elif isinstance(end, Failed):
        fields.update(status="failed", error=f"step {state.step_id!r}: {end.error}", ended_at=now)
    else:
        if run.pipeline[index].kind != "condition":
            fields["output"] = end.output
        fields["cursor"] = target
    return msgspec.structs.replace(run, **fields)
