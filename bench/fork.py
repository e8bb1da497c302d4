"""The fork scenario (docs/threads.md, "Fork a thread"): what ``POST
/api/threads/{id}/fork`` costs on a long thread.

One thread gets ``TURNS`` turns (twice as many messages: each user message and
its reply); then ``FORKS`` forks of its whole branch are made one after the
other. Measured per fork: the time from request to answer at the client, the
service's CPU and PostgreSQL's. Checked: each fork holds every message, in order.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import httpx

from bench.procs import CpuSnapshot
from bench.report import summary_ms

if TYPE_CHECKING:
    from bench.harness import Bench

TURNS = 250  # 500 messages
FORKS = 20
WARM = 3


def fork(bench: Bench, turns: int = TURNS) -> None:
    bench.results.setdefault("fork", [])
    with bench.scenario() as (svc, _fake, db):
        agent = bench.create_agent(svc.url)
        thread = bench.create_threads(svc.url, agent, 1)[0]
        with httpx.Client(base_url=svc.url, headers=bench.headers, timeout=60) as client:
            for i in range(turns):
                r = client.post(f"/api/threads/{thread}/messages", json={"content": f"m{i}"})
                r.raise_for_status()
            total = client.get(f"/api/threads/{thread}/messages").json()["total"]
            for _ in range(WARM):
                client.post(f"/api/threads/{thread}/fork", json={}).raise_for_status()
            pids, pg_pids = svc.pids(), db.backend_pids()
            before = CpuSnapshot.take(pids + pg_pids)
            took: list[float] = []
            forks: list[str] = []
            for _ in range(FORKS):
                t0 = time.perf_counter()
                r = client.post(f"/api/threads/{thread}/fork", json={})
                took.append(time.perf_counter() - t0)
                r.raise_for_status()
                forks.append(r.json()["id"])
            pg_pids = sorted(set(pg_pids) | set(db.backend_pids()))
            after = CpuSnapshot.take(pids + pg_pids)
            whole = sum(
                1
                for f in forks
                if client.get(f"/api/threads/{f}/messages", params={"limit": 1}).json()["total"]
                == total
            )
    row: dict[str, Any] = {
        "messages": total,
        "forks": FORKS,
        "whole_copies": whole,
        "latency_ms": summary_ms(took),
        "server_cpu_ms_per_fork": round(after.since(before, pids) * 1000 / FORKS, 3),
        "pg_cpu_ms_per_fork": round(after.since(before, pg_pids) * 1000 / FORKS, 3),
    }
    bench.results["fork"].append(row)
    print(
        f"fork: {FORKS} forks of a {total}-message thread ({whole} whole copies): "
        f"{row['latency_ms']['p50']} ms p50, {row['latency_ms']['p95']} ms p95; server CPU "
        f"{row['server_cpu_ms_per_fork']} ms, PG CPU {row['pg_cpu_ms_per_fork']} ms per fork",
        flush=True,
    )
