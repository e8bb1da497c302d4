"""Runs of runners (use_cases/runners/runs.py): starting them from the API and
from a trigger's token, what a run's input must be, idempotency keys, the job
each run's start queues, cancel and resume and what they refuse, the sweep of
lost jobs, and what the scheduler decides for a due tick. Over the memory
storage and the test's clock."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import msgspec
import pytest

from agentsvc_core.entities import Principal
from agentsvc_core.entities.runner import RunnerRun, Step, Trigger
from agentsvc_core.errors import InvalidInput, NotFound, PermissionDenied
from agentsvc_core.use_cases.runners.definitions import RunnerDraft
from agentsvc_core.use_cases.runners.runs import (
    LATE_TICK,
    RUN_JOB,
    RunNotActive,
    RunNotPaused,
    job_payload,
    read_payload,
    save_run,
)
from agentsvc_core.use_cases.runners.steps import StepDraft
from agentsvc_core.use_cases.runners.transitions import NOT_PAUSED
from agentsvc_core.use_cases.runners.triggers import MAX_INPUT_BYTES, TriggerDraft
from tests.unit.runner_world import RunnerWorld, runner_world
from tests.unit.turn_world import ORG, WHO

USER = Principal(org_id=ORG, method="jwt", user_id="u-1", role="admin")
MEMBER = Principal(org_id=ORG, method="jwt", user_id="u-2", role="member")
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


async def _runner(rw: RunnerWorld, **draft: Any) -> Any:
    fields: dict[str, Any] = {
        "name": "r",
        "input_schema": SCHEMA,
        "steps": [StepDraft(id="c", kind="condition", expression="`true`")],
        **draft,
    }
    return await rw.runners.create(WHO, RunnerDraft(**fields))


def test_a_jobs_payload_names_the_organization_and_the_run() -> None:
    run_id = uuid.uuid4()
    assert job_payload("org-1", run_id) == f"org-1\n{run_id}".encode()
    assert read_payload(job_payload("org-1", run_id)) == ("org-1", run_id)


# --- starting ----------------------------------------------------------------------------


async def test_a_run_from_the_api_is_queued_with_its_job() -> None:
    rw = await runner_world()
    runner = await _runner(rw)
    run, created = await rw.runs.start(WHO, runner.id, {"n": 1})
    assert created
    assert (run.status, run.trigger_kind, run.trigger_id, run.input) == (
        "queued",
        "api",
        None,
        {"n": 1},
    )
    assert (run.runner_id, run.agent_id, run.pipeline) == (runner.id, None, runner.steps)
    assert [(s.step_id, s.status) for s in run.steps] == [("c", "pending")]
    assert (run.created_at, run.updated_at) == (rw.turn.clock.now(), rw.turn.clock.now())
    assert rw.jobs.queued == [(RUN_JOB, job_payload(ORG, run.id), f"run:{run.id}")]
    assert rw.jobs.delays == [0.0]
    assert await rw.turn.storage.runners.get_run(ORG, run.id) == run
    by_user, _ = await rw.runs.start(USER, runner.id, {"n": 2})
    assert by_user.trigger_kind == "manual"


async def test_a_run_is_started_by_an_admin_of_the_runners_organization() -> None:
    rw = await runner_world()
    runner = await _runner(rw)
    with pytest.raises(PermissionDenied):
        await rw.runs.start(MEMBER, runner.id, {"n": 1})
    with pytest.raises(NotFound):
        await rw.runs.start(Principal(org_id="other", method="api_key"), runner.id, {"n": 1})
    assert rw.jobs.queued == []


async def test_an_idempotency_key_answers_its_earlier_run_and_queues_nothing() -> None:
    rw = await runner_world()
    runner = await _runner(rw)
    first, created = await rw.runs.start(WHO, runner.id, {"n": 1}, "k")
    again, made = await rw.runs.start(WHO, runner.id, {"n": 2}, "k")
    assert (created, made, again.id, first.idempotency_key) == (True, False, first.id, "k")
    assert len(rw.jobs.queued) == 1
    await rw.runs.start(WHO, runner.id, {"n": 1}, "k" * 255)
    for bad in ("", "k" * 256):
        with pytest.raises(InvalidInput) as caught:
            await rw.runs.start(WHO, runner.id, {"n": 1}, bad)
        assert (caught.value.field, caught.value.problem) == (
            "Idempotency-Key",
            "1 to 255 characters",
        )


@pytest.mark.parametrize(
    ("given", "field", "problem"),
    [
        ({}, "input", "does not fit the runner's input_schema: 'n' is a required property"),
        ({"n": "one"}, "input", "does not fit the runner's input_schema: n: 'one' is not"),
        ({"n": 1, "x": "y" * MAX_INPUT_BYTES}, "input", f"at most {MAX_INPUT_BYTES} bytes"),
    ],
)
async def test_a_runs_input_fits_the_runners_schema_and_its_size(
    given: dict[str, Any], field: str, problem: str
) -> None:
    rw = await runner_world()
    runner = await _runner(rw)
    with pytest.raises(InvalidInput) as caught:
        await rw.runs.start(WHO, runner.id, given)
    assert caught.value.field == field
    assert caught.value.problem.startswith(problem)
    assert await rw.turn.storage.runners.runs(ORG, runner_id=runner.id) == []


async def test_an_input_of_exactly_the_bound_is_taken() -> None:
    rw = await runner_world()
    runner = await _runner(rw, input_schema={"type": "object"})
    # {"x":"..."} of exactly MAX_INPUT_BYTES bytes of JSON
    given = {"x": "y" * (MAX_INPUT_BYTES - len('{"x":""}'))}
    assert len(msgspec.json.encode(given)) == MAX_INPUT_BYTES
    _, created = await rw.runs.start(WHO, runner.id, given)
    assert created


async def test_a_runner_without_steps_starts_no_run() -> None:
    rw = await runner_world()
    runner = await _runner(rw, steps=[])
    with pytest.raises(InvalidInput) as caught:
        await rw.runs.start(WHO, runner.id, {"n": 1})
    assert (caught.value.field, caught.value.problem) == ("steps", "the runner has no steps")


async def test_a_tokens_run_takes_the_body_over_the_triggers_input() -> None:
    rw = await runner_world()
    runner = await _runner(rw)
    trigger, token = await rw.runners.add_trigger(
        WHO, runner.id, TriggerDraft(kind="webhook", input={"n": 1, "from": "trigger"})
    )
    assert token is not None
    run, created = await rw.runs.from_token(token, b'{"n": 2}', None, kinds=("webhook",))
    assert created
    assert (run.trigger_kind, run.trigger_id) == ("webhook", trigger.id)
    assert run.input == {"n": 2, "from": "trigger"}
    empty, _ = await rw.runs.from_token(token, b"  \n", None, kinds=("webhook",))
    assert empty.input == {"n": 1, "from": "trigger"}
    for body in (b"[1]", b"{", b'"x"'):
        with pytest.raises(InvalidInput) as caught:
            await rw.runs.from_token(token, body, None, kinds=("webhook",))
        assert caught.value.field == "body"
    with pytest.raises(NotFound):
        await rw.runs.from_token(token, b"", None, kinds=("button",))


async def test_a_tokens_idempotency_keys_are_the_triggers_own() -> None:
    rw = await runner_world()
    runner = await _runner(rw, input_schema={"type": "object"})
    one, token_one = await rw.runners.add_trigger(WHO, runner.id, TriggerDraft(kind="webhook"))
    _, token_two = await rw.runners.add_trigger(WHO, runner.id, TriggerDraft(kind="button"))
    assert token_one is not None
    assert token_two is not None
    first, _ = await rw.runs.from_token(token_one, b"", "k", kinds=("webhook",))
    assert first.idempotency_key == f"{one.id}:k"
    other, created = await rw.runs.from_token(token_two, b"", "k", kinds=("button",))
    assert created
    assert other.id != first.id
    api, created = await rw.runs.start(WHO, runner.id, {}, "k")
    assert created
    again, created = await rw.runs.from_token(token_one, b"", "k", kinds=("webhook",))
    assert (again.id, created) == (first.id, False)
    with pytest.raises(InvalidInput):
        await rw.runs.from_token(token_one, b"", "", kinds=("webhook",))
    assert api.idempotency_key == "k"


# --- reading, cancel, resume ---------------------------------------------------------------


async def test_a_run_is_read_through_its_own_runner_only() -> None:
    rw = await runner_world()
    runner = await _runner(rw)
    other = await _runner(rw)
    run, _ = await rw.runs.start(WHO, runner.id, {"n": 1})
    assert await rw.runs.get(MEMBER, runner.id, run.id) == run
    with pytest.raises(NotFound):
        await rw.runs.get(WHO, other.id, run.id)
    assert await rw.runs.runs(MEMBER, runner.id, status=None, before=None, limit=10) == [run]
    assert await rw.runs.runs(WHO, runner.id, status="running", before=None, limit=10) == []
    with pytest.raises(NotFound):
        await rw.runs.runs(
            Principal(org_id="x", method="api_key"), runner.id, status=None, before=None, limit=1
        )


async def test_cancel_and_resume_are_an_admins_and_refuse_what_does_not_apply() -> None:
    rw = await runner_world()
    runner = await _runner(rw)
    run, _ = await rw.runs.start(WHO, runner.id, {"n": 1})
    with pytest.raises(PermissionDenied):
        await rw.runs.cancel(MEMBER, runner.id, run.id)
    with pytest.raises(PermissionDenied):
        await rw.runs.resume(MEMBER, runner.id, run.id)
    with pytest.raises(RunNotPaused) as not_paused:
        await rw.runs.resume(WHO, runner.id, run.id)
    assert (not_paused.value.code, not_paused.value.detail) == (
        "RUN_NOT_PAUSED",
        "the run is not paused",
    )
    rw.turn.clock.advance(2)
    cancelled = await rw.runs.cancel(WHO, runner.id, run.id)
    assert (cancelled.status, cancelled.ended_at) == ("cancelled", rw.turn.clock.now())
    with pytest.raises(RunNotActive) as ended:
        await rw.runs.cancel(WHO, runner.id, run.id)
    assert (ended.value.code, ended.value.detail) == ("RUN_NOT_ACTIVE", "the run has ended")


async def _paused(rw: RunnerWorld, runner: Any) -> RunnerRun:
    run, _ = await rw.runs.start(WHO, runner.id, {"n": 1})
    saved = await save_run(
        rw.turn.storage.runners,
        run,
        lambda r: msgspec.structs.replace(r, status="paused", paused_reason="budget", error="over"),
    )
    assert isinstance(saved, RunnerRun)
    return saved


async def test_resume_raises_the_runs_limits_and_queues_a_job_of_its_own() -> None:
    rw = await runner_world()
    runner = await _runner(rw)
    paused = await _paused(rw, runner)
    rw.turn.clock.advance(3)
    resumed = await rw.runs.resume(WHO, runner.id, paused.id, raise_usd=1.5, raise_tokens=10)
    assert (resumed.status, resumed.paused_reason, resumed.error) == ("queued", None, None)
    assert (resumed.budget_extra_usd, resumed.budget_extra_tokens) == (1.5, 10)
    assert resumed.updated_at == rw.turn.clock.now()
    assert rw.jobs.queued[-1] == (
        RUN_JOB,
        job_payload(ORG, paused.id),
        f"run:{paused.id}:resume:{resumed.version}",
    )
    assert NOT_PAUSED.why == "not_paused"


@pytest.mark.parametrize(
    ("usd", "tokens", "ok"),
    [
        (0.0, 0, True),
        (1_000_000.0, 10**12, True),
        (-0.01, 0, False),
        (1_000_000.01, 0, False),
        (0.0, -1, False),
        (0.0, 10**12 + 1, False),
    ],
)
async def test_resume_raises_by_bounded_amounts(usd: float, tokens: int, ok: bool) -> None:
    rw = await runner_world()
    runner = await _runner(rw)
    paused = await _paused(rw, runner)
    if ok:
        got = await rw.runs.resume(WHO, runner.id, paused.id, raise_usd=usd, raise_tokens=tokens)
        assert (got.budget_extra_usd, got.budget_extra_tokens) == (usd, tokens)
        return
    with pytest.raises(InvalidInput) as caught:
        await rw.runs.resume(WHO, runner.id, paused.id, raise_usd=usd, raise_tokens=tokens)
    assert caught.value.field == "raiseBudgetUsd"


# --- the sweep -----------------------------------------------------------------------------


async def test_the_sweep_queues_again_the_runs_not_written_for_the_stale_time() -> None:
    rw = await runner_world()
    runner = await _runner(rw)
    old, _ = await rw.runs.start(WHO, runner.id, {"n": 1})
    rw.turn.clock.advance(60)
    fresh, _ = await rw.runs.start(WHO, runner.id, {"n": 2})
    rw.jobs.queued.clear()
    assert await rw.runs.resume_stale(timedelta(seconds=60)) == 0  # old is exactly 60 s old
    rw.turn.clock.advance(1)
    assert await rw.runs.resume_stale(timedelta(seconds=60)) == 1
    assert rw.jobs.queued == [(RUN_JOB, job_payload(ORG, old.id), f"run:{old.id}")]
    assert fresh.id != old.id


async def test_the_sweep_counts_only_the_jobs_it_queued() -> None:
    rw = await runner_world()
    runner = await _runner(rw)
    await rw.runs.start(WHO, runner.id, {"n": 1})
    rw.turn.clock.advance(120)

    async def taken(
        kind: str, payload: bytes, *, key: str | None = None, delay_s: float = 0.0
    ) -> bool:
        return False  # its job still waits or runs

    rw.runs._jobs.enqueue = taken  # type: ignore[method-assign]
    assert await rw.runs.resume_stale(timedelta(seconds=60)) == 0


# --- what the scheduler decides for a due tick -------------------------------------------------


async def _cron(rw: RunnerWorld, **draft: Any) -> Trigger:
    runner = await _runner(rw, input_schema={"type": "object"})
    fields: dict[str, Any] = {"kind": "cron", "cron": "0 9 * * *", "input": {"a": 1}, **draft}
    trigger, _ = await rw.runners.add_trigger(WHO, runner.id, TriggerDraft(**fields))
    return trigger


async def test_a_due_tick_makes_a_run_of_the_runners_steps_when_it_starts() -> None:
    rw = await runner_world()
    trigger = await _cron(rw)
    tick = trigger.next_fire_at
    assert tick is not None
    nxt, run = rw.runs.decide(trigger, False, tick)
    assert nxt == tick + timedelta(days=1)
    assert run is not None
    assert (run.runner_id, run.trigger_id, run.trigger_kind, run.scheduled_for) == (
        trigger.runner_id,
        trigger.id,
        "cron",
        tick,
    )
    assert (run.pipeline, run.steps, run.input, run.agent_id) == ((), (), {"a": 1}, None)


@pytest.mark.parametrize(
    ("late", "catchup", "fires"),
    [
        (LATE_TICK, "none", True),
        (LATE_TICK + timedelta(microseconds=1), "none", False),
        (timedelta(days=3), "once", True),
    ],
)
async def test_a_late_tick_is_skipped_unless_catchup_is_once(
    late: timedelta, catchup: Any, fires: bool
) -> None:
    rw = await runner_world()
    trigger = await _cron(rw, catchup=catchup)
    tick = trigger.next_fire_at
    assert tick is not None
    nxt, run = rw.runs.decide(trigger, False, tick + late)
    assert (run is not None) == fires
    # the next tick is after now, not after the late one
    assert nxt is not None
    assert nxt > tick + late


async def test_a_busy_trigger_skips_its_tick_unless_it_queues() -> None:
    rw = await runner_world()
    skip = await _cron(rw)
    queue = await _cron(rw, overlap="queue")
    assert skip.next_fire_at is not None
    assert queue.next_fire_at is not None
    assert rw.runs.decide(skip, True, skip.next_fire_at)[1] is None
    assert rw.runs.decide(skip, False, skip.next_fire_at)[1] is not None
    assert rw.runs.decide(queue, True, queue.next_fire_at)[1] is not None


async def test_a_schedule_past_its_end_has_no_next_tick() -> None:
    rw = await runner_world()
    trigger = await _cron(rw)
    tick = trigger.next_fire_at
    assert tick is not None
    ending = msgspec.structs.replace(trigger, end_at=tick + timedelta(days=1))
    assert rw.runs.decide(ending, False, tick)[0] == tick + timedelta(days=1)
    ended = msgspec.structs.replace(trigger, end_at=tick + timedelta(hours=23))
    nxt, run = rw.runs.decide(ended, False, tick)
    assert (nxt, run is not None) == (None, True)  # this tick still runs


async def test_an_agents_task_is_a_run_of_one_agent_step_and_needs_a_prompt() -> None:
    rw = await runner_world()
    trigger, _ = await rw.runners.new_trigger(
        ORG,
        TriggerDraft(kind="cron", cron="0 9 * * *", prompt="report", thread_id=rw.turn.thread.id),
        agent_id=rw.turn.agent.id,
    )
    tick = trigger.next_fire_at
    assert tick is not None
    _, run = rw.runs.decide(trigger, False, tick)
    assert run is not None
    assert run.pipeline == (
        Step(id="task", kind="agent", agent_id=rw.turn.agent.id, prompt="report"),
    )
    assert (run.runner_id, run.agent_id, run.thread_id) == (
        None,
        rw.turn.agent.id,
        rw.turn.thread.id,
    )
    assert [s.step_id for s in run.steps] == ["task"]
    silent = msgspec.structs.replace(trigger, prompt="")
    assert rw.runs.decide(silent, False, tick)[1] is None
