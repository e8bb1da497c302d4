"""Usage analytics (``GET /api/analytics``) under the caller's organization.

Analytics asks storage for grouped sums (``AnalyticsStore``) over one time range
and makes the answer here: totals, a zero-filled series whose points add up to the
totals, and breakdowns by model and by agent.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Self
from uuid import UUID

import msgspec

from agentsvc_core.entities import Principal
from agentsvc_core.errors import InvalidInput
from agentsvc_core.ports import AnalyticsStore, Clock
from agentsvc_core.ports.traces import Bucket, UsageGroup, bucket_start

__all__ = [
    "MAX_POINTS",
    "MAX_RANGE",
    "PERIODS",
    "AgentTotals",
    "Analytics",
    "AnalyticsReport",
    "ModelTotals",
    "SeriesPoint",
    "Totals",
]

PERIODS: dict[str, tuple[timedelta, Bucket]] = {
    "24h": (timedelta(hours=24), "hour"),
    "7d": (timedelta(days=7), "hour"),
    "30d": (timedelta(days=30), "day"),
}
MAX_POINTS = 2000  # a series longer than this is refused (a finer bucket is asked)
MAX_RANGE = timedelta(days=400)
_STEP = {"hour": timedelta(hours=1), "day": timedelta(days=1)}


class Totals(msgspec.Struct, kw_only=True):
    threads: int = 0
    messages: int = 0
    replies: int = 0
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float = 0.0  # the known costs; ``unpriced_calls`` had no price
    unpriced_calls: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    errors: int = 0
    compaction_calls: int = 0
    compaction_cost_usd: float = 0.0
    memory_calls: int = 0  # memory collection after turns (auto_collect)
    memory_cost_usd: float = 0.0
    byok_calls: int = 0
    platform_calls: int = 0

    def add_usage(self, g: UsageGroup) -> None:
        self.model_calls += g.calls
        self.input_tokens += g.input_tokens
        self.output_tokens += g.output_tokens
        self.cached_input_tokens += g.cached_input_tokens
        self.total_tokens += g.input_tokens + g.output_tokens
        self.cost_usd += g.cost_usd
        self.unpriced_calls += g.unpriced
        if g.purpose == "compaction":
            self.compaction_calls += g.calls
            self.compaction_cost_usd += g.cost_usd
        elif g.purpose == "memory":
            self.memory_calls += g.calls
            self.memory_cost_usd += g.cost_usd
        if g.key_source == "byok":
            self.byok_calls += g.calls
        else:
            self.platform_calls += g.calls

    def rounded(self) -> Self:
        self.cost_usd = round(self.cost_usd, 6)
        self.compaction_cost_usd = round(self.compaction_cost_usd, 6)
        self.memory_cost_usd = round(self.memory_cost_usd, 6)
        return self


class SeriesPoint(Totals, kw_only=True):
    start: datetime


class ModelTotals(msgspec.Struct, kw_only=True):
    model: str
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cost_usd: float | None = 0.0  # None: the model has no price


class AgentTotals(Totals, kw_only=True):
    agent_id: UUID


class AnalyticsReport(msgspec.Struct, kw_only=True):
    period: str
    since: datetime
    until: datetime
    granularity: Bucket
    agent_id: UUID | None
    prices_taken: str | None
    # how long the traces themselves are kept (0: none stored, so no replies,
    # messages, tool calls or errors are counted); analytics' sums are kept for good
    trace_retention_days: int
    totals: Totals
    series: list[SeriesPoint]
    by_model: list[ModelTotals]
    by_agent: list[AgentTotals]


class Analytics:
    def __init__(
        self,
        store: AnalyticsStore,
        clock: Clock,
        prices_taken: str | None,
        trace_retention_days: int = 30,
    ) -> None:
        self._store = store
        self._clock = clock
        self._taken = prices_taken
        self._retention = trace_retention_days

    async def roll_up(self) -> int:
        """Fold the rows stored since the last call into the hourly and daily sums
        (the maintenance sweep, every 30 seconds)."""
        return await self._store.roll_up()

    def window(
        self,
        period: str,
        since: datetime | None,
        until: datetime | None,
        granularity: Bucket | None,
    ) -> tuple[datetime, datetime, Bucket]:
        """The time range and bucket of a request (422 for a bad one)."""
        now = self._clock.now()
        if period == "custom":
            if since is None:
                raise InvalidInput("from", "is required with period=custom")
            # whole hours: the hourly sums answer them exactly (from down, to up)
            since = bucket_start(since, "hour")
            until = until or now
            if until != bucket_start(until, "hour") and until < now:
                until = min(bucket_start(until, "hour") + _STEP["hour"], now)
            until = until.astimezone(UTC)
            if since >= until:
                raise InvalidInput("from", "must be before to")
            if until - since > MAX_RANGE:
                raise InvalidInput("from", f"the range is at most {MAX_RANGE.days} days")
            bucket: Bucket = granularity or (
                "hour" if until - since <= timedelta(days=7) else "day"
            )
        else:
            if period not in PERIODS:
                raise InvalidInput("period", "must be one of 24h, 7d, 30d, custom")
            if since is not None or until is not None:
                raise InvalidInput("from", "from and to go with period=custom")
            length, default = PERIODS[period]
            bucket = granularity or default
            # whole buckets, the current one (to now) last: 24h is 24 hours' points
            points = max(1, round(length / _STEP[bucket]))
            until, since = now, bucket_start(now, bucket) - _STEP[bucket] * (points - 1)
        if (until - bucket_start(since, bucket)) / _STEP[bucket] > MAX_POINTS:
            raise InvalidInput(
                "granularity", f"the series would have more than {MAX_POINTS} points"
            )
        return since, until, bucket

    async def report(
        self,
        who: Principal,
        period: str,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        granularity: Bucket | None = None,
        agent_id: UUID | None = None,
    ) -> AnalyticsReport:
        start, end, bucket = self.window(period, since, until, granularity)
        groups = await self._store.analytics(who.org_id, start, end, bucket, agent_id)
        sums = _Sums(start, end, bucket)
        for g in groups.usage:
            sums.add_usage(g)
        for tg in groups.traces:
            for t in sums.views(tg.bucket, tg.agent_id):
                t.replies += tg.replies
                t.messages += tg.messages
                t.tool_calls += tg.tool_calls
                t.tool_errors += tg.tool_errors
                t.errors += tg.errors
        for th in groups.threads:
            for t in sums.views(th.bucket, th.agent_id):
                t.threads += th.threads
        return AnalyticsReport(
            period=period,
            since=start,
            until=end,
            granularity=bucket,
            agent_id=agent_id,
            prices_taken=self._taken,
            trace_retention_days=self._retention,
            totals=sums.totals.rounded(),
            series=[p.rounded() for p in sums.points.values()],
            by_model=sums.by_model(),
            by_agent=sorted(
                (a.rounded() for a in sums.agents.values()),
                key=lambda a: (-a.cost_usd, str(a.agent_id)),
            ),
        )


class _Sums:
    """A report's sums as the groups come in: the window's totals, a zero-filled
    point per bucket from ``since`` to ``until``, and one entry per agent and per
    model."""

    def __init__(self, since: datetime, until: datetime, bucket: Bucket) -> None:
        self.totals = Totals()
        self.points: dict[datetime, SeriesPoint] = {}
        self.agents: dict[UUID, AgentTotals] = {}
        self.models: dict[str, ModelTotals] = {}
        self._bucket = bucket
        self._first = at = bucket_start(since, bucket)
        while at < until:
            self.points[at] = SeriesPoint(start=at)
            at += _STEP[bucket]

    def views(self, when: datetime | None, agent: UUID | None) -> list[Totals]:
        """The totals a group adds to: the window's and its bucket's (when it names
        a bucket), its agent's (when it names an agent)."""
        found: list[Totals] = []
        if when is not None:
            point = self.points.get(bucket_start(when, self._bucket))
            found += (self.totals, point or self.points[self._first])
        if agent is not None:
            if agent not in self.agents:
                self.agents[agent] = AgentTotals(agent_id=agent)
            found.append(self.agents[agent])
        return found

    def add_usage(self, g: UsageGroup) -> None:
        for t in self.views(g.bucket, g.agent_id):
            t.add_usage(g)
        if g.model is None:
            return
        m = self.models.setdefault(g.model, ModelTotals(model=g.model))
        m.model_calls += g.calls
        m.input_tokens += g.input_tokens
        m.output_tokens += g.output_tokens
        m.cached_input_tokens += g.cached_input_tokens
        if g.unpriced:
            m.cost_usd = None
        elif m.cost_usd is not None:
            m.cost_usd += g.cost_usd

    def by_model(self) -> list[ModelTotals]:
        """The models, the costliest first (an unpriced one counts as no cost)."""
        for m in self.models.values():
            if m.cost_usd is not None:
                m.cost_usd = round(m.cost_usd, 6)
        return sorted(self.models.values(), key=lambda m: (-(m.cost_usd or 0), m.model))
