"""Analytics over a generated month: how long ``GET /api/analytics`` takes for an
organization with millions of usage records, and whether its totals are right.

Run: ``make bench-analytics`` (= ``.venv/bin/python -m bench.analytics``), or
``make bench-analytics ARGS="--records 100000"`` for a quick run. Needs a PostgreSQL
server on this machine (``AGENTSVC_BENCH_DATABASE_URL``, default
``postgresql://postgres@127.0.0.1:5432/postgres``): it creates a fresh
``agentsvc_bench_<random>`` database (bench/database.py), dropped afterwards.

The month is made by the server itself (``INSERT ... SELECT generate_series``, one
statement per table, in time order so the indexes grow at their right edge): by
default 3,000,000 usage records, 1,500,000 traces and 150,000 threads of one
organization over 30 days, 20 agents, 6 models (one without a price), 10% BYOK
calls, 2% compaction calls, 1% failed turns; and a tenth as much of another
organization in the same days, which must never count. Then the project's
``migrate()`` schema is vacuumed and analyzed (as autovacuum would leave it), and
``PostgresTraces.analytics`` (the three grouped sums) and the whole
``Analytics.report`` use case are timed for 24h, 7d and 30d, with and without an
``agentId``; EXPLAIN (ANALYZE, BUFFERS) shows the scans. Last, the 30d totals are
checked against direct ``count``/``sum`` queries: ``OK`` or ``MISMATCH`` (exit 1).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from agentsvc_adapters.postgres import PostgresStorage
from agentsvc_adapters.postgres.migrate import migrate
from agentsvc_adapters.postgres.traces import _THREADS, _TRACES, _USAGE, analytics_params
from agentsvc_core.entities import Principal
from agentsvc_core.use_cases.logs import Analytics, AnalyticsReport
from bench.database import Databases
from bench.report import pct

ORG = "org-bench-analytics"
NOISE = "org-bench-noise"
AGENTS = 20
DAYS = 30
# name, provider, USD per million input and output tokens (None: no price)
MODELS: list[tuple[str, str, float | None, float | None]] = [
    ("gpt-4o", "openai", 2.5, 10.0),
    ("gpt-4o-mini", "openai", 0.15, 0.6),
    ("claude-sonnet-4", "anthropic", 3.0, 15.0),
    ("claude-haiku-3.5", "anthropic", 0.8, 4.0),
    ("gemini-2.0-flash", "google", 0.1, 0.4),
    ("local-llama", "local", None, None),
]
# the tables and the indexes analytics reads, whose sizes are printed
SIZED = (
    "usage_records",
    "usage_records_analytics",
    "traces",
    "traces_started",
    "threads",
    "threads_org_agent_created",
)
# which model a call uses: index into MODELS, drawn uniformly (the unpriced one 1/12)
MODEL_DRAW = [0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 4, 5]


def agent_id(n: int) -> UUID:
    """The ``n``-th agent's id (the same in SQL: ``_AGENT``)."""
    return UUID(f"a0000000-0000-0000-0000-{n:012x}")


_AGENT = "('a0000000-0000-0000-0000-' || lpad(to_hex({n}), 12, '0'))::uuid"
_UID = "('{tag}' || lpad(to_hex({n}::bigint), 31, '0'))::uuid"


def _sql_array(values: list[Any]) -> str:
    return "ARRAY[" + ", ".join("NULL" if v is None else repr(v) for v in values) + "]"


def threads_sql(org: str, tag: str, n: int) -> str:
    """``n`` threads, one every ``DAYS / n``: distinct times, as the table wants."""
    return f"""
INSERT INTO threads (org_id, id, agent_id, title, kind, status, metadata,
                     resource_bindings, created_at, updated_at)
SELECT '{org}', {_UID.format(tag=tag, n="j")}, {_AGENT.format(n=f"mod(j, {AGENTS})")}, NULL,
       'single', 'active', '{{}}', '[]', at, at
FROM (SELECT j, %(start)s + %(span)s * (j::float8 / {n}) AS at
      FROM generate_series(0, {n} - 1) j) g"""  # noqa: S608


def usage_sql(org: str, tag: str, thread_tag: str, n: int, threads: int) -> str:
    """``n`` usage records in time order; thread ``i % threads`` and its agent."""
    model = f"({_sql_array(MODEL_DRAW)})[1 + floor(r1 * {len(MODEL_DRAW)})::int] + 1"
    names = _sql_array([m[0] for m in MODELS])
    providers = _sql_array([m[1] for m in MODELS])
    p_in = "ARRAY[" + ", ".join("NULL" if m[2] is None else str(m[2]) for m in MODELS) + "]"
    p_out = "ARRAY[" + ", ".join("NULL" if m[3] is None else str(m[3]) for m in MODELS) + "]"
    return f"""
INSERT INTO usage_records (org_id, id, agent_id, thread_id, run_id, message_id, provider,
    model, input_tokens, output_tokens, cached_input_tokens, key_source, metadata,
    created_at, cost_usd, purpose, stored_at)
SELECT '{org}', {_UID.format(tag=tag, n="i")},
       {_AGENT.format(n=f"mod(mod(i, {threads}), {AGENTS})")},
       {_UID.format(tag=thread_tag, n=f"mod(i, {threads})")}, {_UID.format(tag="e", n="i / 2")},
       NULL, ({providers})[m], ({names})[m], inp, outp, cached,
       CASE WHEN r_byok < 0.10 THEN 'byok' ELSE 'platform' END, '{{}}', at,
       (inp * ({p_in})[m] + outp * ({p_out})[m]) / 1e6,
       CASE WHEN r_comp < 0.02 THEN 'compaction' ELSE 'reply' END,
       at + interval '5 seconds'
FROM (SELECT i, {model} AS m, r_byok, r_comp,
             %(start)s + %(span)s * ((i + r0) / {n}) AS at,
             inp, outp, CASE WHEN r4 < 0.5 THEN NULL ELSE (inp * r4 * 0.5)::int END AS cached
      FROM (SELECT i, random() AS r0, random() AS r1, random() AS r4,
                   random() AS r_byok, random() AS r_comp,
                   (200 + random() * 20000)::int AS inp, (20 + random() * 2000)::int AS outp
            FROM generate_series(0, {n} - 1) i) a) g"""  # noqa: S608


def traces_sql(org: str, tag: str, thread_tag: str, n: int, threads: int) -> str:
    """``n`` turns' traces in time order; 1% failed."""
    return f"""
INSERT INTO traces (org_id, id, kind, name, status, run_status, started_at, ended_at,
    duration_ms, agent_id, thread_id, run_id, model, input_tokens, output_tokens,
    cached_input_tokens, cost_usd, model_calls, tool_calls, tool_errors, input_messages,
    key_source, error, first_token_ms, keep_until, root_span_id, spans, stored_at)
SELECT '{org}', '{tag}' || lpad(to_hex(i::bigint), 31, '0'), 'agent_turn',
       'agent-' || mod(mod(i, {threads}), {AGENTS}),
       CASE WHEN failed THEN 'error' ELSE 'ok' END,
       CASE WHEN failed THEN 'failed' ELSE 'completed' END,
       at, at + make_interval(secs => dur / 1000.0), dur,
       {_AGENT.format(n=f"mod(mod(i, {threads}), {AGENTS})")},
       {_UID.format(tag=thread_tag, n=f"mod(i, {threads})")}, {_UID.format(tag="e", n="i")},
       'gpt-4o', 8000, 800, 0, 0.03, 2, tools, CASE WHEN tools > 0 AND r5 < 0.05 THEN 1 ELSE 0 END,
       CASE WHEN r6 < 0.1 THEN 2 ELSE 1 END, 'platform',
       CASE WHEN failed THEN 'PROVIDER_ERROR' END, 400, at + interval '{DAYS} days',
       lpad(to_hex(i::bigint), 16, '0'), '[]', at + make_interval(secs => dur / 1000.0)
FROM (SELECT i, random() < 0.01 AS failed, floor(random() * 4)::int AS tools,
             random() AS r5, random() AS r6, (500 + random() * 9500)::int AS dur,
             %(start)s + %(span)s * ((i + random()) / {n}) AS at
      FROM generate_series(0, {n} - 1) i) g"""  # noqa: S608


async def generate(url: str, records: int, start: datetime) -> None:
    """The month, in the database at ``url`` (migrated already)."""
    threads, traces = max(1, records // 20), max(1, records // 2)
    span = timedelta(days=DAYS)
    params = {"start": start, "span": span}
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("SET synchronous_commit = off")
        await conn.execute("SET maintenance_work_mem = '256MB'")
        await conn.execute("SELECT setseed(0.17)")
        for org in (ORG, NOISE):
            await conn.execute(
                "INSERT INTO organizations (org_id, created_at) VALUES (%s, %s)", (org, start)
            )
        steps: list[tuple[str, str]] = [
            (f"{threads:,} threads", threads_sql(ORG, "1", threads)),
            (f"{records:,} usage records", usage_sql(ORG, "2", "1", records, threads)),
            (f"{traces:,} traces", traces_sql(ORG, "3", "1", traces, threads)),
            ("noise: threads", threads_sql(NOISE, "4", max(1, threads // 10))),
            (
                "noise: usage records",
                usage_sql(NOISE, "5", "4", max(1, records // 10), max(1, threads // 10)),
            ),
            (
                "noise: traces",
                traces_sql(NOISE, "6", "4", max(1, traces // 10), max(1, threads // 10)),
            ),
        ]
        for what, sql in steps:
            t0 = time.perf_counter()
            await conn.execute(sql.encode(), params)
            print(f"  {what:32} {time.perf_counter() - t0:7.1f} s", flush=True)
        t0 = time.perf_counter()
        await conn.execute("VACUUM ANALYZE")
        print(f"  {'VACUUM ANALYZE':32} {time.perf_counter() - t0:7.1f} s", flush=True)
        cur = await conn.execute(
            "SELECT relname, pg_relation_size(oid) FROM pg_class WHERE relname = ANY(%s)",
            (list(SIZED),),
        )
        sizes: dict[str, int] = dict(await cur.fetchall())
        print("  sizes: " + ", ".join(f"{n} {sizes[n] / 2**20:,.0f} MB" for n in SIZED))


class FixedClock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at


async def timed(reps: int, op: Callable[[], Awaitable[Any]]) -> list[float]:
    await op()  # warm: the statement prepared, the pages in the cache
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        await op()
        times.append((time.perf_counter() - t0) * 1000)
    return times


def _summary_lines(plan: list[str]) -> list[str]:
    keep = ("Scan", "Heap Fetches", "Execution Time", "Workers Launched")
    lines = [plan[0].split("  (")[0].strip()]
    lines += [p.strip() for p in plan if any(k in p for k in keep)]
    buffers = next((p.strip() for p in plan if "Buffers:" in p), None)
    if buffers:
        lines.insert(1, buffers)
    return lines


async def explain(storage: PostgresStorage, params: dict[str, Any], agent: bool) -> None:
    clause = " AND agent_id = %(agent)s" if agent else ""
    async with storage.pool.connection() as conn:
        for name, sql in (("usage", _USAGE), ("traces", _TRACES), ("threads", _THREADS)):
            cur = await conn.execute(
                ("EXPLAIN (ANALYZE, BUFFERS) " + sql.format(agent=clause)).encode(), params
            )
            plan = [r[0] for r in await cur.fetchall()]
            print(f"  {name}:")
            for line in _summary_lines(plan):
                print(f"    {line}")


async def direct_totals(
    storage: PostgresStorage, since: datetime, until: datetime, agent: UUID | None
) -> dict[str, Any]:
    """The totals by plain count and sum over the tables, not the grouped queries."""
    clause = " AND agent_id = %(agent)s" if agent else ""
    p = {"org": ORG, "since": since, "until": until, "agent": agent}
    # the column names and the clause are constants here; the values are parameters
    where = "WHERE org_id = %(org)s AND {t} >= %(since)s AND {t} < %(until)s" + clause
    usage_sql = (
        "SELECT count(*), sum(input_tokens), sum(output_tokens),"  # noqa: S608
        " sum(coalesce(cached_input_tokens, 0)), sum(cost_usd), count(*) - count(cost_usd),"
        " count(*) FILTER (WHERE purpose = 'compaction'),"
        " coalesce(sum(cost_usd) FILTER (WHERE purpose = 'compaction'), 0),"
        " count(*) FILTER (WHERE key_source = 'byok'),"
        " count(*) FILTER (WHERE key_source <> 'byok')"
        " FROM usage_records " + where.format(t="created_at")
    )
    traces_sql = (
        "SELECT count(*), sum(input_messages), sum(tool_calls), sum(tool_errors),"  # noqa: S608
        " count(*) FILTER (WHERE status = 'error') FROM traces "
        + where.format(t="started_at")
        + " AND agent_id IS NOT NULL"
    )
    threads_sql = "SELECT count(*) FROM threads " + where.format(t="created_at")  # noqa: S608
    async with storage.pool.connection() as conn:
        u = await (await conn.execute(usage_sql.encode(), p)).fetchone()
        t = await (await conn.execute(traces_sql.encode(), p)).fetchone()
        th = await (await conn.execute(threads_sql.encode(), p)).fetchone()
    assert u is not None
    assert t is not None
    assert th is not None
    return {
        "model_calls": u[0],
        "input_tokens": int(u[1] or 0),
        "output_tokens": int(u[2] or 0),
        "cached_input_tokens": int(u[3] or 0),
        "cost_usd": float(u[4] or 0),
        "unpriced_calls": u[5],
        "compaction_calls": u[6],
        "compaction_cost_usd": float(u[7]),
        "byok_calls": u[8],
        "platform_calls": u[9],
        "replies": t[0],
        "messages": int(t[1] or 0),
        "tool_calls": int(t[2] or 0),
        "tool_errors": int(t[3] or 0),
        "errors": t[4],
        "threads": th[0],
    }


def compare(report: AnalyticsReport, direct: dict[str, Any]) -> list[str]:
    """What differs between the report's totals and the direct sums (empty: none)."""
    wrong = []
    for field, want in direct.items():
        got = getattr(report.totals, field)
        ok = (
            math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-5)
            if isinstance(want, float)
            else got == want
        )
        if not ok:
            wrong.append(f"{field}: report {got} != direct {want}")
    for field in ("model_calls", "replies", "threads", "input_tokens", "errors"):
        in_series = sum(getattr(p, field) for p in report.series)
        in_agents = sum(getattr(a, field) for a in report.by_agent)
        if not in_series == in_agents == direct[field]:
            wrong.append(f"{field}: series {in_series}, agents {in_agents}, direct {direct[field]}")
    if sum(m.model_calls for m in report.by_model) != direct["model_calls"]:
        wrong.append("by_model's calls do not add up to the total")
    unpriced = [m.model for m in report.by_model if m.cost_usd is None]
    if direct["unpriced_calls"] and unpriced != ["local-llama"]:
        wrong.append(f"unpriced models: {unpriced}")
    return wrong


async def main(records: int, reps: int) -> int:
    dbs = Databases()
    if not dbs.external:
        print(f"no PostgreSQL answers at {dbs.admin}; this benchmark needs one on this machine")
        return 1
    db = dbs.fresh()
    url = db.env["AGENTSVC_DATABASE_URL"]
    now = datetime.now(UTC).replace(microsecond=0)
    try:
        await migrate(url)
        print(
            f"database {db.name} ({dbs.version}); generating a month ending {now:%Y-%m-%d %H:%M}Z"
        )
        t0 = time.perf_counter()
        await generate(url, records, now - timedelta(days=DAYS))
        print(f"  {'generated in':32} {time.perf_counter() - t0:7.1f} s")
        storage = PostgresStorage(url, min_size=1, max_size=2)
        await storage.open()
        try:
            return await measure(storage, now, reps)
        finally:
            await storage.close()
    finally:
        dbs.close()


async def measure(storage: PostgresStorage, now: datetime, reps: int) -> int:
    analytics = Analytics(storage.analytics, FixedClock(now), None)
    # the sweep's fold into the hourly sums: the whole month at once (as after an
    # upgrade), then again with nothing new (every sweep after)
    t0 = time.perf_counter()
    folded = await analytics.roll_up()
    print(f"  {'fold of the month':32} {time.perf_counter() - t0:7.1f} s ({folded:,} sums)")
    t0 = time.perf_counter()
    await analytics.roll_up()
    print(f"  {'fold with nothing new':32} {(time.perf_counter() - t0) * 1000:7.1f} ms")
    who = Principal(org_id=ORG, method="api_key")
    one = agent_id(7)
    print(f"\nmedian and p95 of {reps} runs (after one warm-up), ms:")
    print(
        f"  {'period':8} {'agentId':8} {'adapter p50':>12} {'p95':>8} {'report p50':>12} {'p95':>8}"
    )
    for period in ("24h", "7d", "30d"):
        for agent in (None, one):
            since, until, bucket = analytics.window(period, None, None, None)

            async def adapter(
                s: datetime = since, u: datetime = until, b: Any = bucket, a: Any = agent
            ) -> Any:
                return await storage.analytics.analytics(ORG, s, u, b, a)

            async def use_case(p: str = period, a: Any = agent) -> Any:
                return await analytics.report(who, p, agent_id=a)

            ta = await timed(reps, adapter)
            tr = await timed(reps, use_case)
            print(
                f"  {period:8} {'yes' if agent else 'no':8} {pct(ta, 50):12.1f} {pct(ta, 95):8.1f}"
                f" {pct(tr, 50):12.1f} {pct(tr, 95):8.1f}",
                flush=True,
            )
    for period in ("24h", "30d"):
        since, until, bucket = analytics.window(period, None, None, None)
        for agent in (None, one):
            print(f"\nEXPLAIN (ANALYZE, BUFFERS), {period}{', one agent' if agent else ''}:")
            params = {**analytics_params(ORG, since, until, bucket), "agent": agent}
            await explain(storage, params, agent is not None)
    since, until, _ = analytics.window("30d", None, None, None)
    print("\n30d totals against direct count/sum:")
    failed = False
    for agent in (None, one):
        report = await analytics.report(who, "30d", agent_id=agent)
        direct = await direct_totals(storage, since, until, agent)
        wrong = compare(report, direct)
        label = "one agent" if agent else "all agents"
        t = report.totals
        print(
            f"  {label:10} {'OK' if not wrong else 'MISMATCH'}: {t.model_calls:,} model calls,"
            f" {t.replies:,} replies, {t.threads:,} threads, {t.total_tokens:,} tokens,"
            f" ${t.cost_usd:,.2f} ({t.unpriced_calls:,} unpriced calls),"
            f" {t.compaction_calls:,} compaction, {t.byok_calls:,} byok, {t.errors:,} errors"
        )
        for line in wrong:
            print(f"    {line}")
        failed = failed or bool(wrong)
    return 1 if failed else 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.analytics", description=__doc__.split("\n")[0]
    )
    p.add_argument(
        "--records", type=int, default=3_000_000, help="usage records (default 3,000,000)"
    )
    p.add_argument("--reps", type=int, default=10, help="timed runs per case (default 10)")
    args = p.parse_args(argv)
    if args.records < 100 or args.reps < 1:
        p.error("--records is at least 100, --reps at least 1")
    return args


if __name__ == "__main__":
    a = parse()
    sys.exit(asyncio.run(main(a.records, a.reps)))
