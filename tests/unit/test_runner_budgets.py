"""Runner budgets (docs/runners.md, "Budgets"): checked before every step, whatever
its kind, and before each model call of an agent step. A limit is reached at
equality (spent >= limit); a run that has reached one pauses (or fails) before its
next step; a step that crosses a limit runs to its end, and the run carries the
share of the limit it used once past the soft limit. Each limit is tested on both
sides of its boundary, over the memory storage, a scripted model whose calls
report the tokens a test chooses (a token costs a cent) and the test's clock."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import msgspec
import pytest

from agentsvc_core.entities import Usage
from agentsvc_core.entities.runner import Budget, RunnerRun
from agentsvc_core.use_cases.runners.budgets import BudgetCheck, day_start, reached, share_pct
from agentsvc_core.use_cases.runners.runs import save_run
from tests.unit.runner_world import CENT_A_TOKEN, RunnerWorld, runner_world, spends
from tests.unit.turn_world import ORG, T0, Tools, calls

# the four limits a budget may set
LIMITS = ("max_tokens_per_run", "max_cost_usd_per_run", "daily_tokens", "daily_cost_usd")


def statuses(run: RunnerRun) -> list[str]:
    return [s.status for s in run.steps]


async def _today(rw: RunnerWorld, runner: Any, limit: str, tokens: int) -> None:
    """A daily limit's earlier spending today: a run of the runner that spent
    ``tokens`` (a cent each)."""
    if limit.startswith("daily"):
        await rw.earlier_run(runner, tokens, tokens / 100)


# --- the headline: a run over its limit stops before its next step ----------------


@pytest.mark.parametrize("kind", ["condition", "webhook", "agent"])
async def test_a_run_over_its_limit_pauses_before_its_next_step_whatever_its_kind(
    kind: str,
) -> None:
    rw = await runner_world(spends(33))
    runner = await rw.runner("agent", kind, max_tokens_per_run=20)
    run = await rw.run(runner)
    # the first step crossed the limit and ran to its end; the next never started
    assert (run.status, run.paused_reason, run.tokens) == ("paused", "budget", 33), run
    assert statuses(run) == ["succeeded", "pending"]
    [paused] = rw.events.events
    assert (paused.type, paused.key) == ("run.paused", f"{run.id}:paused:1")
    assert paused.data == {
        "run_id": str(run.id),
        "runner_id": str(runner.id),
        "status": "paused",
        "paused_reason": "budget",
        "error": "the run has used 33 tokens of its 20",
    }
    assert run.steps[1].attempt == 0
    assert run.error == "the run has used 33 tokens of its 20"
    assert run.budget_warning == "165% of max_tokens_per_run used"
    assert (rw.caller.calls, len(rw.turn.model.requests)) == ([], 1)
    # resume raises the run's own limit: the rest runs, and the share is of the new limit
    done = await rw.resume(run, raise_tokens=100)
    assert done.status == "succeeded", done
    assert statuses(done) == ["succeeded", "succeeded"]
    assert done.budget_warning is None  # 33 (or 66) of 120: under 80%
    assert rw.events.types() == ["run.paused", "run.completed"]
    assert len(rw.caller.calls) == (kind == "webhook")


async def test_a_retried_step_over_the_limit_waits_for_the_resume_as_pending() -> None:
    """A step whose job died mid-step is started again by the next job; when the run
    has reached its limit by then, the run pauses and the step goes back to waiting
    (its attempt kept), so the resume runs it at once rather than taking it for the
    step of a job still alive."""
    rw = await runner_world(spends(33))
    runner = await rw.runner("agent", "webhook", max_tokens_per_run=20)
    paused = await rw.run(runner)
    died = msgspec.structs.replace(paused.steps[1], status="running", attempt=1)
    run = await save_run(
        rw.turn.storage.runners,
        paused,
        lambda r: msgspec.structs.replace(
            r, status="running", paused_reason=None, steps=(r.steps[0], died)
        ),
    )
    assert isinstance(run, RunnerRun)
    rw.turn.clock.advance(46)  # its job is gone: the run's lease is stale
    again = await rw.execute(run)
    assert (again.status, again.paused_reason) == ("paused", "budget"), again
    assert (again.steps[1].status, again.steps[1].attempt) == ("pending", 1)
    assert rw.caller.calls == []
    done = await rw.resume(again, raise_tokens=100)
    assert done.status == "succeeded", done
    assert (done.steps[1].status, done.steps[1].attempt) == ("succeeded", 2)
    assert len(rw.caller.calls) == 1


async def test_a_run_whose_last_step_crosses_the_limit_succeeds_with_the_real_share() -> None:
    rw = await runner_world(spends(33))
    runner = await rw.runner("condition", "webhook", "agent", max_tokens_per_run=20)
    run = await rw.run(runner)
    assert run.status == "succeeded", run
    assert statuses(run) == ["succeeded", "succeeded", "succeeded"]
    assert (run.tokens, run.error) == (33, None)
    assert run.budget_warning == "165% of max_tokens_per_run used"


async def test_fail_ends_a_run_over_its_limit_before_its_next_step() -> None:
    rw = await runner_world(spends(11))
    runner = await rw.runner("agent", "webhook", max_tokens_per_run=11, on_exceed="fail")
    run = await rw.run(runner)
    assert (run.status, run.paused_reason) == ("failed", None), run
    assert run.ended_at == rw.turn.clock.now()
    assert statuses(run) == ["succeeded", "pending"]
    assert run.error == "the run has used 11 tokens of its 11"
    assert rw.events.types() == ["run.failed"]
    assert rw.caller.calls == []


# --- each limit at its boundary ---------------------------------------------------

# the first step spends 11 tokens (0.11 USD); a daily limit's runner spent 100 tokens
# (1.00 USD) earlier today. Each limit is set one above, at, and one below (a token,
# or a cent) what the run has spent when its second step (a webhook) is to start.
BOUNDARY = [
    # limit, limit's value, the run goes on, what a pause says, the warning
    ("max_tokens_per_run", 12, True, None, "91%"),
    ("max_tokens_per_run", 11, False, "the run has used 11 tokens of its 11", "100%"),
    ("max_tokens_per_run", 10, False, "the run has used 11 tokens of its 10", "110%"),
    ("max_cost_usd_per_run", 0.12, True, None, "91%"),
    (
        "max_cost_usd_per_run",
        0.11,
        False,
        "the run has cost 0.110000 USD of its 0.110000",
        "100%",
    ),
    (
        "max_cost_usd_per_run",
        0.10,
        False,
        "the run has cost 0.110000 USD of its 0.100000",
        "110%",
    ),
    ("daily_tokens", 112, True, None, "99%"),
    ("daily_tokens", 111, False, "the runner has used 111 tokens today of 111", "100%"),
    ("daily_tokens", 110, False, "the runner has used 111 tokens today of 110", "100%"),
    ("daily_cost_usd", 1.12, True, None, "99%"),
    (
        "daily_cost_usd",
        1.11,
        False,
        "the runner has cost 1.110000 USD today of 1.110000",
        "100%",
    ),
    (
        "daily_cost_usd",
        1.10,
        False,
        "the runner has cost 1.110000 USD today of 1.100000",
        "100%",
    ),
]


@pytest.mark.parametrize(("limit", "value", "goes_on", "why", "share"), BOUNDARY)
async def test_each_limit_is_reached_at_equality(
    limit: str, value: float, goes_on: bool, why: str | None, share: str
) -> None:
    rw = await runner_world(spends(11))
    runner = await rw.runner("agent", "webhook", **{limit: value})
    await _today(rw, runner, limit, 100)
    run = await rw.run(runner)
    assert run.tokens == 11
    assert run.budget_warning == f"{share} of {limit} used"
    if goes_on:
        assert run.status == "succeeded", run
        assert (statuses(run), len(rw.caller.calls)) == (["succeeded", "succeeded"], 1)
    else:
        assert (run.status, run.paused_reason, run.error) == ("paused", "budget", why), run
        assert (statuses(run), rw.caller.calls) == (["succeeded", "pending"], [])


@pytest.mark.parametrize("limit", LIMITS)
@pytest.mark.parametrize(("spent", "warning"), [(79, None), (80, "80%"), (81, "81%")])
async def test_the_soft_limit_warns_from_its_share_with_the_share_used(
    limit: str, spent: int, warning: str | None
) -> None:
    """Each limit is 100 tokens (1.00 USD); a daily one's runner spent 50 earlier today."""
    daily = limit.startswith("daily")
    rw = await runner_world(spends(spent - 50 if daily else spent))
    value = 1.0 if "cost" in limit else 100
    runner = await rw.runner("agent", **{limit: value})
    await _today(rw, runner, limit, 50)
    run = await rw.run(runner)
    assert run.status == "succeeded", run
    assert run.budget_warning == (None if warning is None else f"{warning} of {limit} used")


@pytest.mark.parametrize(("spent", "warning"), [(49, None), (50, "50%")])
async def test_the_soft_limit_is_the_budgets_own(spent: int, warning: str | None) -> None:
    rw = await runner_world(spends(spent))
    runner = await rw.runner("agent", max_tokens_per_run=100, soft_limit_pct=50)
    run = await rw.run(runner)
    assert run.budget_warning == (
        None if warning is None else f"{warning} of max_tokens_per_run used"
    )


# --- the day, the first step, resume, and model calls -------------------------------


@pytest.mark.parametrize(("before_midnight", "counted"), [(False, True), (True, False)])
async def test_a_day_starts_at_midnight_utc_and_a_run_over_it_never_starts(
    before_midnight: bool, counted: bool
) -> None:
    rw = await runner_world(spends(11))
    runner = await rw.runner("agent", daily_tokens=100)
    midnight = day_start(T0)
    at = midnight - timedelta(microseconds=1) if before_midnight else midnight
    await rw.earlier_run(runner, 100, 1.0, created_at=at)
    run = await rw.run(runner)
    if counted:
        assert (run.status, run.error) == ("paused", "the runner has used 100 tokens today of 100")
        assert run.budget_warning == "100% of daily_tokens used"
        assert statuses(run) == ["pending"]
        assert rw.turn.model.requests == []
    else:
        assert (run.status, run.tokens) == ("succeeded", 11), run


async def test_resume_raises_the_runs_own_limits_but_not_the_days() -> None:
    rw = await runner_world(spends(33))
    runner = await rw.runner("agent", "webhook", daily_tokens=20)
    run = await rw.run(runner)
    assert (run.status, run.error) == ("paused", "the runner has used 33 tokens today of 20")
    again = await rw.resume(run, raise_tokens=1000, raise_usd=10.0)
    assert (again.status, again.error) == ("paused", "the runner has used 33 tokens today of 20")
    assert statuses(again) == ["succeeded", "pending"]
    # the next day, the run goes on
    rw.turn.clock.advance(24 * 3600)
    done = await rw.resume(again)
    assert done.status == "succeeded", done
    # (a run counts on the day it was created: today's runs have spent nothing)
    assert done.budget_warning is None


@pytest.mark.parametrize(
    ("limit", "value", "why"),
    [
        ("max_tokens_per_run", 12, None),
        ("max_tokens_per_run", 11, "the run has used 11 tokens of its 11"),
        ("max_cost_usd_per_run", 0.12, None),
        ("max_cost_usd_per_run", 0.11, "the run has cost 0.110000 USD of its 0.110000"),
    ],
)
async def test_a_model_call_of_a_tool_loop_is_not_made_once_the_limit_is_reached(
    limit: str, value: float, why: str | None
) -> None:
    """The first call asks for a tool and spends 11 tokens (0.11 USD); the second
    would answer. The turn's own spending counts before its run's row has it."""
    rw = await runner_world(
        calls("lookup", usage=Usage(input_tokens=6, output_tokens=5)),
        spends(3),
        tools=Tools("lookup"),
    )
    runner = await rw.runner("agent", **{limit: value})
    run = await rw.run(runner)
    if why is not None:
        assert (run.status, run.paused_reason, run.error) == ("paused", "budget", why), run
        assert statuses(run) == ["pending"]  # resume asks again
        assert len(rw.turn.model.requests) == 1
        assert run.tokens == 11
    else:
        assert run.status == "succeeded", run
        assert len(rw.turn.model.requests) == 2
        assert run.tokens == 14


# --- the check itself -------------------------------------------------------------


def _check(
    tokens: int = 0,
    cost: float = 0.0,
    today: tuple[int, float] = (0, 0.0),
    extra: tuple[int, float] = (0, 0.0),
    **budget: Any,
) -> BudgetCheck:
    """The budget against a run that spent ``tokens`` and ``cost``, its limits
    raised by ``extra``, the runner having spent ``today``."""
    run = RunnerRun(
        id=uuid.uuid4(),
        org_id=ORG,
        runner_id=None,
        agent_id=None,
        trigger_id=None,
        trigger_kind="api",
        pipeline=(),
        steps=(),
        status="running",
        input={},
        tokens=tokens,
        cost_usd=cost,
        budget_extra_tokens=extra[0],
        budget_extra_usd=extra[1],
        created_at=T0,
        updated_at=T0,
    )
    return BudgetCheck(Budget(**budget), run, today, CENT_A_TOKEN)


def test_costs_are_compared_to_ten_decimal_places() -> None:
    assert 0.7 + 0.1 < 0.8  # a float sum a cent short of the limit it is equal to
    assert reached(0.7 + 0.1, 0.8)
    assert not reached(0.8 - 1e-9, 0.8)
    # what is below a cost's precision does not count, on either side
    assert reached(0.8 - 4e-11, 0.8)
    assert reached(0.8, 0.8 + 4e-11)
    assert share_pct(0.7 + 0.1, 1.0) == 80
    assert share_pct(0.8 - 4e-9, 1.0) == 80  # 79.9999996%
    assert share_pct(0.8 - 4e-7, 1.0) == 79  # 79.99996%
    assert (reached(20, 20), reached(19, 20)) == (True, False)
    assert (share_pct(33, 20), share_pct(2, 3), share_pct(0, 5)) == (165, 66, 0)


def test_the_check_counts_what_a_turn_spent_beyond_the_runs_row() -> None:
    """``why(tokens, cost)`` is the gate of a model call: the turn's usage so far
    counts with the run's and the day's."""
    check = _check(tokens=10, today=(10, 0.0), max_tokens_per_run=20)
    assert check.why(9) is None
    assert check.why(10) == "the run has used 20 tokens of its 20"
    day = _check(tokens=10, cost=0.1, today=(30, 0.3), daily_cost_usd=0.5)
    assert day.why(0, 0.19) is None
    assert day.why(0, 0.2) == "the runner has cost 0.500000 USD today of 0.500000"
    assert day.warning(0, 0.1) == "80% of daily_cost_usd used"


def test_a_resume_raises_the_per_run_limits_of_the_check_and_of_the_share() -> None:
    assert _check(tokens=99, extra=(80, 0.0), max_tokens_per_run=20).why() is None
    raised = _check(tokens=100, extra=(80, 0.0), max_tokens_per_run=20)
    assert raised.why() == "the run has used 100 tokens of its 100"
    assert _check(tokens=33, extra=(80, 0.0), max_tokens_per_run=20).warning() is None
    assert _check(tokens=80, extra=(80, 0.0), max_tokens_per_run=20).warning() == (
        "80% of max_tokens_per_run used"
    )
    cost = _check(cost=0.5, extra=(0, 0.5), max_cost_usd_per_run=0.1)
    assert cost.why() is None
    assert cost.warning(0, 0.04) == "90% of max_cost_usd_per_run used"  # 0.54 of 0.6
    # the daily limits are not raised
    assert _check(today=(20, 0.0), extra=(100, 1.0), daily_tokens=20).why() == (
        "the runner has used 20 tokens today of 20"
    )


def test_the_warning_names_the_limit_most_used() -> None:
    both: dict[str, Any] = {"max_tokens_per_run": 20, "max_cost_usd_per_run": 1.0}
    assert _check(33, 0.9, **both).warning() == "165% of max_tokens_per_run used"
    assert _check(17, 3.0, **both).warning() == "300% of max_cost_usd_per_run used"
    # a tie: the first in the order the limits are checked
    assert _check(16, 0.8, **both).warning() == "80% of max_tokens_per_run used"
    assert _check(15, 0.79, **both).warning() is None
    # and the first limit reached is the one a pause names
    assert _check(20, 1.0, **both).why() == "the run has used 20 tokens of its 20"


def test_a_zero_limit_is_reached_at_once_and_warns_of_nothing() -> None:
    zero = _check(max_tokens_per_run=0, daily_cost_usd=0.0)
    assert zero.why() == "the run has used 0 tokens of its 0"
    assert zero.warning() is None
    assert _check().why() is None
    assert _check().warning() is None
