"""Reading what turns left behind: stored traces (``GET /api/logs``,
``GET /api/logs/{traceId}``) and usage analytics (``GET /api/analytics``), both
under the caller's organization; and the retention sweep of traces.

Analytics asks storage for grouped sums (``AnalyticsStore``) over one time range
and makes the answer here: totals, a zero-filled series whose points add up to the
totals, and breakdowns by model and by agent.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Self
from uuid import UUID

import msgspec

from agentsvc_core.entities import Principal, StoredSpan, TraceEvaluation, TraceSummary
from agentsvc_core.errors import InvalidInput, NotFound
from agentsvc_core.ports import AnalyticsStore, Clock, TraceFilter, TraceStore
from agentsvc_core.ports.traces import Bucket, UsageGroup, bucket_start

__all__ = [
    "PERIODS",
    "AgentTotals",
    "Analytics",
    "AnalyticsReport",
    "Logs",
    "ModelTotals",
    "SeriesPoint",
    "Totals",
    "TracePage",
]

PERIODS: dict[str, tuple[timedelta, Bucket]] = {
    "24h": (timedelta(hours=24), "hour"),
    "7d": (timedelta(days=7), "hour"),
    "30d": (timedelta(days=30), "day"),
}
MAX_POINTS = 2000  # a series longer than this is refused (a finer bucket is asked)
MAX_RANGE = timedelta(days=400)
_STEP = {"hour": timedelta(hours=1), "day": timedelta(days=1)}


class TracePage(msgspec.Struct, frozen=True):
    traces: list[TraceSummary]
    next_cursor: str | None


def _cursor_of(t: TraceSummary) -> str:
    return f"{t.started_at.astimezone(UTC).isoformat().replace('+00:00', 'Z')}|{t.id}"


def parse_cursor(raw: str) -> tuple[datetime, str]:
    """A ``nextCursor``: ``<started_at>|<trace id>``."""
    at, sep, trace_id = raw.partition("|")
    try:
        if not sep or len(trace_id) != 32:
            raise ValueError
        int(trace_id, 16)
        when = msgspec.convert(at, datetime)
    except (ValueError, msgspec.ValidationError):
        raise InvalidInput("cursor", "must be a nextCursor of this list") from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)), trace_id


class Logs:
    """Stored traces: listed, read, and pruned when their time is up."""

    def __init__(self, store: TraceStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    async def list_traces(
        self, who: Principal, where: TraceFilter, *, cursor: str | None, limit: int
    ) -> TracePage:
        if where.since and where.until and where.since >= where.until:
            raise InvalidInput("from", "must be before to")
        before = parse_cursor(cursor) if cursor else None
        found = await self._store.list_traces(who.org_id, where, before=before, limit=limit + 1)
        more = len(found) > limit
        page = found[:limit]
        return TracePage(page, _cursor_of(page[-1]) if more else None)

    async def get(
        self, who: Principal, trace_id: str
    ) -> tuple[TraceSummary, list[StoredSpan], list[TraceEvaluation]]:
        found = await self._store.get_trace(who.org_id, trace_id.lower())
        if found is None:
            raise NotFound("trace not found")
        return found

    async def prune(self) -> int:
        """Drop the traces kept long enough (the maintenance sweep)."""
        return await self._store.prune_traces(self._clock.now())


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

    async def report(  # noqa: C901 - analytics' filters and series in one query plan; to be split with the analytics module
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
        totals = Totals()
        points: dict[datetime, SeriesPoint] = {}
        first = at = bucket_start(start, bucket)
        while at < end:
            points[at] = SeriesPoint(start=at)
            at += _STEP[bucket]
        agents: dict[UUID, AgentTotals] = {}
        models: dict[str, ModelTotals] = {}

        def views(when: datetime | None, agent: UUID | None) -> list[Totals]:
            """The totals a group adds to: the window's and its bucket's (when it
            names a bucket), its agent's (when it names an agent)."""
            found: list[Totals] = []
            if when is not None:
                found += (totals, points.get(bucket_start(when, bucket)) or points[first])
            if agent is not None:
                if agent not in agents:
                    agents[agent] = AgentTotals(agent_id=agent)
                found.append(agents[agent])
            return found

        for g in groups.usage:
            for t in views(g.bucket, g.agent_id):
                t.add_usage(g)
            if g.model is None:
                continue
            m = models.setdefault(g.model, ModelTotals(model=g.model))
            m.model_calls += g.calls
            m.input_tokens += g.input_tokens
            m.output_tokens += g.output_tokens
            m.cached_input_tokens += g.cached_input_tokens
            if g.unpriced:
                m.cost_usd = None
            elif m.cost_usd is not None:
                m.cost_usd += g.cost_usd
        for tg in groups.traces:
            for t in views(tg.bucket, tg.agent_id):
                t.replies += tg.replies
                t.messages += tg.messages
                t.tool_calls += tg.tool_calls
                t.tool_errors += tg.tool_errors
                t.errors += tg.errors
        for th in groups.threads:
            for t in views(th.bucket, th.agent_id):
                t.threads += th.threads
        for m in models.values():
            if m.cost_usd is not None:
                m.cost_usd = round(m.cost_usd, 6)
        return AnalyticsReport(
            period=period,
            since=start,
            until=end,
            granularity=bucket,
            agent_id=agent_id,
            prices_taken=self._taken,
            trace_retention_days=self._retention,
            totals=totals.rounded(),
            series=[p.rounded() for p in points.values()],
            by_model=sorted(models.values(), key=lambda m: (-(m.cost_usd or 0), m.model)),
            by_agent=sorted(
                (a.rounded() for a in agents.values()),
                key=lambda a: (-a.cost_usd, str(a.agent_id)),
            ),
        )
