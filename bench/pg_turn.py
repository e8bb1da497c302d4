"""CPU of the turn's storage statements, through the PostgreSQL adapter, in isolation.

Run: ``.venv/bin/python -m bench.pg_turn [--threads 50] [--turns 10]`` (or ``make
bench-parts``). Needs a PostgreSQL server on this machine (``AGENTSVC_BENCH_DATABASE_URL``,
default ``postgresql://postgres@127.0.0.1:5432/postgres``): it creates a fresh database,
dropped afterwards, and reads the server's CPU from ``/proc/<backend pid>/schedstat``.

One connection, no concurrency. It makes ``--threads`` threads of ``--turns`` turns each,
as the service does (``turn_inputs``, ``begin_turn`` with the read's mark, ``finish_turn``
with a 50-word reply), and prints for each statement the median CPU of this process
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
from agentsvc_core.entities import Organization, Thread
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


async def turn(s: PostgresStorage, meter: Meter, thread: Thread) -> None:
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
    await meter.time("finish_turn", lambda: s.conversations.finish_turn(done, [reply], []))


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
                for _ in range(turns):
                    await turn(s, meter, thread)
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
