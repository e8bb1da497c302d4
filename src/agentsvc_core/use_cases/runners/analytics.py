"""A runner's analytics (``GET /api/runners/{id}/analytics``): runs, success rate,
tokens and cost over a period, a zero-filled daily series and cost by model. The
storage sums the runs' rows where they are kept (``RunnerStore.run_sums``: by day,
and the steps, each with its model, tokens and cost, by model); this module makes
the report of those sums."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Literal
from uuid import UUID

import msgspec

from agentsvc_core.entities import Principal
from agentsvc_core.ports import Clock
from agentsvc_core.ports.runners import RunnerStore, RunSums

__all__ = ["PERIODS", "Period", "RunnerAnalytics", "RunnerReport"]

Period = Literal["24h", "7d", "30d", "90d"]
PERIODS: dict[str, timedelta] = {
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
    "90d": timedelta(days=90),
}


class RunTotals(msgspec.Struct, kw_only=True):
    runs: int = 0
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    paused: int = 0
    active: int = 0  # queued or running
    success_rate: float | None = None  # succeeded / ended (None: none ended)
    tokens: int = 0
    cost_usd: float = 0.0
    avg_duration_ms: int | None = None  # of the ended runs


class RunDay(msgspec.Struct, kw_only=True):
    date: str  # YYYY-MM-DD (UTC)
    runs: int = 0
    succeeded: int = 0
    failed: int = 0
    tokens: int = 0
    cost_usd: float = 0.0


class RunModelCost(msgspec.Struct, kw_only=True):
    model: str
    steps: int = 0
    tokens: int = 0
    cost_usd: float = 0.0


class RunnerReport(msgspec.Struct, kw_only=True):
    runner_id: UUID
    period: str
    since: datetime
    until: datetime
    totals: RunTotals
    series: list[RunDay]
    by_model: list[RunModelCost]
    truncated: bool  # always False: every run of the period is summed


def _series(sums: RunSums, since: datetime, until: datetime) -> list[RunDay]:
    """The period's days, oldest first, each with its runs' sums (zero-filled)."""
    days: dict[date, RunDay] = {}
    day, last = since.astimezone(UTC).date(), until.astimezone(UTC).date()
    while day <= last:
        days[day] = RunDay(date=day.isoformat())
        day += timedelta(days=1)
    for d in sums.days:
        found = days.get(d.day)
        if found is not None:
            found.runs, found.succeeded, found.failed = d.runs, d.succeeded, d.failed
            found.tokens, found.cost_usd = d.tokens, d.cost_usd
    return list(days.values())


def _totals(sums: RunSums) -> RunTotals:
    totals = RunTotals()
    timed, seconds = 0, 0.0
    for d in sums.days:
        totals.runs += d.runs
        totals.succeeded += d.succeeded
        totals.failed += d.failed
        totals.cancelled += d.cancelled
        totals.paused += d.paused
        totals.tokens += d.tokens
        totals.cost_usd += d.cost_usd
        timed += d.timed
        seconds += d.seconds
    totals.active = (
        totals.runs - totals.succeeded - totals.failed - totals.cancelled - totals.paused
    )
    ended = totals.succeeded + totals.failed + totals.cancelled
    if ended:
        totals.success_rate = round(totals.succeeded / ended, 4)
    if timed:
        totals.avg_duration_ms = int(seconds / timed * 1000)
    totals.cost_usd = round(totals.cost_usd, 10)
    return totals


def _by_model(sums: RunSums) -> list[RunModelCost]:
    """The steps' spending by model, the costliest first."""
    models = [
        RunModelCost(model=m.model, steps=m.steps, tokens=m.tokens, cost_usd=m.cost_usd)
        for m in sums.models
    ]
    return sorted(models, key=lambda m: (-m.cost_usd, -m.tokens, m.model))


class RunnerAnalytics:
    def __init__(self, store: RunnerStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    async def report(self, who: Principal, runner_id: UUID, period: str) -> RunnerReport:
        await self._store.get(who.org_id, runner_id)  # NotFound
        until = self._clock.now()
        since = until - PERIODS[period]
        sums = await self._store.run_sums(who.org_id, runner_id, since)
        return RunnerReport(
            runner_id=runner_id,
            period=period,
            since=since,
            until=until,
            totals=_totals(sums),
            series=_series(sums, since, until),
            by_model=_by_model(sums),
            truncated=False,
        )
