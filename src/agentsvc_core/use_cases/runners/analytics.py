"""A runner's analytics (``GET /api/runners/{id}/analytics``): runs, success rate,
tokens and cost over a period, a zero-filled daily series and cost by model, all
read from the runs' rows (each step keeps its model, tokens and cost)."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Literal
from uuid import UUID

import msgspec

from agentsvc_core.entities import Principal
from agentsvc_core.entities.runner import RunnerRun
from agentsvc_core.ports import Clock
from agentsvc_core.ports.runners import RunnerStore

__all__ = ["MAX_RUNS", "PERIODS", "Period", "RunnerAnalytics", "RunnerReport"]

Period = Literal["24h", "7d", "30d", "90d"]
PERIODS: dict[str, timedelta] = {
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
    "90d": timedelta(days=90),
}
MAX_RUNS = 10_000  # the newest runs of the period a report reads (``truncated`` beyond)


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
    truncated: bool


def _report(
    runs: list[RunnerRun], since: datetime, until: datetime
) -> tuple[RunTotals, list[RunDay], list[RunModelCost]]:
    totals = RunTotals()
    days: dict[str, RunDay] = {}
    day = since.astimezone(UTC).date()
    while day <= until.astimezone(UTC).date():
        days[day.isoformat()] = RunDay(date=day.isoformat())
        day += timedelta(days=1)
    models: dict[str, RunModelCost] = defaultdict(lambda: RunModelCost(model=""))
    durations: list[float] = []
    for r in runs:
        totals.runs += 1
        totals.tokens += r.tokens
        totals.cost_usd += r.cost_usd
        if r.status in ("succeeded", "failed", "cancelled", "paused"):
            setattr(totals, r.status, getattr(totals, r.status) + 1)
        else:
            totals.active += 1
        if r.ended and r.ended_at is not None:
            durations.append((r.ended_at - (r.started_at or r.created_at)).total_seconds())
        d = days.get(r.created_at.astimezone(UTC).date().isoformat())
        if d is not None:
            d.runs += 1
            d.succeeded += r.status == "succeeded"
            d.failed += r.status == "failed"
            d.tokens += r.tokens
            d.cost_usd += r.cost_usd
        for s in r.steps:
            if s.model is None:
                continue
            m = models[s.model]
            m.model = s.model
            m.steps += 1
            m.tokens += s.tokens
            m.cost_usd += s.cost_usd
    ended = totals.succeeded + totals.failed + totals.cancelled
    if ended:
        totals.success_rate = round(totals.succeeded / ended, 4)
    if durations:
        totals.avg_duration_ms = int(sum(durations) / len(durations) * 1000)
    totals.cost_usd = round(totals.cost_usd, 10)
    by_model = sorted(models.values(), key=lambda m: (-m.cost_usd, -m.tokens, m.model))
    return totals, list(days.values()), by_model


class RunnerAnalytics:
    def __init__(self, store: RunnerStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    async def report(self, who: Principal, runner_id: UUID, period: str) -> RunnerReport:
        await self._store.get(who.org_id, runner_id)  # NotFound
        until = self._clock.now()
        since = until - PERIODS[period]
        runs = await self._store.runs(
            who.org_id, runner_id=runner_id, since=since, limit=MAX_RUNS + 1
        )
        truncated = len(runs) > MAX_RUNS
        totals, series, by_model = _report(runs[:MAX_RUNS], since, until)
        return RunnerReport(
            runner_id=runner_id,
            period=period,
            since=since,
            until=until,
            totals=totals,
            series=series,
            by_model=by_model,
            truncated=truncated,
        )
