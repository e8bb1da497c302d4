"""The sustained scenario: many turns in a row on one database, cost per segment.

The load levels run a few hundred turns on a fresh database; a cost that grows with
the stored rows (a plan chosen while the planner believed the tables empty, an index
that is missing) does not show there. This runs ``segments`` segments of
``SEGMENT_TURNS`` turns each at concurrency ``CONCURRENCY`` on one service and one
database, with fresh threads for every segment (10 turns each, as in the load
levels), and records per segment: the statements' execution time in PostgreSQL
(``pg_stat_statements``, when the server has it loaded; created in the scenario's
database, which is dropped afterwards), PostgreSQL's and the service's CPU per turn,
the statements that took the most time, and which tables PostgreSQL analyzed
meanwhile. The figure judged is the last segment against the first.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import psycopg

from bench.harness import PER_THREAD, log

if TYPE_CHECKING:
    from bench.database import Database
    from bench.harness import Bench

SEGMENT_TURNS = 2000
CONCURRENCY = 50
SEGMENT_CAP_S = 600.0
TOP = 4  # statements listed per segment

_STATEMENTS = (
    "SELECT queryid, left(regexp_replace(query, '\\s+', ' ', 'g'), 90), calls,"
    " total_exec_time, shared_blks_hit + shared_blks_read"
    " FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database"
    " WHERE datname = current_database()) AND query NOT LIKE '%%pg_stat%%'"
)
_ANALYZED = "SELECT relname, analyze_count, autoanalyze_count FROM pg_stat_user_tables"

Snapshot = dict[int, tuple[str, int, float, int]]  # queryid -> (text, calls, ms, blocks)
Analyzed = dict[str, tuple[int, int]]  # table -> (ANALYZE statements, autovacuum's)


class Statements:
    """``pg_stat_statements`` of one database, or nothing where the server lacks it."""

    def __init__(self, db: Database) -> None:
        self.url = db.env.get("AGENTSVC_DATABASE_URL")
        self.available = False
        if self.url is None:  # the embedded server: PostgreSQL's CPU only
            return
        try:
            with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                conn.execute(_STATEMENTS).fetchall()  # raises unless it is preloaded
            self.available = True
        except psycopg.Error as exc:
            log(f"sustained: no pg_stat_statements ({str(exc).strip()[:80]}); PG CPU only")

    def snapshot(self) -> tuple[Snapshot, Analyzed]:
        if self.url is None:
            return {}, {}
        with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
            analyzed = {
                str(r[0]): (int(r[1]), int(r[2])) for r in conn.execute(_ANALYZED).fetchall()
            }
            if not self.available:
                return {}, analyzed
            rows = conn.execute(_STATEMENTS).fetchall()
        return {int(r[0]): (str(r[1]), int(r[2]), float(r[3]), int(r[4])) for r in rows}, analyzed


def _delta(before: Snapshot, after: Snapshot, turns: int) -> dict[str, Any]:
    """What the segment's statements cost; the ``ANALYZE`` statements the service
    issues on its own (postgres/statistics.py) apart from the turns' statements."""
    diffs, analyze_ms = [], 0.0
    for qid, (text, calls, ms, blocks) in after.items():
        c0, ms0, b0 = before.get(qid, (text, 0, 0.0, 0))[1:]
        if calls <= c0:
            continue
        if text.upper().startswith("ANALYZE"):
            analyze_ms += ms - ms0
        else:
            diffs.append((ms - ms0, calls - c0, blocks - b0, text))
    diffs.sort(reverse=True)
    total_ms = sum(d[0] for d in diffs)
    return {
        "statement_s": round(total_ms / 1000, 3),
        "statement_ms_per_turn": round(total_ms / turns, 3),
        "calls_per_turn": round(sum(d[1] for d in diffs) / turns, 2),
        "buffers_per_turn": round(sum(d[2] for d in diffs) / turns, 1),
        "analyze_s": round(analyze_ms / 1000, 3),
        "top": [
            {
                "statement": text,
                "calls": calls,
                "mean_ms": round(ms / calls, 3),
                "buffers_per_call": round(blocks / calls, 1),
            }
            for ms, calls, blocks, text in diffs[:TOP]
        ],
    }


def sustained(bench: Bench, segments: int) -> None:
    c = CONCURRENCY
    per_worker = math.ceil(SEGMENT_TURNS / c)
    per = math.ceil(per_worker / PER_THREAD)
    log(f"sustained: {segments} segments of {SEGMENT_TURNS} turns at c={c} on one database")
    rows: list[dict[str, Any]] = []
    with bench.scenario() as (svc, fake, db):
        stats = Statements(db)
        agent = bench.create_agent(svc.url)
        bench.warm(svc, "service", bench.headers, bench.create_threads(svc.url, agent, 10))
        for i in range(1, segments + 1):
            flat = bench.create_threads(svc.url, agent, c * per)
            threads = [flat[k * per : (k + 1) * per] for k in range(c)]
            before, analyzed0 = stats.snapshot()
            level = bench.run_level(
                target="sustained",
                mode="instant",
                c=c,
                server=svc,
                wire="service",
                headers=bench.headers,
                threads=threads,
                turns_per_worker=per_worker,
                provider_ttft_s=0.0,
                fake=fake,
                db=db,
                cap_s=SEGMENT_CAP_S,
                record=False,
            )
            after, analyzed1 = stats.snapshot()
            turns = max(1, level["turns"])
            row: dict[str, Any] = {
                "segment": i,
                "turns": level["turns"],
                "errors": level["errors"],
                "turns_per_s": level["turns_per_s"],
                "ttft_overhead_p50_ms": level["ttft_overhead_ms"]["p50"],
                "server_cpu_ms_per_turn": level["server_cpu_ms_per_turn"],
                "pg_cpu_ms_per_turn": level["pg_cpu_ms_per_turn"],
                "foreign_cores": level["foreign_cores"],
                "analyzed": _grew(analyzed0, analyzed1, 0),
                "autoanalyzed": _grew(analyzed0, analyzed1, 1),
            }
            if stats.available:
                row.update(_delta(before, after, turns))
            rows.append(row)
            log(
                f"sustained segment {i}: statements {row.get('statement_s', '-')} s "
                f"({row.get('statement_ms_per_turn', '-')} ms/turn, "
                f"{row.get('buffers_per_turn', '-')} buffers/turn), "
                f"PG CPU {row['pg_cpu_ms_per_turn']} ms/turn, "
                f"service CPU {row['server_cpu_ms_per_turn']} ms/turn"
                + (f"; analyzed {', '.join(row['analyzed'])}" if row["analyzed"] else "")
                + (
                    f"; autovacuum analyzed {', '.join(row['autoanalyzed'])}"
                    if row["autoanalyzed"]
                    else ""
                )
            )
    key = "statement_ms_per_turn" if stats.available else "pg_cpu_ms_per_turn"
    first, last = rows[0].get(key), rows[-1].get(key)
    bench.results["sustained"] = {
        "segments": rows,
        "segment_turns": SEGMENT_TURNS,
        "concurrency": c,
        "judged_by": key,
        "ratio": round(last / first, 2) if first and last else None,
        "server_cpu_ratio": _ratio(rows, "server_cpu_ms_per_turn"),
        "pg_cpu_ratio": _ratio(rows, "pg_cpu_ms_per_turn"),
        "buffers_ratio": _ratio(rows, "buffers_per_turn"),
    }
    log(f"sustained: last/first segment ({key}) {bench.results['sustained']['ratio']}x")


def _ratio(rows: list[dict[str, Any]], key: str) -> float | None:
    first, last = rows[0].get(key), rows[-1].get(key)
    return round(last / first, 2) if first and last else None


def _grew(before: Analyzed, after: Analyzed, which: int) -> list[str]:
    return sorted(t for t, n in after.items() if n[which] > before.get(t, (0, 0))[which])
