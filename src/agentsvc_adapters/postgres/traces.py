"""Stored traces and analytics on PostgreSQL (``traces``, ``trace_spans``,
``trace_evaluations``, and ``usage_records``; migration 0008).

Traces are written by ``finish_turn`` (``_rows.trace_ctes``): a row per turn, its
spans in a JSON column. The list reads the rows' other columns through an index
that matches its filter and order. Analytics
is three grouped sums over a time range, each an index-only scan of an index that
holds every column it reads (``usage_records_analytics``, ``traces_started``; the
threads' own indexes), sent together in one pipeline.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_adapters.postgres._rows import TRACE_COLS, to_trace
from agentsvc_adapters.postgres.pool import Repo, translate
from agentsvc_core.entities import StoredSpan, TraceEvaluation, TraceSummary
from agentsvc_core.entities.trace import merged
from agentsvc_core.ports import (
    AnalyticsGroups,
    AnalyticsStore,
    TraceFilter,
    TraceGroup,
    TraceStore,
    UsageGroup,
)
from agentsvc_core.ports.traces import Bucket

_spans = msgspec.json.Decoder(list[StoredSpan])

_USAGE = (
    "SELECT date_trunc(%(bucket)s, created_at, 'UTC'), agent_id, model, purpose, key_source,"
    " count(*), sum(input_tokens), sum(output_tokens), sum(coalesce(cached_input_tokens, 0)),"
    " coalesce(sum(cost_usd), 0), count(*) - count(cost_usd)"
    " FROM usage_records WHERE org_id = %(org)s AND created_at >= %(since)s"
    " AND created_at < %(until)s{agent} GROUP BY 1, 2, 3, 4, 5"
)
_TRACES = (
    "SELECT date_trunc(%(bucket)s, started_at, 'UTC'), agent_id, count(*),"
    " sum(input_messages), sum(tool_calls), sum(tool_errors),"
    " count(*) FILTER (WHERE status = 'error')"
    " FROM traces WHERE org_id = %(org)s AND started_at >= %(since)s"
    " AND started_at < %(until)s AND agent_id IS NOT NULL{agent} GROUP BY 1, 2"
)
_THREADS = (
    "SELECT date_trunc(%(bucket)s, created_at, 'UTC'), agent_id, count(*)"
    " FROM threads WHERE org_id = %(org)s AND created_at >= %(since)s"
    " AND created_at < %(until)s{agent} GROUP BY 1, 2"
)


class PostgresTraces(Repo, TraceStore, AnalyticsStore):
    async def list_traces(
        self,
        org_id: str,
        where: TraceFilter,
        *,
        before: tuple[datetime, str] | None,
        limit: int,
    ) -> list[TraceSummary]:
        conditions = ["org_id = %(org)s"]
        params: dict[str, Any] = {"org": org_id, "limit": limit}
        for column, value in (
            ("agent_id", where.agent_id),
            ("runner_id", where.runner_id),
            ("thread_id", where.thread_id),
            ("status", where.status),
        ):
            if value is not None:
                conditions.append(f"{column} = %({column})s")
                params[column] = value
        if where.since is not None:
            conditions.append("started_at >= %(since)s")
            params["since"] = where.since
        if where.until is not None:
            conditions.append("started_at < %(until)s")
            params["until"] = where.until
        if before is not None:
            conditions.append("(started_at, id) < (%(at)s, %(id)s)")
            params["at"], params["id"] = before
        rows = await self._all(
            f"SELECT {TRACE_COLS} FROM traces WHERE {' AND '.join(conditions)}"
            " ORDER BY started_at DESC, id DESC LIMIT %(limit)s",
            params,
        )
        return [to_trace(r) for r in rows]

    async def get_trace(
        self, org_id: str, trace_id: str
    ) -> tuple[TraceSummary, list[StoredSpan], list[TraceEvaluation]] | None:
        key = (org_id, trace_id)
        async with translate(), self._pool.connection() as conn:
            async with conn.pipeline():
                turns = await conn.execute(
                    f"SELECT {TRACE_COLS}, spans::text FROM traces WHERE org_id = %s AND id = %s"
                    " ORDER BY started_at",
                    key,
                )
                evals = await conn.execute(
                    "SELECT span_id, name, source, score, label, detail FROM trace_evaluations"
                    " WHERE org_id = %s AND trace_id = %s ORDER BY seq",
                    key,
                )
            rows = await turns.fetchall()
            eval_rows = await evals.fetchall()
        if not rows:
            return None
        summary = functools.reduce(merged, (to_trace(r[:-1]) for r in rows))
        spans = [s for r in rows for s in _spans.decode(r[-1])]
        spans.sort(key=lambda s: s.started_at)
        evaluations = [
            TraceEvaluation(
                span_id=r[0], name=r[1], source=r[2], score=r[3], label=r[4], detail=r[5]
            )
            for r in eval_rows
        ]
        return summary, spans, evaluations

    async def prune_traces(self, before: datetime) -> int:
        async with translate(), self._pool.connection() as conn, conn.transaction():
            await conn.execute("DELETE FROM trace_evaluations WHERE keep_until < %s", (before,))
            cur = await conn.execute("DELETE FROM traces WHERE keep_until < %s", (before,))
            return cur.rowcount

    async def analytics(
        self,
        org_id: str,
        since: datetime,
        until: datetime,
        bucket: Bucket,
        agent_id: UUID | None = None,
    ) -> AnalyticsGroups:
        params: dict[str, Any] = {"org": org_id, "since": since, "until": until, "bucket": bucket}
        agent = ""
        if agent_id is not None:
            agent = " AND agent_id = %(agent)s"
            params["agent"] = agent_id
        async with translate(), self._pool.connection() as conn:
            async with conn.pipeline():
                usage = await conn.execute(_USAGE.format(agent=agent), params)
                traces = await conn.execute(_TRACES.format(agent=agent), params)
                threads = await conn.execute(_THREADS.format(agent=agent), params)
            usage_rows = await usage.fetchall()
            trace_rows = await traces.fetchall()
            thread_rows = await threads.fetchall()
        return AnalyticsGroups(
            usage=[
                UsageGroup(
                    bucket=r[0],
                    agent_id=r[1],
                    model=r[2],
                    purpose=r[3],
                    key_source=r[4],
                    calls=r[5],
                    input_tokens=int(r[6]),
                    output_tokens=int(r[7]),
                    cached_input_tokens=int(r[8]),
                    cost_usd=float(r[9]),
                    unpriced=r[10],
                )
                for r in usage_rows
            ],
            traces=[
                TraceGroup(
                    bucket=r[0],
                    agent_id=r[1],
                    replies=r[2],
                    messages=int(r[3]),
                    tool_calls=int(r[4]),
                    tool_errors=int(r[5]),
                    errors=r[6],
                )
                for r in trace_rows
            ],
            threads=[(r[0], r[1], r[2]) for r in thread_rows],
        )
