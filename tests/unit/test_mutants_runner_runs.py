"""Tests written from the mutants that survived in runs and their execution
(use_cases/runners/runs.py, engine.py, work.py, trace.py, analytics.py,
budgets.py, expressions.py) and in webhook signing: the words of refusals and
log lines, the edges of the lease, the earlier run a cron run waits for, what a
cancel stops, what a trace leaves out, and the report's sums."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import jmespath
import msgspec
import pytest

from agentsvc_core.entities import Principal
from agentsvc_core.entities.runner import Budget, NewRunEvent, RunnerRun, Step, StepRun
from agentsvc_core.errors import InvalidInput, NotFound, PermissionDenied, StorageError
from agentsvc_core.ports.webhooks import WebhookAnswer, WebhookCall
from agentsvc_core.use_cases.runners.analytics import RunnerAnalytics
from agentsvc_core.use_cases.runners.budgets import BudgetCheck, Budgets, day_start
from agentsvc_core.use_cases.runners.definitions import BudgetChanges, RunnerDraft
from agentsvc_core.use_cases.runners.engine import EngineSettings, RunnerEngine
from agentsvc_core.use_cases.runners.expressions import compile_expression
from agentsvc_core.use_cases.runners.runs import job_payload, new_run, save_run
from agentsvc_core.use_cases.runners.trace import PAYLOAD_CAP, run_trace
from agentsvc_core.use_cases.runners.transitions import Done, Failed, start_of
from agentsvc_core.use_cases.runners.triggers import TriggerDraft
from agentsvc_core.use_cases.runners.work import StepWork, WebhookSteps
from agentsvc_core.use_cases.webhook_signing import checked_headers
from tests.unit.runner_world import CENT_A_TOKEN, Caller, RunnerWorld, runner_world
from tests.unit.turn_world import BOX, ORG, WHO, a_stored_run, store_run

MEMBER = Principal(org_id=ORG, method="jwt", user_id="u", role="member")


async def _get(rw: RunnerWorld, run: RunnerRun) -> RunnerRun:
    return await rw.turn.storage.runners.get_run(ORG, run.id)


# --- runs -------------------------------------------------------------------------------


async def test_refusals_of_runs_say_whose_they_are_and_why() -> None:
    rw = await runner_world()
    runner = await rw.runner("condition")
    with pytest.raises(PermissionDenied) as started:
        await rw.runs.start(MEMBER, runner.id, {})
    assert started.value.detail == "runs are started by the organization's admins"
    run, _ = await rw.runs.start(WHO, runner.id, {})
    for call in (
        rw.runs.cancel(MEMBER, runner.id, run.id),
        rw.runs.resume(MEMBER, runner.id, run.id),
    ):
        with pytest.raises(PermissionDenied) as managed:
            await call
        assert managed.value.detail == "runs are managed by the organization's admins"
    with pytest.raises(InvalidInput) as negative:
        await rw.runs.resume(WHO, runner.id, run.id, raise_usd=-1.0)
    assert negative.value.problem == "must not be negative"
    other = await rw.runner("condition")
    with pytest.raises(NotFound) as elsewhere:
        await rw.runs.get(WHO, other.id, run.id)
    assert elsewhere.value.detail == "run not found"
    _, token = await rw.runners.add_trigger(WHO, runner.id, TriggerDraft(kind="webhook"))
    assert token is not None
    with pytest.raises(InvalidInput) as body:
        await rw.runs.from_token(token, b"[]", None, kinds=("webhook",))
    assert body.value.problem == "must be a JSON object (the run's input)"


async def test_resume_without_a_raise_keeps_the_runs_limits() -> None:
    rw = await runner_world()
    runner = await rw.runner("condition")
    run, _ = await rw.runs.start(WHO, runner.id, {})
    paused = await save_run(
        rw.turn.storage.runners,
        run,
        lambda r: msgspec.structs.replace(
            r, status="paused", budget_extra_usd=0.5, budget_extra_tokens=5
        ),
    )
    assert isinstance(paused, RunnerRun)
    resumed = await rw.runs.resume(WHO, runner.id, run.id)
    assert (resumed.budget_extra_usd, resumed.budget_extra_tokens) == (0.5, 5)


def test_a_run_of_no_runner_and_no_pipeline_has_no_steps() -> None:
    now = datetime(2026, 11, 1, tzinfo=UTC)
    run = new_run(org=ORG, runner=None, trigger=None, kind="api", input={}, now=now)
    assert (run.pipeline, run.steps, run.runner_id, run.created_at) == ((), (), None, now)


async def test_a_due_ticks_run_is_made_at_the_schedulers_now() -> None:
    rw = await runner_world()
    runner = await rw.runner("condition")
    trigger, _ = await rw.runners.add_trigger(
        WHO, runner.id, TriggerDraft(kind="cron", cron="0 9 * * *")
    )
    assert trigger.next_fire_at is not None
    later = trigger.next_fire_at + timedelta(seconds=30)
    _, run = rw.runs.decide(trigger, False, later)
    assert run is not None
    assert (run.created_at, run.updated_at, run.scheduled_for) == (
        later,
        later,
        trigger.next_fire_at,
    )


async def test_the_sweep_counts_every_run_it_queued_again() -> None:
    rw = await runner_world()
    runner = await rw.runner("condition")
    for _ in range(3):
        await rw.runs.start(WHO, runner.id, {})
    rw.turn.clock.advance(120)
    assert await rw.runs.resume_stale(timedelta(seconds=60)) == 3


async def test_runs_are_listed_with_the_filters_given() -> None:
    rw = await runner_world()
    runner = await rw.runner("condition")
    other = await rw.runner("condition")
    made = []
    for _ in range(4):
        run, _ = await rw.runs.start(WHO, runner.id, {})
        made.append(run)
        rw.turn.clock.advance(1)
        await rw.runs.start(WHO, other.id, {})
    newest = list(reversed(made))
    assert await rw.runs.runs(WHO, runner.id, status=None, before=None, limit=2) == newest[:2]
    cursor = (newest[1].created_at, newest[1].id)
    assert await rw.runs.runs(WHO, runner.id, status=None, before=cursor, limit=10) == newest[2:]
    assert await rw.runs.runs(WHO, runner.id, status="queued", before=None, limit=10) == newest


async def test_cancel_stops_only_the_turn_of_a_step_in_flight(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A task's thread is a user's too: a step that ended there leaves the user's
    next turn alone."""
    rw = await runner_world()
    runner = await rw.runner("agent", "agent")
    run, _ = await rw.runs.start(WHO, runner.id, {})
    done = StepRun(step_id="s0-agent", status="succeeded", attempt=1, thread_id=rw.turn.thread.id)
    ran = await save_run(
        rw.turn.storage.runners,
        run,
        lambda r: msgspec.structs.replace(r, status="running", steps=(done, r.steps[1]), cursor=1),
    )
    assert isinstance(ran, RunnerRun)
    users = a_stored_run(rw.turn)
    await store_run(rw.turn, users)
    stop = rw.turn.stops.watch(users.id)
    await rw.runs.cancel(WHO, runner.id, run.id)
    assert not stop.is_set()

    # a stop that fails is logged, and the cancel stands
    run2, _ = await rw.runs.start(WHO, runner.id, {})
    flying = StepRun(step_id="s0-agent", status="running", attempt=1, thread_id=uuid.uuid4())
    await save_run(
        rw.turn.storage.runners,
        run2,
        lambda r: msgspec.structs.replace(r, status="running", steps=(flying, r.steps[1])),
    )
    caplog.set_level(logging.WARNING, logger="agentsvc.runners")
    cancelled = await rw.runs.cancel(WHO, runner.id, run2.id)
    assert cancelled.status == "cancelled"
    (record,) = [r for r in caplog.records if r.name == "agentsvc.runners"]
    assert record.getMessage() == f"could not stop the turn of run {run2.id}: thread not found"


# --- the engine ---------------------------------------------------------------------------


async def _started(rw: RunnerWorld, kind: str, *, age_s: float) -> RunnerRun:
    runner = await rw.runner(kind)
    run, _ = await rw.runs.start(WHO, runner.id, {})
    state = start_of(run.steps[0], rw.turn.clock.now())
    saved = await save_run(
        rw.turn.storage.runners,
        run,
        lambda r: msgspec.structs.replace(
            r, status="running", steps=(state,), updated_at=rw.turn.clock.now()
        ),
    )
    assert isinstance(saved, RunnerRun)
    rw.turn.clock.advance(age_s)
    return saved


async def test_a_lease_exactly_the_stale_time_old_is_stale() -> None:
    rw = await runner_world()
    run = await _started(rw, "webhook", age_s=45)
    await rw.execute(run)
    assert (await _get(rw, run)).steps[0].attempt == 2
    assert len(rw.caller.calls) == 1


async def test_a_cron_runs_steps_are_the_runners_when_it_begins() -> None:
    rw = await runner_world()
    runner = await rw.runner("condition", "webhook")
    trigger, _ = await rw.runners.add_trigger(
        WHO, runner.id, TriggerDraft(kind="cron", cron="0 9 * * *")
    )
    assert trigger.next_fire_at is not None
    rw.turn.clock.at = trigger.next_fire_at
    [run] = await rw.runs.fire_due()
    assert run.pipeline == ()
    done = await rw.execute(run)
    assert done.pipeline == runner.steps
    assert [s.status for s in done.steps] == ["succeeded", "succeeded"]
    assert len(rw.caller.calls) == 1


async def test_only_an_earlier_running_run_of_the_same_cron_trigger_is_waited_for() -> None:
    rw = await runner_world()
    runner = await rw.runner("condition")
    hook, token = await rw.runners.add_trigger(WHO, runner.id, TriggerDraft(kind="webhook"))
    assert token is not None
    first, _ = await rw.runs.from_token(token, b"", None, kinds=("webhook",))
    await save_run(
        rw.turn.storage.runners, first, lambda r: msgspec.structs.replace(r, status="running")
    )
    second, _ = await rw.runs.from_token(token, b"", None, kinds=("webhook",))
    assert await rw.engine.execute(job_payload(ORG, second.id)) is None  # a webhook's: not waited
    assert (await _get(rw, second)).status == "succeeded"
    cron, _ = await rw.runners.add_trigger(
        WHO, runner.id, TriggerDraft(kind="cron", cron="0 9 * * *", overlap="queue")
    )
    assert cron.next_fire_at is not None
    rw.turn.clock.at = cron.next_fire_at
    [tick] = await rw.runs.fire_due()
    # another trigger's run is running: the cron run does not wait for it
    assert await rw.engine.execute(job_payload(ORG, tick.id)) is None
    assert (await _get(rw, tick)).status == "succeeded"
    assert hook.id != cron.id


async def test_a_cancel_just_before_a_steps_start_leaves_the_step_unstarted() -> None:
    rw = await runner_world()
    runner = await rw.runner("webhook")
    run, _ = await rw.runs.start(WHO, runner.id, {})
    store = rw.turn.storage.runners
    save = store.save_run
    cancelled = False

    async def racing(changed: RunnerRun, events: Sequence[NewRunEvent] = ()) -> RunnerRun | None:
        nonlocal cancelled
        if changed.steps[0].status == "running" and not cancelled:
            cancelled = True
            await rw.runs.cancel(WHO, runner.id, run.id)  # written first
        return await save(changed, events)

    store.save_run = racing  # type: ignore[method-assign,assignment]
    assert await rw.engine.execute(job_payload(ORG, run.id)) is None
    after = await _get(rw, run)
    assert (after.status, after.steps[0].status, after.steps[0].attempt) == (
        "cancelled",
        "pending",
        0,
    )
    assert rw.caller.calls == []


class Raising(Caller):
    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    async def call(self, call: WebhookCall) -> WebhookAnswer:
        raise self.error


async def test_a_domain_error_of_a_steps_work_is_its_failure_in_its_own_words() -> None:
    rw = await runner_world()
    runner = await rw.runner("webhook")
    rw.engine._work._webhook._caller = Raising(StorageError("the database is down"))
    run = await rw.run(runner)
    assert run.steps[0].error == "the database is down"
    assert run.error == "step 's0-webhook': the database is down"


async def test_defects_are_logged_with_the_run_and_the_step(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rw = await runner_world()
    runner = await rw.runner("webhook")
    rw.engine._work._webhook._caller = Raising(RuntimeError("boom"))
    caplog.set_level(logging.ERROR, logger="agentsvc.runners")
    run = await rw.run(runner)
    (record,) = caplog.records
    assert record.getMessage() == f"step s0-webhook of run {run.id} failed"
    assert record.exc_info is not None
    caplog.clear()

    async def broken(*_: Any) -> Any:
        raise RuntimeError("boom")

    again, _ = await rw.runs.start(WHO, runner.id, {})
    rw.engine._budgets.check = broken  # type: ignore[method-assign,assignment]
    await rw.execute(again)
    (record,) = caplog.records
    assert record.getMessage() == f"run {again.id} failed"
    assert record.exc_info is not None


async def test_the_lease_is_renewed_while_a_step_runs() -> None:
    """With a stale time of 40 ms the lease is renewed every 10 ms: the step waits
    (with a deadline) until the run's row carries the time the test set."""
    rw = await runner_world()
    runner = await rw.runner("webhook")
    store = rw.turn.storage.runners
    run, _ = await rw.runs.start(WHO, runner.id, {})
    renewed = asyncio.Event()

    class Waiting(Caller):
        async def call(self, call: WebhookCall) -> WebhookAnswer:
            rw.turn.clock.advance(30)
            async with asyncio.timeout(30):
                # (the row has no event to wait on: it is read again and again)
                while (await store.get_run(ORG, run.id)).updated_at != rw.turn.clock.now():  # noqa: ASYNC110
                    await asyncio.sleep(0.005)
            renewed.set()
            return await super().call(call)

    engine = RunnerEngine(
        store,
        rw.turn.clock,
        StepWork(rw.engine._work._agent, WebhookSteps(Waiting(), _Secrets(), BOX)),
        Budgets(store, rw.turn.clock, CENT_A_TOKEN),
        rw.engine._traces,
        EngineSettings(stale_after=timedelta(milliseconds=40)),
    )
    await engine.execute(job_payload(ORG, run.id))
    assert renewed.is_set()
    assert (await _get(rw, run)).status == "succeeded"


class _Secrets:
    async def signing_secrets(self, org: str) -> list[str]:
        return ["s"]


# --- a step's work ---------------------------------------------------------------------------


class Recorded:
    def __init__(self) -> None:
        self.args: list[tuple[Any, ...]] = []

    async def run(self, *args: Any) -> Done:
        self.args.append(args)
        return Done(output="agent")

    async def thread(self, run: RunnerRun, step: Step) -> uuid.UUID:
        return uuid.UUID(int=1)


class Secrets:
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def signing_secrets(self, org: str) -> list[str]:
        self.asked.append(org)
        return ["s"]


def _run(*steps: Step) -> RunnerRun:
    t = datetime(2026, 11, 1, tzinfo=UTC)
    return RunnerRun(
        id=uuid.uuid4(),
        org_id=ORG,
        runner_id=uuid.uuid4(),
        agent_id=None,
        trigger_id=None,
        trigger_kind="api",
        status="running",
        input={"n": 1},
        pipeline=steps,
        steps=tuple(StepRun(step_id=s.id) for s in steps),
        created_at=t,
        updated_at=t,
    )


async def test_each_kind_works_over_the_runs_context() -> None:
    agent, caller, secrets = Recorded(), Caller(), Secrets()
    work = StepWork(agent, WebhookSteps(caller, secrets, BOX))  # type: ignore[arg-type]
    a = Step(id="a", kind="agent", agent_id=uuid.uuid4())
    w = Step(id="w", kind="webhook", url="https://h/", input_mapping={"n": "input.n"})
    c = Step(id="c", kind="condition", expression="input.n", if_true="stop")
    run = _run(a, w, c)
    runner: Any = object()
    state = StepRun(step_id="a")
    assert await work.do(run, runner, a, state, None, True) == Done(output="agent")
    assert agent.args == [(run, runner, a, state, {"input": {"n": 1}, "steps": {}}, None, True)]
    assert isinstance(await work.do(run, runner, w, state, None, False), Done)
    assert msgspec.json.decode(caller.calls[0].body)["input"] == {"n": 1}
    assert secrets.asked == [ORG]
    assert await work.do(run, runner, c, state, None, False) == Done(
        output={"value": 1, "next": "stop"}, next="stop"
    )
    odd = msgspec.structs.replace(c, kind="other")
    assert await work.do(run, runner, odd, state, None, False) == Failed(
        error="unknown step kind 'other'"
    )


def test_a_headers_refusals_name_the_field() -> None:
    for headers in (
        {f"X-{i}": "v" for i in range(33)},
        {"X A": "v"},
        {"X-A": "é"},
        {"X-A": "v" * 8193},
    ):
        with pytest.raises(InvalidInput) as caught:
            checked_headers("steps[w].headers", headers)
        assert caught.value.field.startswith("steps[w].headers")


def test_a_compile_error_gives_the_first_line_of_jmespaths_reason() -> None:
    with pytest.raises(jmespath.exceptions.JMESPathError) as raw:
        jmespath.compile("a ||")
    first = str(raw.value).splitlines()[0]
    with pytest.raises(InvalidInput) as caught:
        compile_expression("f", "a ||")
    assert caught.value.problem == f"not a JMESPath expression: {first}"


# --- traces --------------------------------------------------------------------------------


def test_a_trace_leaves_out_what_did_not_run_and_keeps_what_ran_after_a_jump() -> None:
    t = datetime(2026, 11, 1, tzinfo=UTC)
    a, b, c, d = (Step(id=i, kind="condition") for i in "abcd")
    run = msgspec.structs.replace(
        _run(a, b, c, d),
        status="paused",
        trace_id="f" * 32,
        agent_id=uuid.uuid4(),
        thread_id=uuid.uuid4(),
        steps=(
            StepRun(step_id="a", status="succeeded", attempt=1, started_at=t),
            StepRun(step_id="b", status="skipped"),
            StepRun(step_id="c", status="succeeded", attempt=1, started_at=t),
            # paused by a budget: started, then pending again
            StepRun(step_id="d", status="pending", attempt=1, started_at=t),
        ),
    )
    record = run_trace(run, "n", t)
    assert [s.name for s in record.spans[1:]] == ["step a", "step c"]
    assert (record.summary.agent_id, record.summary.thread_id) == (run.agent_id, run.thread_id)
    with pytest.raises(ValueError, match="zip"):
        run_trace(msgspec.structs.replace(run, steps=run.steps[:3]), "n", t)


def test_a_succeeded_runs_span_has_no_error_and_one_big_input_is_its_size() -> None:
    t = datetime(2026, 11, 1, tzinfo=UTC)
    big = {"x": "y" * PAYLOAD_CAP}
    run = msgspec.structs.replace(
        _run(),
        status="succeeded",
        error="left from a resume",
        trace_id="e" * 32,
        input=big,
        output="ok",
    )
    root = run_trace(run, "n", t).spans[0]
    assert (root.error, root.status) == (None, "ok")
    assert (root.input, root.output, root.original_bytes) == (
        None,
        "ok",
        len(msgspec.json.encode(big)),
    )


# --- budgets ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "now",
    [
        datetime(2026, 11, 1, 13, 14, 15, 161718, tzinfo=UTC),
        datetime(2026, 11, 1, 23, 59, 59, tzinfo=timezone(timedelta(hours=-2))),  # 01:59 UTC
    ],
)
def test_a_day_starts_at_midnight_utc(now: datetime) -> None:
    start = day_start(now)
    assert start == datetime(2026, 11, 1 if now.tzinfo is UTC else 2, tzinfo=UTC)
    assert start.tzinfo is UTC


async def test_a_budget_check_is_made_only_when_a_limit_is_set() -> None:
    rw = await runner_world()
    budgets = Budgets(rw.turn.storage.runners, rw.turn.clock, CENT_A_TOKEN)
    runner = await rw.runners.create(WHO, RunnerDraft(name="r"))
    started = new_run(
        org=ORG, runner=runner, trigger=None, kind="api", input={}, now=rw.turn.clock.now()
    )
    assert await budgets.check(started, None) is None
    assert await budgets.check(started, runner) is None
    every = await rw.runners.set_budget(
        WHO,
        runner.id,
        BudgetChanges(
            max_cost_usd_per_run=1.0, max_tokens_per_run=1, daily_cost_usd=1.0, daily_tokens=1
        ),
    )
    check = await budgets.check(started, every)
    assert isinstance(check, BudgetCheck)
    assert every.budget == Budget(
        max_cost_usd_per_run=1.0, max_tokens_per_run=1, daily_cost_usd=1.0, daily_tokens=1
    )


# --- analytics -----------------------------------------------------------------------------


async def test_the_reports_totals_count_cancelled_runs_and_round_as_said() -> None:
    rw = await runner_world()
    runner = await rw.runner("condition")
    now = rw.turn.clock.now()
    for status, tokens, cost, hours_ago in (
        ("succeeded", 1, 1e-11, 0),
        ("cancelled", 2, 0.0, 0),
        ("cancelled", 3, 0.0, 13),  # yesterday's
        ("running", 4, 0.0, 0),
    ):
        at = now - timedelta(hours=hours_ago)
        await rw.earlier_run(runner, tokens, cost, status=status, created_at=at, started_at=at)
    report = await RunnerAnalytics(rw.turn.storage.runners, rw.turn.clock).report(
        WHO, runner.id, "24h"
    )
    t = report.totals
    assert (t.runs, t.succeeded, t.cancelled, t.active) == (4, 1, 2, 1)
    assert t.success_rate == 0.3333  # of the three ended: four places
    assert t.cost_usd == 0.0  # ten places
    assert (report.runner_id, report.period) == (runner.id, "24h")


async def test_models_of_equal_cost_are_ordered_by_their_tokens_then_name() -> None:
    rw = await runner_world()
    runner = await rw.runner("condition")
    steps = (
        StepRun(step_id="s", model="few", tokens=1, cost_usd=1.0),
        StepRun(step_id="s", model="many", tokens=9, cost_usd=1.0),
        StepRun(step_id="s", model="also-many", tokens=9, cost_usd=1.0),
    )
    await rw.earlier_run(runner, 19, 3.0, steps=steps)
    report = await RunnerAnalytics(rw.turn.storage.runners, rw.turn.clock).report(
        WHO, runner.id, "7d"
    )
    assert [m.model for m in report.by_model] == ["also-many", "many", "few"]


async def test_the_engines_answer_for_a_run_it_cannot_find_is_nothing() -> None:
    rw = await runner_world()
    assert await rw.engine.execute(job_payload(ORG, uuid.uuid4())) is None
