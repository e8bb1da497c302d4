"""The re-attach scenario: replies whose client drops mid-stream and picks
the stream up again with ``Last-Event-ID``.

The service runs with two worker processes, so a re-attach lands on either: on the
reply's own process it is served from memory; on the other, from the stored
batches the reply's process writes once it hears that someone follows it. Each
flow: send (a paced reply of ``TOKENS`` tokens), read the first ``CUT`` events,
hang up, ``GET /api/threads/{id}/stream`` with ``Last-Event-ID`` and ``runId``,
read to the end. Checked: every event exactly once (ids follow on, the tokens of
both parts are the ``done`` content). Measured: time from the re-attach request
to its first event, and the server's and PostgreSQL's CPU per flow, against the
same replies read whole without hanging up (the first pass, on the same threads):
the difference is what a re-attach costs.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import httpx

from bench.procs import CpuSnapshot
from bench.report import summary_ms

if TYPE_CHECKING:
    from bench.harness import Bench

FLOWS = 60
CONCURRENCY = 10
TOKENS = 40
TOKEN_DELAY_S = 0.02
CUT = 10  # events read before the connection drops


def _events(lines: list[str]) -> list[tuple[int, str, dict[str, Any]]]:
    out: list[tuple[int, str, dict[str, Any]]] = []
    fields: dict[str, str] = {}
    for line in lines:
        if not line:
            if "event" in fields:
                out.append((int(fields["id"]), fields["event"], json.loads(fields["data"])))
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(": ")
            fields[name] = value
    return out


async def _whole(client: httpx.AsyncClient, thread: str) -> tuple[float, bool]:
    """The baseline: the same reply, read to the end on one connection."""
    r = await client.post(f"/api/threads/{thread}/messages", json={"content": "tell me"})
    events = _events([*r.text.split("\n"), ""])
    text = "".join(d["delta"] for _, e, d in events if e == "token")
    return 0.0, events[-1][1] == "done" and events[-1][2]["content"] == text


async def _flow(client: httpx.AsyncClient, thread: str) -> tuple[float, bool]:
    first: list[str] = []
    seen = 0
    async with client.stream(
        "POST", f"/api/threads/{thread}/messages", json={"content": "tell me"}
    ) as r:
        async for line in r.aiter_lines():
            first.append(line)
            if not line:
                seen += 1
                if seen == CUT:
                    break
    head = _events(first)
    run_id = head[0][2]["runId"]
    t0 = time.perf_counter()
    lines: list[str] = []
    waited = None
    async with client.stream(
        "GET",
        f"/api/threads/{thread}/stream",
        params={"runId": run_id},
        headers={"Last-Event-ID": str(head[-1][0])},
    ) as r:
        async for line in r.aiter_lines():
            if waited is None and line.startswith("id:"):
                waited = time.perf_counter() - t0
            lines.append(line)
    rest = _events([*lines, ""])
    ids = [i for i, _, _ in head + rest]
    text = "".join(d["delta"] for _, e, d in head + rest if e == "token")
    whole = (
        ids == list(range(1, len(ids) + 1))
        and rest[-1][1] == "done"
        and rest[-1][2]["content"] == text
    )
    return waited or 0.0, whole


def reattach(bench: Bench) -> None:
    bench.results.setdefault("reattach", [])
    with bench.scenario(0.0, TOKEN_DELAY_S, workers=2, fake_tokens=TOKENS) as (svc, _fake, db):
        agent = bench.create_agent(svc.url)
        threads = bench.create_threads(svc.url, agent, FLOWS)

        def run(flow: Callable[[httpx.AsyncClient, str], Awaitable[tuple[float, bool]]]) -> Any:
            async def go() -> list[tuple[float, bool]]:
                sem = asyncio.Semaphore(CONCURRENCY)
                limits = httpx.Limits(max_connections=2 * CONCURRENCY)
                async with httpx.AsyncClient(
                    base_url=svc.url, headers=bench.headers, timeout=60, limits=limits
                ) as client:

                    async def one(t: str) -> tuple[float, bool]:
                        async with sem:
                            return await flow(client, t)

                    return list(await asyncio.gather(*(one(t) for t in threads)))

            pids, pg_pids = svc.pids(), db.backend_pids()
            before = CpuSnapshot.take(pids + pg_pids)
            results = asyncio.run(go())
            pg_pids = sorted(set(pg_pids) | set(db.backend_pids()))
            after = CpuSnapshot.take(pids + pg_pids)
            return (
                results,
                round(after.since(before, pids) * 1000 / FLOWS, 3),
                round(after.since(before, pg_pids) * 1000 / FLOWS, 3),
            )

        base, base_cpu, base_pg = run(_whole)
        results, cpu, pg = run(_flow)
    whole = sum(1 for _, ok in results if ok)
    row = {
        "flows": FLOWS,
        "workers": 2,
        "tokens": TOKENS,
        "cut_after_events": CUT,
        "every_event_once": whole,
        "reattach_first_event_ms": summary_ms([w for w, _ in results]),
        "server_cpu_ms_per_flow": cpu,
        "pg_cpu_ms_per_flow": pg,
        "whole_replies_ok": sum(1 for _, ok in base if ok),
        "server_cpu_ms_per_whole_reply": base_cpu,
        "pg_cpu_ms_per_whole_reply": base_pg,
    }
    bench.results["reattach"].append(row)
    print(
        f"reattach: {whole}/{FLOWS} flows got every event once; first event after "
        f"{row['reattach_first_event_ms']['p50']} ms (p50), "
        f"{row['reattach_first_event_ms']['p95']} ms (p95); server CPU "
        f"{cpu} ms, PG CPU {pg} ms per flow (read whole without hanging up: {base_cpu} ms,"
        f" {base_pg} ms)",
        flush=True,
    )
