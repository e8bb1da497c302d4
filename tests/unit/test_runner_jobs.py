"""What a run's job does and answers (use_cases/runners/engine.py): the run to its
end, ``Again`` for the job queue (a busy thread, an earlier run of its trigger),
nothing when another job runs the step, a step started again once its job's lease
is stale and failed past its attempts, a defect's failure; and cron ticks as the
clock moves. Over the memory storage and the test's clock: no worker, no sleeps."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import msgspec
import pytest

from agentsvc_core.entities.runner import Catchup, RunnerRun, StepRun, Trigger
from agentsvc_core.ports.jobs import Again
from agentsvc_core.ports.webhooks import WebhookAnswer, WebhookCall
from agentsvc_core.use_cases.runners.engine import BUSY_RETRY_S, MAX_ATTEMPTS, STEP_DEFECT
from agentsvc_core.use_cases.runners.runs import RUN_JOB, job_payload, save_run
from agentsvc_core.use_cases.runners.transitions import INTERNAL_ERROR, start_of
from agentsvc_core.use_cases.runners.triggers import TriggerChanges, TriggerDraft
from tests.unit.runner_world import Caller, RunnerWorld, runner_world
from tests.unit.turn_world import ORG, WHO, a_stored_run, store_run

STALE_S = 45  # the engine's default stale time (EngineSettings)


async def _started(rw: RunnerWorld, *kinds: str) -> RunnerRun:
    """A run of a runner of ``kinds``, begun by a job that started its first step
    and was not heard of since (its process was killed, say)."""
    runner = await rw.runner(*kinds)
    run, _ = await rw.runs.start(WHO, runner.id, {})
    now = rw.turn.clock.now()
    state = start_of(run.steps[0], now)
    if kinds[0] == "agent":
        state = msgspec.structs.replace(state, thread_id=rw.turn.thread.id)
    steps = (state, *run.steps[1:])
    running = msgspec.structs.replace(
        run, status="running", started_at=now, trace_id="t" * 32, steps=steps, updated_at=now
    )
    saved = await save_run(rw.turn.storage.runners, run, lambda _: running)
    assert isinstance(saved, RunnerRun)
    return saved


async def _get(rw: RunnerWorld, run: RunnerRun) -> RunnerRun:
    return await rw.turn.storage.runners.get_run(run.org_id, run.id)


async def _job(rw: RunnerWorld, run: RunnerRun) -> Again | None:
    return await rw.engine.execute(job_payload(run.org_id, run.id))


# --- to the end -------------------------------------------------------------------------


async def test_a_run_runs_its_steps_in_order_and_its_trace_is_recorded() -> None:
    rw = await runner_world()
    runner = await rw.runner("agent", "condition", "webhook")
    run, created = await rw.runs.start(WHO, runner.id, {"topic": "otters"})
    assert created
    assert rw.jobs.queued == [(RUN_JOB, job_payload(ORG, run.id), f"run:{run.id}")]
    assert await _job(rw, run) is None
    done = await _get(rw, run)
    assert done.status == "succeeded", done
    assert [(s.status, s.attempt) for s in done.steps] == [("succeeded", 1)] * 3
    assert done.output == done.steps[2].output == {"status_code": 200, "body": "{}", "json": {}}
    assert (done.started_at, done.ended_at) == (rw.turn.clock.now(), rw.turn.clock.now())
    assert done.trace_id is not None
    found = await rw.turn.storage.traces.get_trace(ORG, done.trace_id)
    assert found is not None
    summary, spans, _ = found
    assert (summary.kind, summary.run_id, summary.status) == ("runner_run", run.id, "ok")
    assert [s.name for s in spans if s.name.startswith("step ")] == [
        "step s0-agent",
        "step s1-condition",
        "step s2-webhook",
    ]
    # the job of a run that has ended does nothing
    assert await _job(rw, done) is None
    assert (await _get(rw, run)).version == done.version


async def test_the_job_of_a_run_gone_with_its_runner_does_nothing() -> None:
    rw = await runner_world()
    runner = await rw.runner("condition")
    run, _ = await rw.runs.start(WHO, runner.id, {})
    await rw.runners.delete(WHO, runner.id)
    assert await _job(rw, run) is None


async def test_a_webhook_step_is_signed_with_one_key_for_every_attempt() -> None:
    rw = await runner_world()
    runner = await rw.runner("webhook")
    run = await rw.run(runner)
    (call,) = rw.caller.calls
    assert (call.url, call.method, call.secrets) == (
        "https://hooks.example.com/step",
        "POST",
        ["whsec-test"],
    )
    body = msgspec.json.decode(call.body)
    assert body == {
        "runnerId": str(runner.id),
        "runId": str(run.id),
        "stepId": "s0-webhook",
        "orgId": ORG,
        "input": {},
    }
    assert call.idempotency_key is not None
    assert len(call.idempotency_key) == 64
    other = await rw.run(runner)
    assert rw.caller.calls[1].idempotency_key not in (None, call.idempotency_key)
    assert other.status == "succeeded"


# --- Again: the job runs again later, under its key ----------------------------------


async def _task_run(rw: RunnerWorld) -> tuple[Trigger, RunnerRun]:
    """An agent's scheduled task on the world's thread, fired once."""
    trigger, _ = await rw.runners.new_trigger(
        ORG,
        TriggerDraft(
            kind="cron", cron="0 9 * * *", prompt="daily report", thread_id=rw.turn.thread.id
        ),
        agent_id=rw.turn.agent.id,
    )
    assert trigger.next_fire_at is not None
    rw.turn.clock.at = trigger.next_fire_at
    [run] = await rw.runs.fire_due()
    return trigger, run


async def test_a_task_waits_for_a_users_turn_on_its_thread_with_no_attempt_counted() -> None:
    rw = await runner_world()
    _, run = await _task_run(rw)
    users = a_stored_run(rw.turn)  # a user's reply, running in another process
    await store_run(rw.turn, users)
    rw.turn.clock.advance(1)
    assert await _job(rw, run) == Again(BUSY_RETRY_S)
    waiting = await _get(rw, run)
    assert waiting.status == "running"
    assert waiting.steps[0] == StepRun(step_id="task")  # as it was: no attempt counted
    assert waiting.updated_at == rw.turn.clock.now()  # its lease renewed while it waits
    # the user's reply is not touched
    assert [r.status for r in await rw.turn.runs()] == ["running"]
    assert rw.turn.model.requests == []
    # the reply ends: the task's turn is the next on the thread
    rw.turn.store.runs_of(ORG, rw.turn.thread.id)[0] = msgspec.structs.replace(
        users, status="completed"
    )
    rw.turn.clock.advance(BUSY_RETRY_S)
    assert await _job(rw, run) is None
    done = await _get(rw, run)
    assert done.status == "succeeded", done
    assert done.steps[0].attempt == 1
    assert "daily report" in rw.turn.model.requests[0].messages[-1].content


async def test_a_queued_cron_run_waits_for_the_earlier_run_of_its_trigger() -> None:
    rw = await runner_world()
    runner = await rw.runner("condition")
    trigger, _ = await rw.runners.add_trigger(
        WHO, runner.id, TriggerDraft(kind="cron", cron="0 9 * * *", overlap="queue")
    )
    assert trigger.next_fire_at is not None
    rw.turn.clock.at = trigger.next_fire_at
    [first] = await rw.runs.fire_due()
    first = await _started_from(rw, first)
    nxt = (await rw.turn.storage.runners.get_trigger(ORG, trigger.id)).next_fire_at
    assert nxt is not None
    rw.turn.clock.at = nxt
    [second] = await rw.runs.fire_due()  # overlap: queue, so the tick is not skipped
    assert await _job(rw, second) == Again(BUSY_RETRY_S)
    waiting = await _get(rw, second)
    assert (waiting.status, waiting.updated_at, waiting.started_at) == ("queued", nxt, None)
    # the earlier run ends: this one runs
    rw.turn.clock.advance(STALE_S + 1)
    assert await _job(rw, first) is None
    assert (await _get(rw, first)).status == "succeeded"
    assert await _job(rw, second) is None
    assert (await _get(rw, second)).status == "succeeded"


async def _started_from(rw: RunnerWorld, run: RunnerRun) -> RunnerRun:
    """``run`` made running by a job that died before its first step."""
    saved = await save_run(
        rw.turn.storage.runners,
        run,
        lambda r: msgspec.structs.replace(r, status="running", updated_at=rw.turn.clock.now()),
    )
    assert isinstance(saved, RunnerRun)
    return saved


async def test_a_run_resumed_while_its_step_ran_has_its_job_run_again_at_once() -> None:
    rw = await runner_world()
    runner = await rw.runner("webhook", "condition")
    run, _ = await rw.runs.start(WHO, runner.id, {})
    store = rw.turn.storage.runners

    class PausedAndResumed(Caller):
        async def call(self, call: WebhookCall) -> WebhookAnswer:
            # meanwhile: paused (by another job) and resumed (by an admin)
            now = await store.get_run(ORG, run.id)
            paused = await store.save_run(msgspec.structs.replace(now, status="paused"))
            assert paused is not None
            await rw.runs.resume(WHO, runner.id, run.id)
            return await super().call(call)

    rw.engine._work._webhook._caller = PausedAndResumed()
    assert await _job(rw, run) == Again(0.0)
    again = await _get(rw, run)
    # the step's end is kept (what it did, and spent); the run is queued, cursor on it
    assert (again.status, again.cursor, again.steps[0].status) == ("queued", 0, "succeeded")


# --- another job, a lease gone stale, attempts ---------------------------------------------


async def test_a_step_whose_job_renews_its_lease_is_left_to_that_job() -> None:
    rw = await runner_world()
    run = await _started(rw, "webhook")
    rw.turn.clock.advance(STALE_S - 1)
    assert await _job(rw, run) is None
    assert await _get(rw, run) == run  # nothing written
    assert rw.caller.calls == []


async def test_a_step_whose_lease_went_stale_is_started_again_by_the_next_job() -> None:
    rw = await runner_world()
    run = await _started(rw, "webhook", "condition")
    rw.turn.clock.advance(STALE_S + 1)
    assert await _job(rw, run) is None
    done = await _get(rw, run)
    assert done.status == "succeeded", done
    assert [s.attempt for s in done.steps] == [2, 1]
    assert len(rw.caller.calls) == 1


@pytest.mark.parametrize("attempts", [MAX_ATTEMPTS - 1, MAX_ATTEMPTS])
async def test_a_step_interrupted_too_often_fails_the_run(attempts: int) -> None:
    rw = await runner_world()
    run = await _started(rw, "webhook")
    state = msgspec.structs.replace(run.steps[0], attempt=attempts)
    changed = await save_run(
        rw.turn.storage.runners, run, lambda r: msgspec.structs.replace(r, steps=(state,))
    )
    assert isinstance(changed, RunnerRun)
    run = changed
    rw.turn.clock.advance(STALE_S + 1)
    assert await _job(rw, run) is None
    done = await _get(rw, run)
    if attempts < MAX_ATTEMPTS:
        assert (done.status, done.steps[0].attempt) == ("succeeded", MAX_ATTEMPTS)
        return
    error = f"step 's0-webhook' was interrupted {MAX_ATTEMPTS} times; not again"
    assert (done.status, done.error, done.steps[0].status) == ("failed", error, "failed")
    assert rw.caller.calls == []


async def test_an_agent_steps_retry_takes_the_turn_its_earlier_attempt_finished() -> None:
    rw = await runner_world()
    runner = await rw.runner("agent")
    run = await rw.run(runner)
    assert run.status == "succeeded"
    state = run.steps[0]
    # as if the process died after the turn, before the step's end was stored
    interrupted = msgspec.structs.replace(state, status="running", output=None, ended_at=None)
    again = await save_run(
        rw.turn.storage.runners,
        run,
        lambda r: msgspec.structs.replace(
            r, status="running", steps=(interrupted,), cursor=0, ended_at=None, output=None
        ),
    )
    assert isinstance(again, RunnerRun)
    rw.turn.clock.advance(STALE_S + 1)
    calls = len(rw.turn.model.requests)
    assert await _job(rw, again) is None
    done = await _get(rw, again)
    assert done.status == "succeeded", done
    assert len(rw.turn.model.requests) == calls  # not asked again
    assert done.steps[0].output == state.output
    assert done.steps[0].attempt == 2


# --- failures -------------------------------------------------------------------------------


class Broken(Caller):
    async def call(self, call: WebhookCall) -> WebhookAnswer:
        raise RuntimeError("a defect")


async def test_a_defect_in_a_step_fails_the_step_readably() -> None:
    rw = await runner_world()
    runner = await rw.runner("webhook")
    rw.engine._work._webhook._caller = Broken()
    run = await rw.run(runner)
    assert (run.status, run.steps[0].error) == ("failed", STEP_DEFECT)
    assert run.error == f"step 's0-webhook': {STEP_DEFECT}"


async def test_a_defect_outside_a_step_fails_the_run_readably(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rw = await runner_world()
    runner = await rw.runner("condition", daily_tokens=10)

    async def broken(*_: Any) -> tuple[int, float]:
        raise RuntimeError("a defect")

    monkeypatch.setattr(rw.turn.storage.runners, "spent_since", broken)
    run = await rw.run(runner)
    assert (run.status, run.error, run.ended_at) == ("failed", INTERNAL_ERROR, rw.turn.clock.now())
    assert run.steps[0].status == "pending"


async def test_a_step_whose_agent_is_gone_fails_before_it_starts() -> None:
    rw = await runner_world()
    runner = await rw.runner("agent")
    await rw.turn.storage.agents.delete(ORG, rw.turn.agent.id)
    run = await rw.run(runner)
    assert run.status == "failed"
    assert run.error is not None
    assert run.error.startswith("step 's0-agent': ")
    assert (run.steps[0].status, run.steps[0].error) == ("failed", run.error)


# --- cancel -----------------------------------------------------------------------------------


async def test_cancel_of_a_queued_run_records_it_and_its_job_does_nothing() -> None:
    rw = await runner_world()
    runner = await rw.runner("condition")
    run, _ = await rw.runs.start(WHO, runner.id, {})
    begun = await _started_from(rw, run)
    traced = await save_run(
        rw.turn.storage.runners, begun, lambda r: msgspec.structs.replace(r, trace_id="c" * 32)
    )
    assert isinstance(traced, RunnerRun)
    cancelled = await rw.runs.cancel(WHO, runner.id, run.id)
    assert cancelled.status == "cancelled"
    found = await rw.turn.storage.traces.get_trace(ORG, "c" * 32)
    assert found is not None
    assert found[0].run_status == "cancelled"
    assert await _job(rw, run) is None
    assert (await _get(rw, run)).steps[0].status == "pending"


async def test_cancel_stops_the_agent_step_in_flight() -> None:
    rw = await runner_world()
    run = await _started(rw, "agent")
    turn = a_stored_run(rw.turn)  # the step's turn, in another process
    await store_run(rw.turn, turn)
    stop = rw.turn.stops.watch(turn.id)
    cancelled = await rw.runs.cancel(WHO, run.runner_id or uuid.uuid4(), run.id)
    assert cancelled.status == "cancelled"
    assert stop.is_set()  # the stop was sent to the process that runs the turn
    assert cancelled.trace_id is not None
    # its job records the run when the step ends, not the cancel
    assert await rw.turn.storage.traces.get_trace(ORG, cancelled.trace_id) is None


# --- cron ticks, as the clock moves -----------------------------------------------------------


async def test_an_every_second_cron_fires_each_tick_once_across_two_schedulers() -> None:
    rw = await runner_world(cron_min_interval_s=1)
    runner = await rw.runner("condition")
    trigger, _ = await rw.runners.add_trigger(
        WHO,
        runner.id,
        TriggerDraft(kind="cron", cron="* * * * * *", timezone="Europe/Paris", overlap="queue"),
    )
    start = rw.turn.clock.now()
    for _ in range(5):
        rw.turn.clock.advance(1)
        await rw.runs.fire_due()
        await rw.runs.fire_due()  # a second scheduler, at the same time
    await rw.runners.update_trigger(WHO, runner.id, trigger.id, TriggerChanges(enabled=False))
    rw.turn.clock.advance(1)
    assert await rw.runs.fire_due() == []
    runs = await rw.runs.runs(WHO, runner.id, status=None, before=None, limit=100)
    ticks = sorted(r.scheduled_for for r in runs if r.scheduled_for is not None)
    assert ticks == [start + timedelta(seconds=s) for s in range(1, 6)]
    assert all(r.trigger_id == trigger.id and r.trigger_kind == "cron" for r in runs)
    assert len(rw.jobs.queued) == 5  # each run's job queued once


async def test_a_tick_while_a_run_is_active_is_skipped_with_overlap_skip() -> None:
    rw = await runner_world()
    runner = await rw.runner("condition")
    trigger, _ = await rw.runners.add_trigger(
        WHO, runner.id, TriggerDraft(kind="cron", cron="0 * * * *")
    )
    assert trigger.next_fire_at is not None
    rw.turn.clock.at = trigger.next_fire_at
    [first] = await rw.runs.fire_due()
    rw.turn.clock.advance(3600)
    assert await rw.runs.fire_due() == []  # the first is still queued
    after = await rw.turn.storage.runners.get_trigger(ORG, trigger.id)
    assert after.next_fire_at == trigger.next_fire_at + timedelta(hours=2)
    await rw.execute(first)
    rw.turn.clock.advance(3600)
    assert len(await rw.runs.fire_due()) == 1


@pytest.mark.parametrize(
    ("catchup", "late_s", "fires"),
    [
        ("none", 60, True),
        ("none", 61, False),
        ("once", 3 * 3600, True),
    ],
)
async def test_a_late_tick_runs_only_within_a_minute_unless_catchup_is_once(
    catchup: Catchup, late_s: int, fires: bool
) -> None:
    rw = await runner_world()
    runner = await rw.runner("condition")
    trigger, _ = await rw.runners.add_trigger(
        WHO,
        runner.id,
        TriggerDraft(kind="cron", cron="0 9 * * *", catchup=catchup),
    )
    assert trigger.next_fire_at is not None
    rw.turn.clock.at = trigger.next_fire_at + timedelta(seconds=late_s)
    made = await rw.runs.fire_due()
    assert len(made) == int(fires)
    if fires:
        assert made[0].scheduled_for == trigger.next_fire_at
    # either way the schedule moves on, once
    after = await rw.turn.storage.runners.get_trigger(ORG, trigger.id)
    assert after.last_fired_at == trigger.next_fire_at
    assert after.next_fire_at == trigger.next_fire_at + timedelta(days=1)
