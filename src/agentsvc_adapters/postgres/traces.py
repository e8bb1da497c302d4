"""Stored traces and analytics on PostgreSQL (``traces``, ``trace_spans``,
``trace_evaluations``, and ``usage_records``; migration 0008).

Traces are written by ``finish_turn`` (``_rows.trace_ctes``), and records no turn
writes (a runner run's) by ``add_trace`` with the same statement's parts: a row per
record, its spans in a JSON column. The list reads the rows' other columns through
an index that matches its filter and order. Analytics
reads hourly sums (``usage_hourly``, ``traces_hourly``) that the maintenance sweep
folds the new rows into (``roll_up``), plus the rows stored since, through indexes
that hold every column it reads (``usage_records_analytics``, ``traces_started``),
and the threads opened; three statements sent together in one pipeline.
"""

from __future__ import annotations

import functools
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_adapters.postgres._rows import TRACE_COLS, to_trace, trace_ctes
from agentsvc_adapters.postgres.pool import Pool, Repo, translate
from agentsvc_core.entities import StoredSpan, TraceEvaluation, TraceRecord, TraceSummary
from agentsvc_core.entities.trace import merged
from agentsvc_core.ports import (
    AnalyticsGroups,
    AnalyticsStore,
    ThreadGroup,
    TraceFilter,
    TraceGroup,
    TraceStore,
    UsageGroup,
)
from agentsvc_core.ports.traces import Bucket, bucket_start

_spans = msgspec.json.Decoder(list[StoredSpan])

# The fold (roll_up), in one transaction: take the mark (one process at a time: the
# others skip), then sum what was stored after it and at least ``settle`` ago (a
# turn's final write, one statement, commits well within it) into the hourly sums,
# six hours of storing at most per transaction, and move the mark. The range is
# read first so that the sums' statements scan it with constants (the BRIN indexes
# on stored_at), not with values the planner cannot see.
_FOLD_RANGE = """
SELECT lo, greatest(lo, least(goal, lo + interval '6 hours')), goal FROM (
    SELECT CASE WHEN rolled_to > '-infinity' THEN rolled_to ELSE coalesce(least(
        (SELECT min(stored_at) FROM usage_records), (SELECT min(stored_at) FROM traces)
    ) - interval '1 microsecond', now() - %(settle)s) END AS lo, now() - %(settle)s AS goal
    FROM rollup_marks WHERE name = 'analytics' AND pg_try_advisory_xact_lock(7268112)
    FOR UPDATE
) m
"""
_FOLD_USAGE = """
INSERT INTO usage_{unit} AS h (org_id, {col}, agent_id, model, purpose, key_source, calls,
    input_tokens, output_tokens, cached_input_tokens, cost_usd, unpriced)
SELECT org_id, date_trunc('{col}', created_at, 'UTC'), agent_id, model, purpose,
    key_source, count(*), sum(input_tokens), sum(output_tokens),
    sum(coalesce(cached_input_tokens, 0)), coalesce(sum(cost_usd), 0),
    count(*) - count(cost_usd)
FROM usage_records WHERE stored_at > %(lo)s AND stored_at <= %(hi)s
GROUP BY 1, 2, 3, 4, 5, 6
ON CONFLICT (org_id, {col}, agent_id, model, purpose, key_source) DO UPDATE SET
    calls = h.calls + EXCLUDED.calls,
    input_tokens = h.input_tokens + EXCLUDED.input_tokens,
    output_tokens = h.output_tokens + EXCLUDED.output_tokens,
    cached_input_tokens = h.cached_input_tokens + EXCLUDED.cached_input_tokens,
    cost_usd = h.cost_usd + EXCLUDED.cost_usd,
    unpriced = h.unpriced + EXCLUDED.unpriced
"""
_FOLD_TRACES = """
INSERT INTO traces_{unit} AS h (org_id, {col}, agent_id, replies, messages, tool_calls,
    tool_errors, errors)
SELECT org_id, date_trunc('{col}', started_at, 'UTC'), agent_id, count(*),
    sum(input_messages), sum(tool_calls), sum(tool_errors),
    count(*) FILTER (WHERE status = 'error')
FROM traces WHERE stored_at > %(lo)s AND stored_at <= %(hi)s AND agent_id IS NOT NULL
    AND kind = 'agent_turn'
GROUP BY 1, 2, 3
ON CONFLICT (org_id, {col}, agent_id) DO UPDATE SET
    replies = h.replies + EXCLUDED.replies,
    messages = h.messages + EXCLUDED.messages,
    tool_calls = h.tool_calls + EXCLUDED.tool_calls,
    tool_errors = h.tool_errors + EXCLUDED.tool_errors,
    errors = h.errors + EXCLUDED.errors
"""
# hourly and daily sums, folded from the same rows in the same transaction
_FOLDS = tuple(
    sql.format(unit=unit, col=col)
    for sql in (_FOLD_USAGE, _FOLD_TRACES)
    for unit, col in (("hourly", "hour"), ("daily", "day"))
)
_FOLD_MARK = "UPDATE rollup_marks SET rolled_to = %(hi)s WHERE name = 'analytics'"

# Analytics: the sums of the window (daily ones for its whole days when the series
# is by day, [%(d0)s, %(d1)s); hourly ones for the rest), and the rows stored since
# the mark (those of the last two hours of the window: a turn stored later than
# that after it began waits for the next fold), each summed three ways at once
# (GROUPING SETS: by bucket, by model, by agent), so that what comes back is a few
# hundred rows whatever the window holds. Replies are turns' records only (a runner
# run's is none: kind is in traces_started for that, migration 0015).
_MARK = "(SELECT rolled_to FROM rollup_marks WHERE name = 'analytics')"
_HOURS = "(hour >= %(since)s AND hour < %(d0)s OR hour >= %(d1)s AND hour < %(until)s)"
_USAGE = (
    "SELECT b, agent_id, model, purpose, key_source, sum(calls), sum(input_tokens),"
    " sum(output_tokens), sum(cached_input_tokens), sum(cost_usd), sum(unpriced) FROM ("
    " SELECT date_trunc(%(bucket)s, at, 'UTC') AS b, * FROM ("
    "  SELECT hour AS at, agent_id, model, purpose, key_source, calls, input_tokens,"
    "  output_tokens, cached_input_tokens, cost_usd, unpriced FROM usage_hourly"
    f"  WHERE org_id = %(org)s AND {_HOURS}{{agent}}"
    "  UNION ALL"
    "  SELECT day, agent_id, model, purpose, key_source, calls, input_tokens,"
    "  output_tokens, cached_input_tokens, cost_usd, unpriced FROM usage_daily"
    "  WHERE org_id = %(org)s AND day >= %(d0)s AND day < %(d1)s{agent}"
    "  UNION ALL"
    "  SELECT created_at, agent_id, model, purpose, key_source, 1, input_tokens,"
    "  output_tokens, coalesce(cached_input_tokens, 0), coalesce(cost_usd, 0),"
    "  (cost_usd IS NULL)::int FROM usage_records"
    "  WHERE org_id = %(org)s AND created_at >= %(since)s AND created_at < %(until)s"
    f"  AND created_at >= {_MARK} - interval '2 hours' AND stored_at > {_MARK}{{agent}}"
    " ) r) g GROUP BY GROUPING SETS ((b, purpose, key_source), (model),"
    " (agent_id, purpose, key_source))"
)
_TRACES = (
    "SELECT b, agent_id, sum(replies), sum(messages), sum(tool_calls), sum(tool_errors),"
    " sum(errors) FROM ("
    " SELECT date_trunc(%(bucket)s, at, 'UTC') AS b, * FROM ("
    "  SELECT hour AS at, agent_id, replies, messages, tool_calls, tool_errors, errors"
    f"  FROM traces_hourly WHERE org_id = %(org)s AND {_HOURS}{{agent}}"
    "  UNION ALL"
    "  SELECT day, agent_id, replies, messages, tool_calls, tool_errors, errors"
    "  FROM traces_daily WHERE org_id = %(org)s AND day >= %(d0)s AND day < %(d1)s{agent}"
    "  UNION ALL"
    "  SELECT started_at, agent_id, 1, input_messages, tool_calls, tool_errors,"
    "  (status = 'error')::int FROM traces"
    "  WHERE org_id = %(org)s AND started_at >= %(since)s AND started_at < %(until)s"
    f"  AND started_at >= {_MARK} - interval '2 hours' AND stored_at > {_MARK}"
    "  AND agent_id IS NOT NULL AND kind = 'agent_turn'{agent}"
    " ) r) g GROUP BY GROUPING SETS ((b), (agent_id))"
)
_THREADS = (
    "SELECT b, agent_id, count(*) FROM ("
    " SELECT date_trunc(%(bucket)s, created_at, 'UTC') AS b, agent_id FROM threads"
    " WHERE org_id = %(org)s AND created_at >= %(since)s AND created_at < %(until)s{agent}"
    ") g GROUP BY GROUPING SETS ((b), (agent_id))"
)


def analytics_params(
    org_id: str, since: datetime, until: datetime, bucket: Bucket
) -> dict[str, Any]:
    """The parameters of ``_USAGE``, ``_TRACES`` and ``_THREADS``: the window's whole
    days, [d0, d1), come from the daily sums when the series is by day (the hours
    before and after them from the hourly ones); none by hour."""
    first = bucket_start(since, "day")
    d0 = first if first == since else first + timedelta(days=1)
    d1 = bucket_start(until, "day")
    if bucket != "day" or d0 >= d1:
        d0 = d1 = until
    return {"org": org_id, "since": since, "until": until, "bucket": bucket, "d0": d0, "d1": d1}


class PostgresTraces(Repo, TraceStore, AnalyticsStore):
    def __init__(self, pool: Pool, settle: timedelta = timedelta(minutes=2)) -> None:
        """``settle``: rows stored less than this long ago wait for a later fold
        (their transactions may not have committed when the fold reads)."""
        super().__init__(pool)
        self._settle = settle

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
                    # as merged wants them (and the memory adapter sorts them)
                    " ORDER BY started_at, kind = 'agent_turn', root_span_id COLLATE \"C\"",
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

    async def add_trace(self, record: TraceRecord) -> None:
        # finish_turn's trace part, alone: the statement is its CTEs and SELECT 1
        sql, params = trace_ctes(record)
        async with translate(), self._pool.connection() as conn:
            await conn.hot(f"WITH{sql.removeprefix(',')} SELECT 1", params)

    async def prune_traces(self, before: datetime) -> int:
        async with translate(), self._pool.connection() as conn, conn.transaction():
            await conn.execute("DELETE FROM trace_evaluations WHERE keep_until < %s", (before,))
            # only what the analytics fold has summed (it runs first in the sweep), so
            # that analytics' counts outlive the traces
            cur = await conn.execute(
                f"DELETE FROM traces WHERE keep_until < %s AND stored_at <= {_MARK}",
                (before,),
            )
            return cur.rowcount

    async def analytics(
        self,
        org_id: str,
        since: datetime,
        until: datetime,
        bucket: Bucket,
        agent_id: UUID | None = None,
    ) -> AnalyticsGroups:
        params = analytics_params(org_id, since, until, bucket)
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
                    calls=int(r[5]),
                    input_tokens=int(r[6]),
                    output_tokens=int(r[7]),
                    cached_input_tokens=int(r[8]),
                    cost_usd=float(r[9]),
                    unpriced=int(r[10]),
                )
                for r in usage_rows
            ],
            traces=[
                TraceGroup(
                    bucket=r[0],
                    agent_id=r[1],
                    replies=int(r[2]),
                    messages=int(r[3]),
                    tool_calls=int(r[4]),
                    tool_errors=int(r[5]),
                    errors=int(r[6]),
                )
                for r in trace_rows
            ],
            threads=[ThreadGroup(bucket=r[0], agent_id=r[1], threads=r[2]) for r in thread_rows],
        )

    async def roll_up(self) -> int:
        folded, more = 0, True
        while more:  # six hours of storing per transaction, until caught up
            async with translate(), self._pool.connection() as conn, conn.transaction():
                cur = await conn.execute(_FOLD_RANGE, {"settle": self._settle})
                row = await cur.fetchone()
                if row is None:  # another process is folding
                    return folded
                lo, hi, goal = row
                span = {"lo": lo, "hi": hi}
                for sql in _FOLDS:
                    folded += (await conn.execute(sql, span)).rowcount
                await conn.execute(_FOLD_MARK, span)
            more = hi < goal
        return folded
