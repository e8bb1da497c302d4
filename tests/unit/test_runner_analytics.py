"""A runner's analytics (docs/runners.md, "Analytics"): totals over the period, a
zero-filled daily series that adds up to them, and the agent steps' spending by
model, read from the runs' rows. Over the memory storage and the test's clock
(2026-11-01 12:00 UTC), with several runs a day, so that a day's figures are sums."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agentsvc_core.entities.runner import StepRun
from agentsvc_core.errors import NotFound
from agentsvc_core.use_cases.runners.analytics import RunnerAnalytics
from tests.unit.runner_world import RunnerWorld, runner_world
from tests.unit.turn_world import ORG, T0, WHO


def at(month: int, day: int, hour: int, minute: int = 0, second: int = 0) -> datetime:
    return datetime(2026, month, day, hour, minute, second, tzinfo=UTC)


def step(model: str | None, tokens: int, cost: float) -> StepRun:
    return StepRun(step_id="s", status="succeeded", tokens=tokens, cost_usd=cost, model=model)


# created, status, tokens, cost, seconds it took (None: not ended), its steps
RUNS: list[tuple[datetime, str, int, float, int | None, tuple[StepRun, ...]]] = [
    # the first day of the period (it starts at 2026-10-25 12:00)
    (at(10, 25, 13), "failed", 1, 0.01, 10, ()),
    (at(10, 25, 14), "failed", 2, 0.02, 60, ()),
    (at(10, 30, 9), "paused", 3, 0.03, None, ()),
    # the last second of a day is that day's
    (at(10, 31, 23, 59, 59), "succeeded", 7, 0.07, 20, (step("m-b", 7, 0.07),)),
    # four runs today, two of them succeeded
    (
        at(11, 1, 8),
        "succeeded",
        100,
        1.0,
        30,
        (step("m-a", 60, 0.6), step(None, 0, 0.0), step("m-b", 40, 0.4)),
    ),
    (at(11, 1, 9), "failed", 20, 0.2, 40, (step("m-a", 20, 0.2),)),
    (at(11, 1, 10), "succeeded", 10, 0.1, 50, (step("m-a", 10, 0.1),)),
    (at(11, 1, 11), "running", 5, 0.05, None, ()),
]


async def _runs(rw: RunnerWorld, runner: Any) -> None:
    for created, status, tokens, cost, took, steps in RUNS:
        ended = None if took is None else created + timedelta(seconds=took)
        await rw.earlier_run(
            runner,
            tokens,
            cost,
            status=status,
            created_at=created,
            started_at=created,
            ended_at=ended,
            steps=steps,
        )


async def test_the_daily_series_adds_up_to_the_totals() -> None:
    rw = await runner_world()
    runner = await rw.runner("condition")
    await _runs(rw, runner)
    # outside the report: before the period, and another runner's run today
    await rw.earlier_run(runner, 1000, 10.0, created_at=at(10, 25, 11, 59, 59))
    other = await rw.runner("condition")
    await rw.earlier_run(other, 2000, 20.0, created_at=at(11, 1, 10))
    assert rw.turn.clock.now() == T0

    report = await RunnerAnalytics(rw.turn.storage.runners, rw.turn.clock).report(
        WHO, runner.id, "7d"
    )
    assert (report.since, report.until, report.truncated) == (T0 - timedelta(days=7), T0, False)
    days = {
        d.date: (d.runs, d.succeeded, d.failed, d.tokens, round(d.cost_usd, 10))
        for d in report.series
    }
    assert days == {
        "2026-10-25": (2, 0, 2, 3, 0.03),
        "2026-10-26": (0, 0, 0, 0, 0.0),
        "2026-10-27": (0, 0, 0, 0, 0.0),
        "2026-10-28": (0, 0, 0, 0, 0.0),
        "2026-10-29": (0, 0, 0, 0, 0.0),
        "2026-10-30": (1, 0, 0, 3, 0.03),
        "2026-10-31": (1, 1, 0, 7, 0.07),
        "2026-11-01": (4, 2, 1, 135, 1.35),
    }
    assert [d.date for d in report.series] == sorted(days)  # oldest first

    t = report.totals
    assert (t.runs, t.succeeded, t.failed, t.cancelled, t.paused, t.active) == (8, 3, 3, 0, 1, 1)
    assert (t.tokens, t.cost_usd) == (148, 1.48)
    assert t.success_rate == 0.5  # of the six ended runs
    assert t.avg_duration_ms == 35_000  # (10 + 60 + 20 + 30 + 40 + 50) s / 6
    # the series is the totals, day by day
    assert sum(d.runs for d in report.series) == t.runs
    assert sum(d.succeeded for d in report.series) == t.succeeded
    assert sum(d.failed for d in report.series) == t.failed
    assert sum(d.tokens for d in report.series) == t.tokens
    assert round(sum(d.cost_usd for d in report.series), 10) == t.cost_usd

    # the agent steps' spending by model, the costliest first
    models = [(m.model, m.steps, m.tokens, round(m.cost_usd, 10)) for m in report.by_model]
    assert models == [
        ("m-a", 3, 90, 0.9),
        ("m-b", 2, 47, 0.47),
    ]


async def test_a_period_of_a_day_has_two_dates_and_counts_only_its_runs() -> None:
    rw = await runner_world()
    runner = await rw.runner("condition")
    await _runs(rw, runner)
    report = await RunnerAnalytics(rw.turn.storage.runners, rw.turn.clock).report(
        WHO, runner.id, "24h"
    )
    # from 2026-10-31 12:00: yesterday's last run and today's four
    assert [(d.date, d.runs, d.tokens) for d in report.series] == [
        ("2026-10-31", 1, 7),
        ("2026-11-01", 4, 135),
    ]
    assert (report.totals.runs, report.totals.tokens) == (5, 142)


async def test_no_runs_is_zeros_and_no_rate() -> None:
    rw = await runner_world()
    runner = await rw.runner("condition")
    report = await RunnerAnalytics(rw.turn.storage.runners, rw.turn.clock).report(
        WHO, runner.id, "30d"
    )
    assert len(report.series) == 31
    assert all((d.runs, d.tokens, d.cost_usd) == (0, 0, 0.0) for d in report.series)
    assert (report.totals.runs, report.totals.success_rate, report.totals.avg_duration_ms) == (
        0,
        None,
        None,
    )
    assert report.by_model == []


async def test_another_organizations_runner_is_not_found() -> None:
    rw = await runner_world()
    runner = await rw.runner("condition")
    analytics = RunnerAnalytics(rw.turn.storage.runners, rw.turn.clock)
    stranger = type(WHO)(org_id=f"{ORG}-other", method="api_key")
    with pytest.raises(NotFound):
        await analytics.report(stranger, runner.id, "7d")
