"""A run's state changes (use_cases/runners/transitions.py), alone: each a pure
function of the run and what happened, answering the run to store, None (nothing
to write) or a refusal."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from agentsvc_core.entities.runner import RunnerRun, Step, StepRun
from agentsvc_core.use_cases.runners.transitions import (
    INTERNAL_ERROR,
    NOT_ACTIVE,
    NOT_PAUSED,
    TAKEN,
    Done,
    Failed,
    OverBudget,
    Refused,
    begun,
    cancelled,
    failed_internally,
    next_index,
    over_budget,
    resumed,
    start_of,
    step_ended,
    step_failed,
    step_started,
    succeeded,
    touched,
    turn_noted,
)

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
NOW = T0 + timedelta(minutes=5)
PIPELINE = (
    Step(id="a", kind="agent", agent_id=uuid.uuid4(), prompt="go"),
    Step(id="c", kind="condition", expression="`true`", if_true="z", if_false="stop"),
    Step(id="w", kind="webhook", url="https://hooks.example.com/"),
    Step(id="z", kind="agent", agent_id=uuid.uuid4(), prompt="end"),
)
STATUSES = ("queued", "running", "paused", "succeeded", "failed", "cancelled")


def a_run(status: str = "running", **over: Any) -> RunnerRun:
    run = RunnerRun(
        id=uuid.uuid4(),
        org_id="org-t",
        runner_id=uuid.uuid4(),
        agent_id=None,
        trigger_id=None,
        trigger_kind="api",
        status="queued",
        input={"topic": "otters"},
        pipeline=PIPELINE,
        steps=tuple(StepRun(step_id=s.id) for s in PIPELINE),
        created_at=T0,
        updated_at=T0,
    )
    return msgspec.structs.replace(run, status=status, **over)


def with_state(run: RunnerRun, index: int, **fields: Any) -> RunnerRun:
    steps = list(run.steps)
    steps[index] = msgspec.structs.replace(steps[index], **fields)
    return msgspec.structs.replace(run, steps=tuple(steps))


def started_at(run: RunnerRun, index: int, at: datetime = T0) -> tuple[RunnerRun, StepRun]:
    """The run with step ``index`` started at ``at`` (its first attempt)."""
    state = start_of(run.steps[index], at)
    return with_state(run, index, **msgspec.structs.asdict(state)), state


# --- the run ----------------------------------------------------------------------


def test_a_queued_run_begins_with_its_start_time_trace_and_the_runners_steps() -> None:
    empty = a_run("queued", pipeline=(), steps=())
    run = begun(empty, NOW, "t" * 32, PIPELINE)
    assert run is not None
    assert (run.status, run.started_at, run.trace_id) == ("running", NOW, "t" * 32)
    assert run.pipeline == PIPELINE
    assert [(s.step_id, s.status) for s in run.steps] == [(s.id, "pending") for s in PIPELINE]
    assert run.updated_at == T0  # only the start is written


def test_a_run_begun_again_keeps_its_start_trace_and_pipeline() -> None:
    first = a_run("queued", started_at=T0, trace_id="first")
    run = begun(first, NOW, "second", (PIPELINE[0],))
    assert run is not None
    assert (run.started_at, run.trace_id, run.pipeline) == (T0, "first", PIPELINE)


def test_a_run_without_steps_given_keeps_its_own() -> None:
    run = begun(a_run("queued"), NOW, "t", None)
    assert run is not None
    assert run.pipeline == PIPELINE


@pytest.mark.parametrize("status", [s for s in STATUSES if s != "queued"])
def test_only_a_queued_run_begins(status: str) -> None:
    assert begun(a_run(status), NOW, "t", PIPELINE) is None


@pytest.mark.parametrize("status", STATUSES)
def test_touched_renews_the_lease_of_any_run_or_of_a_status(status: str) -> None:
    run = a_run(status)
    assert touched(run, NOW) == msgspec.structs.replace(run, updated_at=NOW)
    only_running = touched(run, NOW, status="running")
    assert only_running == (
        msgspec.structs.replace(run, updated_at=NOW) if status == "running" else None
    )


@pytest.mark.parametrize("status", STATUSES)
def test_a_running_run_succeeds(status: str) -> None:
    run = a_run(status)
    done = succeeded(run, NOW)
    if status != "running":
        assert done is None
        return
    assert done == msgspec.structs.replace(run, status="succeeded", ended_at=NOW, updated_at=NOW)


@pytest.mark.parametrize("pause", [True, False])
def test_a_limit_reached_before_a_step_pauses_or_fails_the_run(pause: bool) -> None:
    run = over_budget(
        a_run(), 1, "the run has used 12 tokens of its 10", "120% of x", pause=pause, now=NOW
    )
    assert run is not None
    assert run.error == "the run has used 12 tokens of its 10"
    assert run.budget_warning == "120% of x"
    assert run.updated_at == NOW
    if pause:
        assert (run.status, run.paused_reason, run.ended_at) == ("paused", "budget", None)
    else:
        assert (run.status, run.paused_reason, run.ended_at) == ("failed", None, NOW)
    assert over_budget(a_run("paused"), 1, "why", None, pause=pause, now=NOW) is None


@pytest.mark.parametrize("pause", [True, False])
def test_a_limit_reached_before_a_retry_puts_its_step_back_to_wait(pause: bool) -> None:
    died, state = started_at(a_run(), 1)  # an attempt whose job died in the step
    first_done = with_state(died, 0, status="succeeded")
    run = over_budget(first_done, 1, "over", None, pause=pause, now=NOW)
    assert run is not None
    assert run.steps[1] == msgspec.structs.replace(state, status="pending")
    assert run.steps[0] == first_done.steps[0]
    assert run.steps[2:] == first_done.steps[2:]
    # a step that never started is left as it is
    fresh = over_budget(a_run(), 1, "over", None, pause=pause, now=NOW)
    assert fresh is not None
    assert fresh.steps == a_run().steps


def test_a_step_that_fails_before_its_work_fails_the_run() -> None:
    run, _ = started_at(a_run(), 1)
    failed = step_failed(run, 1, "step 'c': gone", NOW)
    assert failed is not None
    assert (failed.status, failed.error, failed.ended_at, failed.updated_at) == (
        "failed",
        "step 'c': gone",
        NOW,
        NOW,
    )
    state = failed.steps[1]
    assert (state.status, state.error, state.ended_at, state.attempt) == (
        "failed",
        "step 'c': gone",
        NOW,
        1,
    )
    assert failed.steps[0] == run.steps[0]
    assert step_failed(a_run("cancelled"), 1, "x", NOW) is None


@pytest.mark.parametrize("status", STATUSES)
def test_a_defect_fails_any_run_that_has_not_ended(status: str) -> None:
    run = a_run(status)
    failed = failed_internally(run, NOW)
    if run.ended:
        assert failed is None
        return
    assert failed == msgspec.structs.replace(
        run, status="failed", error=INTERNAL_ERROR, ended_at=NOW, updated_at=NOW
    )


@pytest.mark.parametrize("status", STATUSES)
def test_cancel_applies_until_the_run_has_ended(status: str) -> None:
    run = a_run(status, paused_reason="budget" if status == "paused" else None)
    got = cancelled(run, NOW)
    if run.ended:
        assert got == NOT_ACTIVE
        return
    assert got == msgspec.structs.replace(
        run, status="cancelled", ended_at=NOW, updated_at=NOW, paused_reason=None
    )


@pytest.mark.parametrize("status", STATUSES)
def test_resume_queues_a_paused_run_with_its_limits_raised(status: str) -> None:
    run = a_run(
        status,
        paused_reason="budget",
        error="over",
        budget_extra_usd=0.5,
        budget_extra_tokens=10,
    )
    got = resumed(run, 1.25, 100, NOW)
    if status != "paused":
        assert got == NOT_PAUSED
        return
    assert isinstance(got, RunnerRun)
    assert (got.status, got.paused_reason, got.error, got.updated_at) == ("queued", None, None, NOW)
    assert (got.budget_extra_usd, got.budget_extra_tokens) == (1.75, 110)


def test_refusals_say_why() -> None:
    assert (TAKEN.why, NOT_ACTIVE.why, NOT_PAUSED.why) == ("taken", "not_active", "not_paused")
    assert Refused("taken") == TAKEN


# --- one step -----------------------------------------------------------------------


def test_an_attempt_starts_a_step_once_more() -> None:
    earlier = StepRun(step_id="a", status="running", attempt=1, error="x", thread_id=uuid.uuid4())
    state = start_of(earlier, NOW)
    assert (state.status, state.attempt, state.started_at, state.error) == (
        "running",
        2,
        NOW,
        None,
    )
    assert state.thread_id == earlier.thread_id


def test_a_steps_start_is_checkpointed_over_the_state_it_expects() -> None:
    run = a_run()
    state = start_of(run.steps[0], NOW)
    got = step_started(run, 0, state, expect=run.steps[0])
    assert isinstance(got, RunnerRun)
    assert got.steps[0] == state
    assert got.steps[1:] == run.steps[1:]
    assert got.updated_at == NOW  # the start renews the lease


def test_a_state_put_back_without_a_start_time_keeps_the_runs_lease() -> None:
    run, state = started_at(a_run(), 0, NOW)
    got = step_started(run, 0, StepRun(step_id="a"), expect=state)
    assert isinstance(got, RunnerRun)
    assert got.steps[0] == StepRun(step_id="a")
    assert got.updated_at == run.updated_at


def test_a_step_another_job_started_is_taken() -> None:
    run, state = started_at(a_run(), 0)
    again = start_of(state, NOW)
    assert step_started(run, 0, again, expect=StepRun(step_id="a")) == TAKEN


@pytest.mark.parametrize("status", [s for s in STATUSES if s != "running"])
def test_a_step_does_not_start_in_a_run_that_stopped_running(status: str) -> None:
    run = a_run(status)
    assert step_started(run, 0, start_of(run.steps[0], NOW), expect=run.steps[0]) is None


def test_a_turn_is_noted_on_its_own_attempt_only() -> None:
    run, state = started_at(a_run(), 0)
    turn = uuid.uuid4()
    got = turn_noted(run, 0, state, turn)
    assert got is not None
    assert got.steps[0] == msgspec.structs.replace(state, turn_id=turn)
    assert got.updated_at == run.updated_at
    later = with_state(run, 0, attempt=2)
    assert turn_noted(later, 0, state, turn) is None
    moved = with_state(run, 0, started_at=NOW)
    assert turn_noted(moved, 0, state, turn) is None


@pytest.mark.parametrize(
    ("choice", "index"), [("next", 2), ("stop", 4), ("z", 3), ("w", 2), ("gone", 4)]
)
def test_next_index(choice: str, index: int) -> None:
    assert next_index(a_run(), 1, choice) == index


def test_a_step_done_moves_the_cursor_and_gives_the_run_its_output() -> None:
    run, state = started_at(a_run(tokens=5, cost_usd=0.5), 0)
    run = with_state(run, 0, tokens=2, cost_usd=0.25, model="m0")
    state = run.steps[0]
    end = Done(output={"text": "hi"}, tokens=10, cost_usd=0.1, model="m1")
    got = step_ended(run, 0, state, end, warning="90% of x used", pause=True, now=NOW)
    assert isinstance(got, RunnerRun)
    step = got.steps[0]
    assert (step.status, step.output, step.error, step.ended_at) == (
        "succeeded",
        {"text": "hi"},
        None,
        NOW,
    )
    assert (step.tokens, step.cost_usd, step.model) == (12, 0.35, "m1")
    assert (got.tokens, got.cost_usd) == (15, 0.6)
    assert (got.cursor, got.output, got.status) == (1, {"text": "hi"}, "running")
    assert (got.budget_warning, got.updated_at) == ("90% of x used", NOW)
    assert got.steps[1:] == run.steps[1:]


def test_a_step_without_a_model_keeps_the_one_it_had() -> None:
    run, _ = started_at(a_run(), 0)
    run = with_state(run, 0, model="m0")
    got = step_ended(run, 0, run.steps[0], Done(), warning=None, pause=True, now=NOW)
    assert isinstance(got, RunnerRun)
    assert got.steps[0].model == "m0"


def test_a_conditions_jump_skips_the_steps_between_and_leaves_the_output() -> None:
    run, state = started_at(a_run(cursor=1, output="before"), 1)
    end = Done(output={"value": True, "next": "z"}, next="z")
    got = step_ended(run, 1, state, end, warning=None, pause=True, now=NOW)
    assert isinstance(got, RunnerRun)
    assert [s.status for s in got.steps] == ["pending", "succeeded", "skipped", "pending"]
    assert (got.cursor, got.output) == (3, "before")


def test_a_condition_that_stops_skips_the_rest() -> None:
    run, state = started_at(a_run(cursor=1), 1)
    got = step_ended(run, 1, state, Done(next="stop"), warning=None, pause=True, now=NOW)
    assert isinstance(got, RunnerRun)
    assert [s.status for s in got.steps] == ["pending", "succeeded", "skipped", "skipped"]
    assert got.cursor == 4


def test_a_failed_step_fails_the_run_naming_the_step() -> None:
    run, state = started_at(a_run(cursor=2), 2)
    end = Failed(error="the webhook answered 500", output={"status_code": 500}, tokens=3)
    got = step_ended(run, 2, state, end, warning=None, pause=True, now=NOW)
    assert isinstance(got, RunnerRun)
    step = got.steps[2]
    assert (step.status, step.output, step.error, step.tokens) == (
        "failed",
        {"status_code": 500},
        "the webhook answered 500",
        3,
    )
    assert (got.status, got.error, got.ended_at, got.cursor, got.tokens) == (
        "failed",
        "step 'w': the webhook answered 500",
        NOW,
        2,
        3,
    )
    assert [s.status for s in got.steps[3:]] == ["pending"]


@pytest.mark.parametrize("pause", [True, False])
def test_a_step_over_budget_waits_pending_and_the_run_pauses_or_fails(pause: bool) -> None:
    run, state = started_at(a_run(), 0)
    end = OverBudget(why="the run has used 12 tokens of its 10", tokens=12, model="m")
    got = step_ended(run, 0, state, end, warning="120% of x used", pause=pause, now=NOW)
    assert isinstance(got, RunnerRun)
    step = got.steps[0]
    assert (step.status, step.output, step.error, step.tokens, step.attempt) == (
        "pending",
        None,
        None,
        12,
        1,
    )
    assert (got.tokens, got.cursor, got.error) == (12, 0, "the run has used 12 tokens of its 10")
    assert got.budget_warning == "120% of x used"
    if pause:
        assert (got.status, got.paused_reason, got.ended_at) == ("paused", "budget", None)
    else:
        assert (got.status, got.paused_reason, got.ended_at) == ("failed", None, NOW)


@pytest.mark.parametrize(
    "end", [Done(output="x", tokens=4), Failed(error="e", tokens=4), OverBudget(why="w", tokens=4)]
)
def test_a_cancelled_run_keeps_what_its_step_spent_and_stays_cancelled(end: Any) -> None:
    run, state = started_at(a_run(), 0)
    run = msgspec.structs.replace(run, status="cancelled", ended_at=T0)
    got = step_ended(run, 0, state, end, warning=None, pause=True, now=NOW)
    assert isinstance(got, RunnerRun)
    assert (got.status, got.ended_at, got.cursor, got.output, got.error) == (
        "cancelled",
        T0,
        0,
        None,
        None,
    )
    assert (got.tokens, got.steps[0].tokens) == (4, 4)


def test_an_attempt_another_job_started_again_is_taken_at_its_end() -> None:
    run, state = started_at(a_run(), 0)
    newer = with_state(run, 0, attempt=2, started_at=NOW)
    assert step_ended(newer, 0, state, Done(), warning=None, pause=True, now=NOW) == TAKEN
    same_attempt_later = with_state(run, 0, started_at=NOW)
    assert (
        step_ended(same_attempt_later, 0, state, Done(), warning=None, pause=True, now=NOW) == TAKEN
    )
