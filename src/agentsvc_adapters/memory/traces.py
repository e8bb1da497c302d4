"""Stored traces and analytics in memory (the development storage): the same
answers as the PostgreSQL adapter, computed by scanning."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Set
from datetime import datetime
from uuid import UUID

from agentsvc_core.entities import (
    StoredSpan,
    Thread,
    TraceEvaluation,
    TraceRecord,
    TraceSummary,
    UsageRecord,
)
from agentsvc_core.entities.erasure import trace_without_text
from agentsvc_core.entities.trace import merged
from agentsvc_core.errors import Conflict
from agentsvc_core.ports import AnalyticsGroups, AnalyticsStore, TraceFilter, TraceStore
from agentsvc_core.ports.traces import (
    Bucket,
    ThreadGroup,
    TraceGroup,
    UsageGroup,
    bucket_start,
)


class MemoryTraces(TraceStore, AnalyticsStore):
    def __init__(
        self,
        usage: Callable[[], Iterable[UsageRecord]],
        threads: Callable[[], Iterable[Thread]],
    ) -> None:
        """``usage`` and ``threads``: every usage record and thread stored."""
        # (organization, trace id) -> its records (turns', runner runs')
        self._traces: dict[tuple[str, str], list[TraceRecord]] = {}
        # the summaries of pruned records: analytics still counts their turns, as
        # PostgreSQL's sums do
        self._pruned: list[TraceSummary] = []
        self._usage = usage
        self._threads = threads

    def add(self, record: TraceRecord) -> None:
        """Store ``record`` (``finish_turn``'s trace part, and ``add_trace``)."""
        self._traces.setdefault((record.summary.org_id, record.summary.id), []).append(record)

    def scrub_thread(self, org_id: str, thread_id: UUID, also: Set[str] = frozenset()) -> None:
        """The thread's traces, and the traces ``also`` names (of runner runs that
        talked in it), keep their spans and costs, without their text."""
        for records in self._traces.values():
            for i, r in enumerate(records):
                s = r.summary
                if s.org_id == org_id and (s.thread_id == thread_id or s.id in also):
                    records[i] = trace_without_text(r)

    async def add_trace(self, record: TraceRecord) -> None:
        stored = self._traces.get((record.summary.org_id, record.summary.id), ())
        if any(r.root_span_id == record.root_span_id for r in stored):
            raise Conflict("the resource already exists")  # PostgreSQL's primary key
        self.add(record)

    def _records(self) -> Iterator[TraceRecord]:
        for records in self._traces.values():
            yield from records

    async def list_traces(
        self,
        org_id: str,
        where: TraceFilter,
        *,
        before: tuple[datetime, str] | None,
        limit: int,
    ) -> list[TraceSummary]:
        found = [
            r.summary
            for r in self._records()
            if r.summary.org_id == org_id
            and _matches(r.summary, where)
            and (before is None or (r.summary.started_at, r.summary.id) < before)
        ]
        found.sort(key=lambda t: (t.started_at, t.id), reverse=True)
        return found[:limit]

    async def get_trace(
        self, org_id: str, trace_id: str
    ) -> tuple[TraceSummary, list[StoredSpan], list[TraceEvaluation]] | None:
        stored = self._traces.get((org_id, trace_id), [])
        if not stored:
            return None
        records = sorted(
            stored,
            key=lambda r: (r.summary.started_at, r.summary.kind == "agent_turn", r.root_span_id),
        )
        summary = functools.reduce(merged, (r.summary for r in records))
        spans = sorted((s for r in records for s in r.spans), key=lambda s: s.started_at)
        # evaluations in the order they were stored, as PostgreSQL's (by seq)
        return summary, spans, [e for r in stored for e in r.evaluations]

    async def prune_traces(self, before: datetime) -> int:
        gone = 0
        for key, records in list(self._traces.items()):
            kept = [r for r in records if r.keep_until >= before]
            gone += len(records) - len(kept)
            self._pruned += (r.summary for r in records if r.keep_until < before)
            if kept:
                self._traces[key] = kept
            else:
                del self._traces[key]
        return gone

    async def analytics(
        self,
        org_id: str,
        since: datetime,
        until: datetime,
        bucket: Bucket,
        agent_id: UUID | None = None,
    ) -> AnalyticsGroups:
        def wanted(org: str, agent: UUID | None, at: datetime) -> bool:
            return org == org_id and since <= at < until and agent_id in (None, agent)

        usage: dict[tuple[datetime, UUID, str, str, str], list[float]] = {}
        for r in self._usage():
            if not wanted(r.org_id, r.agent_id, r.created_at):
                continue
            key = (bucket_start(r.created_at, bucket), r.agent_id, r.model, r.purpose, r.key_source)
            sums = usage.setdefault(key, [0, 0, 0, 0, 0.0, 0])
            sums[0] += 1
            sums[1] += r.usage.input_tokens
            sums[2] += r.usage.output_tokens
            sums[3] += r.usage.cached_input_tokens or 0
            if r.cost_usd is None:
                sums[5] += 1
            else:
                sums[4] += r.cost_usd
        traces: dict[tuple[datetime, UUID], list[int]] = {}
        for t in (*(r.summary for r in self._records()), *self._pruned):
            if (
                t.kind != "agent_turn"  # a runner run is no reply
                or t.agent_id is None
                or not wanted(t.org_id, t.agent_id, t.started_at)
            ):
                continue
            sums_t = traces.setdefault((bucket_start(t.started_at, bucket), t.agent_id), [0] * 5)
            sums_t[0] += 1
            sums_t[1] += t.input_messages
            sums_t[2] += t.tool_calls
            sums_t[3] += t.tool_errors
            sums_t[4] += t.status == "error"
        threads: dict[tuple[datetime, UUID], int] = {}
        for th in self._threads():
            if wanted(th.org_id, th.agent_id, th.created_at):
                k = (bucket_start(th.created_at, bucket), th.agent_id)
                threads[k] = threads.get(k, 0) + 1
        return AnalyticsGroups(
            usage=[
                UsageGroup(
                    bucket=b,
                    agent_id=a,
                    model=m,
                    purpose=p,
                    key_source=k,
                    calls=int(v[0]),
                    input_tokens=int(v[1]),
                    output_tokens=int(v[2]),
                    cached_input_tokens=int(v[3]),
                    cost_usd=float(v[4]),
                    unpriced=int(v[5]),
                )
                for (b, a, m, p, k), v in usage.items()
            ],
            traces=[
                TraceGroup(
                    bucket=b,
                    agent_id=a,
                    replies=v[0],
                    messages=v[1],
                    tool_calls=v[2],
                    tool_errors=v[3],
                    errors=v[4],
                )
                for (b, a), v in traces.items()
            ],
            threads=[ThreadGroup(bucket=b, agent_id=a, threads=n) for (b, a), n in threads.items()],
        )

    async def roll_up(self) -> int:
        return 0  # nothing to fold: analytics scans what is stored


def _matches(t: TraceSummary, where: TraceFilter) -> bool:
    return (
        (where.agent_id is None or t.agent_id == where.agent_id)
        and (where.runner_id is None or t.runner_id == where.runner_id)
        and (where.thread_id is None or t.thread_id == where.thread_id)
        and (where.status is None or t.status == where.status)
        and (where.since is None or t.started_at >= where.since)
        and (where.until is None or t.started_at < where.until)
    )
