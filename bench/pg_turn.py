"""CPU of the turn's storage statements, through the PostgreSQL adapter, in isolation.

Run: ``.venv/bin/python -m bench.pg_turn [--threads 50] [--turns 10]`` (or ``make
bench-parts``). Needs a PostgreSQL server on this machine (``AGENTSVC_BENCH_DATABASE_URL``,
default ``postgresql://postgres@127.0.0.1:5432/postgres``): it creates a fresh database,
dropped afterwards, and reads the server's CPU from ``/proc/<backend pid>/schedstat``.

One connection, no concurrency. It makes ``--threads`` threads of ``--turns`` turns each,
as the service does (``turn_inputs``, ``begin_turn`` with the read's mark, ``finish_turn``
with a 50-word reply; every other turn with a usage record and the stored trace
of a one-call turn, built as the reply builds it), and prints for each statement the
median CPU of this process
(``time.thread_time``: psycopg and the adapter) and of the PostgreSQL backend. Then, on
one thread of 1000 messages, ``turn_inputs`` with the history cache cold (every message
read) and warm (only the new ones).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tests.contract.conftest import now
from tests.contract.test_agents_contract import agent_in
from tests.contract.test_conversations_contract import a_message, a_run, a_thread

from agentsvc_adapters.postgres import PostgresStorage
from agentsvc_adapters.postgres.migrate import migrate
from agentsvc_adapters.postgres.turns import _Histories
from agentsvc_adapters.prices import load_prices
from agentsvc_core.entities import Organization, Run, Thread, TraceRecord, Usage, UsageRecord
from agentsvc_core.ports.telemetry import FinishedSpan
from agentsvc_core.use_cases.traces.build import TraceConfig, TurnFacts, build_trace
from bench.database import Databases

ORG = "org-bench"
REPLY = " ".join(f"t{i}" for i in range(50))


def backend_ns(pid: int) -> int:
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


class Meter:
    """Median CPU of this thread and of the backend, per named operation."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.ours: dict[str, list[float]] = {}
        self.theirs: dict[str, list[float]] = {}

    async def time(self, name: str, op: Callable[[], Awaitable[Any]]) -> Any:
        c0, b0 = time.thread_time(), backend_ns(self.pid)
        result = await op()
        self.ours.setdefault(name, []).append(time.thread_time() - c0)
        self.theirs.setdefault(name, []).append((backend_ns(self.pid) - b0) / 1e9)
        return result

    def report(self, skip: int = 0) -> None:
        for name in self.ours:
            ours = statistics.median(self.ours[name][skip:]) * 1e6
            theirs = statistics.median(self.theirs[name][skip:]) * 1e6
            print(f"  {name:28} this process {ours:6.0f} us   PostgreSQL {theirs:6.0f} us")


async def turn(s: PostgresStorage, meter: Meter, thread: Thread, traced: int = 0) -> None:
    inputs = await meter.time(
        "turn_inputs", lambda: s.turn_reader.turn_inputs(ORG, thread.id, ["resolver"])
    )
    run = a_run(thread)
    user = a_message(thread, content="Hello, how are you today?", run_id=run.id)
    stale = now() - timedelta(seconds=45)
    await meter.time(
        "begin_turn",
        lambda: s.conversations.begin_turn(run, [user], stale, inputs.history_mark),
    )
    reply = msgspec.structs.replace(user, id=uuid.uuid4(), role="assistant", content=REPLY)
    done = msgspec.structs.replace(run, status="completed", finished_at=now())
    if traced == 0:
        await meter.time("finish_turn", lambda: s.conversations.finish_turn(done, [reply], []))
        return
    usage = [a_usage(done, thread)]
    trace = a_trace(done, thread)
    if traced == 1:
        await meter.time(
            "finish_turn, usage", lambda: s.conversations.finish_turn(done, [reply], usage)
        )
        return
    await meter.time(
        "finish_turn, usage and trace",
        lambda: s.conversations.finish_turn(done, [reply], usage, None, trace),
    )


PRICED = TraceConfig(prices=load_prices())


def a_usage(run: Run, thread: Thread) -> UsageRecord:
    return UsageRecord(
        id=uuid.uuid4(),
        org_id=ORG,
        agent_id=thread.agent_id,
        thread_id=thread.id,
        run_id=run.id,
        message_id=None,
        provider="beta",
        model="gpt-4o",
        usage=Usage(input_tokens=1200, output_tokens=50),
        key_source="platform",
        metadata={},
        created_at=now(),
        cost_usd=0.0035,
    )


def a_trace(run: Run, thread: Thread) -> TraceRecord:
    """What a one-call turn stores: its span and its model call's, as the reply
    builds them (use_cases/traces/build.py)."""
    t0 = time.time_ns()
    trace_id, root = uuid.uuid4().hex, uuid.uuid4().hex[:16]

    def span(name: str, span_id: str, parent: str | None, **kw: Any) -> FinishedSpan:
        return FinishedSpan(
            trace_id=trace_id,
            span_id=span_id,
            parent_span_id=parent,
            parent_remote=False,
            sampled=True,
            name=name,
            kind="internal",
            start_ns=t0,
            end_ns=t0 + 900_000,
            status="unset",
            **kw,
        )

    spans = [
        span(
            "invoke_agent bench",
            root,
            None,
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "bench"},
            input={"messages": ["Hello, how are you today?"]},
            output=REPLY,
        ),
        span(
            "chat gpt-4o",
            uuid.uuid4().hex[:16],
            root,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 1200,
                "gen_ai.usage.output_tokens": 50,
                "agentsvc.key_source": "platform",
                "gen_ai.response.finish_reasons": ("stop",),
                "gen_ai.response.time_to_first_chunk": 0.2,
            },
            input={"messages": 2, "tools": 0},
            output={"text": REPLY},
        ),
    ]
    facts = TurnFacts(
        org_id=ORG,
        agent_id=thread.agent_id,
        agent_name="bench",
        model="gpt-4o",
        run=run,
        message_id=None,
        input_messages=1,
        step_limit=False,
        empty=False,
        error=None,
    )
    return build_trace(PRICED, facts, spans, now())


async def main(threads: int, turns: int) -> int:
    dbs = Databases()
    if not dbs.external:
        print(f"no PostgreSQL answers at {dbs.admin}; this benchmark needs one on this machine")
        return 1
    db = dbs.fresh()
    url = db.env["AGENTSVC_DATABASE_URL"]
    try:
        await migrate(url)
        s = PostgresStorage(url, min_size=1, max_size=1)
        await s.open()
        try:
            async with s.pool.connection() as conn:
                row = await (await conn.execute("SELECT pg_backend_pid()")).fetchone()
            assert row is not None
            await s.organizations.ensure(Organization(id=ORG, created_at=now()))
            agent = agent_in(ORG)
            await s.agents.add(agent)
            meter = Meter(row[0])
            for _ in range(threads):
                thread = await s.threads.add(a_thread(ORG, agent.id))
                for k in range(turns):
                    await turn(s, meter, thread, traced=k % 3)
            print(f"{threads} threads x {turns} turns, one connection; median per statement:")
            meter.report(skip=min(20, threads * turns // 4))  # prepared after 5 runs

            long = await s.threads.add(a_thread(ORG, agent.id))
            for _ in range(500):
                await turn(s, Meter(row[0]), long)
            reader = s.turn_reader
            history = Meter(row[0])
            for _ in range(30):
                reader._histories = _Histories()  # type: ignore[attr-defined]
                await history.time(
                    "turn_inputs, cache cold", lambda: reader.turn_inputs(ORG, long.id, [])
                )
                await history.time(
                    "turn_inputs, cache warm", lambda: reader.turn_inputs(ORG, long.id, [])
                )
            print("one thread of 1000 messages; median of 30:")
            history.report()
        finally:
            await s.close()
    finally:
        dbs.drop(db)
        dbs.close()
    return 0


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=50)
    parser.add_argument("--turns", type=int, default=10)
    args = parser.parse_args()
    try:
        import uvloop  # noqa: PLC0415

        run: Callable[[Any], Any] = uvloop.run
    except ImportError:  # pragma: no cover
        run = asyncio.run
    raise SystemExit(run(main(args.threads, args.turns)))


if __name__ == "__main__":
    cli()
