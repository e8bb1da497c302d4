"""The scenarios: start what they measure, drive the clients, turn records into rows."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import re
import secrets
import shutil
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench.clients import (
    GAUGE_LIVE,
    ClientPool,
    CrudJob,
    JobResult,
    TurnJob,
    TurnRecord,
    WorkerPlan,
)
from bench.database import Database, Databases
from bench.fake_server import API_KEY as FAKE_KEY
from bench.procs import (
    BIN,
    Child,
    CpuSnapshot,
    RssSampler,
    free_port,
    open_fds,
    spawn,
    status_kb,
    wait_http,
    wait_line,
    wait_quiet,
)
from bench.report import pct, summary_ms

PYTHON = sys.executable
SAMPLER_DIR = Path(__file__).resolve().parent / "cpu_sampler"  # --profile cpu
MODEL = "gpt-bench"
PER_THREAD = 10  # turns on one thread before a worker moves to a fresh one
FOREIGN_LIMIT = 0.2  # CPUs' worth of other processes' work that makes a level run again
MAX_ATTEMPTS = 3


@dataclass
class Config:
    quick: bool
    levels: list[int]
    turns: int
    tokens: int
    paced_first_token_delay_s: float
    paced_token_delay_s: float
    paced_turns: int
    level_cap_s: float
    clients: int
    workers2: bool
    history_messages: int
    sustained_segments: int
    slow_streams: int
    slow_tokens: int
    slow_token_delay_s: float
    slow_ramp_per_s: float
    slow_search: bool
    crud_concurrency: int
    crud_requests: int
    profile: str | None  # None, "py-spy" or "cpu"
    log_dir: Path
    only: set[str]
    quiet_wait_s: float = 300.0
    otlp: bool = False  # the service exports its spans (OTLP/HTTP) to a loopback sink


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _split(items: list[Any], parts: int) -> list[list[Any]]:
    """Round-robin ``items`` over ``parts`` lists."""
    return [items[i::parts] for i in range(parts)]


def _error_kind(error: str) -> str:
    m = re.search(r'"code":"([A-Z_]+)"', error)
    if m:
        return m.group(1)
    m = re.match(r"HTTP (\d+)", error)
    if m:
        return f"HTTP {m.group(1)}"
    return error.split(":", 1)[0][:60]


class Bench:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.api_key = "ask_bench_" + secrets.token_hex(16)
        self.dbs = Databases()
        self.pool = ClientPool(cfg.clients)
        self.results: dict[str, Any] = {"load": [], "ratios": [], "slow_streams": [], "crud": []}
        self._n = 0

    def quiet(self) -> None:
        """Before a scenario: wait for the machine to calm down (another job's tests...)."""
        wait_quiet(0.15, self.cfg.quiet_wait_s, log)

    def close(self) -> None:
        self.pool.close()
        self.dbs.close()

    # --- processes -------------------------------------------------------------------

    def _name(self, kind: str) -> str:
        self._n += 1
        return f"{self._n:02d}-{kind}"

    def _env(self) -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if not k.startswith("AGENTSVC_")}

    def start_fake(
        self, first: float = 0.0, delay: float = 0.0, tokens: int | None = None
    ) -> Child:
        n = self.cfg.tokens if tokens is None else tokens
        argv = [PYTHON, "-m", "bench.fake_server", "--tokens", str(n)]
        argv += ["--first-token-delay", str(first), "--token-delay", str(delay)]
        child = spawn(self._name("fake"), argv, self._env(), self.cfg.log_dir)
        child.url = wait_line(child, "URL ")
        return child

    def start_bare(self, first: float = 0.0, delay: float = 0.0) -> Child:
        port = free_port()
        argv = [PYTHON, "-m", "bench.bare_app", "--port", str(port), "--tokens"]
        argv += [str(self.cfg.tokens), "--first-token-delay", str(first)]
        argv += ["--token-delay", str(delay)]
        child = spawn(self._name("bare"), argv, self._env(), self.cfg.log_dir)
        child.url = f"http://127.0.0.1:{port}"
        wait_http(child, child.url + "/healthz")
        return child

    def start_service(
        self, db: Database, fake: Child, workers: int = 1, otlp: str | None = None
    ) -> Child:
        port = free_port()
        env = self._env()
        env.update(db.env)
        env.update(
            {
                "AGENTSVC_PORT": str(port),
                "AGENTSVC_BOOTSTRAP_API_KEY": self.api_key,
                "AGENTSVC_BETA_BASE_URL": fake.url + "/v1",
                "AGENTSVC_BETA_API_KEY": FAKE_KEY,
                "AGENTSVC_LOG_LEVEL": "WARNING",
                # the rate limits stay on (their cost is part of a turn's), with
                # budgets one key on one address at full load never exhausts
                "AGENTSVC_RATE_LIMIT_PER_MIN": "10000000",
                "AGENTSVC_RATE_LIMIT_PER_ADDRESS_PER_MIN": "10000000",
            }
        )
        if otlp is not None:  # tracing export on, batched as the SDK does by default
            env["OTEL_TRACES_EXPORTER"] = "otlp"
            env["OTEL_EXPORTER_OTLP_PROTOCOL"] = "http/protobuf"
            env["OTEL_EXPORTER_OTLP_ENDPOINT"] = otlp
        if "AGENTSVC_DATA_DIR" not in env:
            env["AGENTSVC_DATA_DIR"] = str(self.cfg.log_dir / "data")
        if self.cfg.profile == "cpu" and workers == 1:  # bench/cpu_sampler, signalled per level
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(SAMPLER_DIR), env.get("PYTHONPATH", "")) if p
            )
            env["AGENTSVC_BENCH_CPU_SAMPLER"] = str(self.cfg.log_dir / "cpu-sampler.next")
        argv = [str(BIN / "agentsvc"), "serve", "--workers", str(workers)]
        child = spawn(self._name(f"service-w{workers}"), argv, env, self.cfg.log_dir)
        child.url = f"http://127.0.0.1:{port}"
        wait_http(child, child.url + "/healthz", timeout=120)
        if workers > 1:  # every worker up: each answers healthz once its lifespan ran
            deadline = time.monotonic() + 60
            while len(child.pids()) < workers + 1 and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(2.0)
        self.dbs.note_embedded_version()
        return child

    @contextmanager
    def scenario(
        self,
        first: float = 0.0,
        delay: float = 0.0,
        workers: int = 1,
        fake_tokens: int | None = None,
    ) -> Iterator[tuple[Child, Child, Database]]:
        """A fresh database, a fake provider and the service on them; all gone afterwards."""
        self.quiet()
        db = self.dbs.fresh()
        fake = svc = sink = None
        try:
            fake = self.start_fake(first, delay, fake_tokens)
            if self.cfg.otlp:
                sink = spawn(
                    self._name("otlp-sink"),
                    [PYTHON, "-m", "bench.otlp_sink"],
                    self._env(),
                    self.cfg.log_dir,
                )
                sink.url = wait_line(sink, "URL ")
            svc = self.start_service(db, fake, workers, otlp=sink.url if sink else None)
            yield svc, fake, db
        finally:
            for child in (svc, fake, sink):
                if child is not None:
                    child.stop()
            self.dbs.drop(db)

    # --- API set-up ------------------------------------------------------------------

    @property
    def headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.api_key}"}

    def create_agent(self, url: str) -> str:
        r = httpx.post(
            url + "/api/agents",
            json={"name": "bench", "defaultModel": MODEL, "stablePreamble": "Be brief."},
            headers=self.headers,
            timeout=30,
        )
        r.raise_for_status()
        return str(r.json()["id"])

    def create_threads(self, url: str, agent: str, n: int) -> list[str]:
        async def make() -> list[str]:
            sem = asyncio.Semaphore(32)
            async with httpx.AsyncClient(
                base_url=url,
                headers=self.headers,
                timeout=60,
                limits=httpx.Limits(max_connections=32),
            ) as client:

                async def one() -> str:
                    async with sem:
                        r = await client.post("/api/threads", json={"agentId": agent})
                        r.raise_for_status()
                        return str(r.json()["id"])

                return list(await asyncio.gather(*(one() for _ in range(n))))

        return asyncio.run(make())

    # --- load levels -----------------------------------------------------------------

    def level_turns(self, c: int, paced: bool) -> int:
        if paced:
            # at least 10 turns per worker (4 in a quick run): with fewer, the p95 is
            # the level's first, synchronised turn of every worker (its cold start)
            return max(self.cfg.paced_turns, (4 if self.cfg.quick else 10) * c)
        return max(self.cfg.turns, 3 * c)

    def run_level(
        self,
        *,
        target: str,
        mode: str,
        c: int,
        server: Child,
        wire: str,
        headers: dict[str, str],
        threads: list[list[str]],
        turns_per_worker: int,
        provider_ttft_s: float,
        fake: Child | None = None,
        db: Database | None = None,
        workers: int = 1,
        per_thread: int = PER_THREAD,
        cap_s: float | None = None,
        record: bool = True,
    ) -> dict[str, Any]:
        cap = cap_s if cap_s is not None else self.cfg.level_cap_s
        plans = [WorkerPlan(i, threads[i], turns_per_worker) for i in range(c)]
        parts = _split(plans, min(self.pool.n, c))
        start_at = time.time() + 1.0 + c * 0.01
        jobs: list[TurnJob | CrudJob | None] = [
            TurnJob(
                base_url=server.url,
                headers=headers,
                workers=part,
                start_at=start_at,
                stop_at=start_at + cap,
                wire=wire,
                per_thread=per_thread,
            )
            for part in parts
        ]
        server_pids = server.pids()
        self.pool.send(jobs)
        time.sleep(max(0.0, start_at - time.time()))
        pg_pids = db.backend_pids() if db else []
        fake_pids = fake.pids() if fake else []
        mine = [os.getpid(), *self.pool.pids()]
        before = CpuSnapshot.take(server_pids + pg_pids + fake_pids + mine)
        with RssSampler(server_pids) as rss:
            results = self.pool.collect(timeout=cap + 300)
        if db:  # the pool may have opened connections meanwhile
            pg_pids = sorted(set(pg_pids) | set(db.backend_pids()))
        ours = server_pids + pg_pids + fake_pids + mine
        after = CpuSnapshot.take(ours)
        row = self._row(results, provider_ttft_s)
        ok = max(1, row["turns"])
        server_cpu = after.since(before, server_pids)
        pg_cpu = after.since(before, pg_pids)
        fake_cpu = after.since(before, fake_pids)
        # the clients' CPU over the same window as the rest (their job's own count would
        # add making the clients and the warm-up before it)
        client_cpu = after.since(before, self.pool.pids())
        row.update(
            {
                "target": target,
                "mode": mode,
                "workers": workers,
                "concurrency": c,
                "server_cpu_ms_per_turn": round(server_cpu * 1000 / ok, 3),
                "server_cpu_ms_per_turn_ticks": round(
                    after.ticks_since(before, server_pids) * 1000 / ok, 3
                ),
                "pg_cpu_ms_per_turn": round(pg_cpu * 1000 / ok, 3) if db else None,
                "fake_cpu_ms_per_turn": round(fake_cpu * 1000 / ok, 3) if fake else None,
                "client_cpu_ms_per_turn": round(client_cpu * 1000 / ok, 3),
                "machine_cpu_ms_per_turn": round(after.machine_seconds(before) * 1000 / ok, 3),
                "peak_rss_mb": round(rss.peak_kb / 1024, 1),
                "machine_busy_pct": round(after.busy_fraction(before) * 100, 1),
                "foreign_cores": round(after.foreign_cores(before, ours), 2),
            }
        )
        if record:  # a row of the load table (the sustained scenario keeps its own)
            self.results["load"].append(row)
        log(
            f"{target:8} {mode:7} w={workers} c={c:<4} turns={row['turns']:<5} err={row['errors']} "
            f"overhead p50={row['ttft_overhead_ms']['p50']} "
            f"p95={row['ttft_overhead_ms']['p95']} ms "
            f"turns/s={row['turns_per_s']} cpu={row['server_cpu_ms_per_turn']} ms/turn "
            f"pg={row['pg_cpu_ms_per_turn']} busy={row['machine_busy_pct']}% "
            f"foreign={row['foreign_cores']} cores"
        )
        return row

    @staticmethod
    def _row(results: list[JobResult], provider_ttft_s: float) -> dict[str, Any]:
        records: list[TurnRecord] = [r for res in results for r in res.records]
        ok = [r for r in records if r[5] is None]
        errors = [r[5] for r in records if r[5] is not None]
        window = max(r.ended for r in results) - min(r.began for r in results)
        overhead = [r[2] - provider_ttft_s for r in ok if r[2] is not None]
        return {
            "turns": len(ok),
            "errors": len(errors),
            "error_kinds": dict(Counter(_error_kind(e) for e in errors)),
            "error_samples": errors[:3],
            "ttft_overhead_ms": summary_ms(overhead),
            # each worker's first turn: all c of them sent at the same instant (a burst);
            # the rest: the level's steady state
            "ttft_overhead_first_ms": summary_ms(
                [r[2] - provider_ttft_s for r in ok if r[2] is not None and r[1] == 0]
            ),
            "ttft_overhead_steady_ms": summary_ms(
                [r[2] - provider_ttft_s for r in ok if r[2] is not None and r[1] > 0]
            ),
            "ttft_ms": summary_ms([r[2] for r in ok if r[2] is not None]),
            "e2e_ms": summary_ms([r[3] for r in ok]),
            "window_s": round(window, 3),
            "turns_per_s": round(len(ok) / window, 1) if window > 0 else None,
            "tokens_per_s": round(sum(r[4] for r in ok) / window, 0) if window > 0 else None,
        }

    def warm(self, server: Child, wire: str, headers: dict[str, str], threads: list[str]) -> None:
        """A few unmeasured turns: imports, prepared statements, pools, caches."""
        c = len(threads)
        plans = [WorkerPlan(i, [threads[i]], 5) for i in range(c)]
        jobs: list[TurnJob | CrudJob | None] = [
            TurnJob(server.url, headers, part, time.time() + 0.5, time.time() + 60, wire)
            for part in _split(plans, min(self.pool.n, c))
        ]
        self.pool.run(jobs, timeout=120)

    def levels(
        self,
        *,
        target: str,
        mode: str,
        server: Child,
        provider_ttft_s: float,
        fake: Child | None = None,
        db: Database | None = None,
        workers: int = 1,
        on_level: Callable[[int], None] | None = None,
    ) -> None:
        paced = mode == "paced"
        if target == "service":
            agent = self.create_agent(server.url)
            headers, wire = self.headers, "service"
            self.warm(server, wire, headers, self.create_threads(server.url, agent, 10))
        elif target == "bare":
            agent, headers, wire = "", {}, "service"
            self.warm(server, wire, headers, ["bare"] * 10)
        else:  # control: straight to the fake
            agent, headers, wire = "", {"authorization": f"Bearer {FAKE_KEY}"}, "openai"
            self.warm(server, wire, headers, ["-"] * 10)
        for c in self.cfg.levels:
            total = self.level_turns(c, paced)
            per_worker = math.ceil(total / c)
            for attempt in range(1, MAX_ATTEMPTS + 1):
                if target == "service":
                    per = math.ceil(per_worker / PER_THREAD)
                    flat = self.create_threads(server.url, agent, c * per)
                    threads = [flat[i * per : (i + 1) * per] for i in range(c)]
                else:
                    threads = [["bare"]] * c
                if on_level is not None:
                    on_level(c)
                row = self.run_level(
                    target=target,
                    mode=mode,
                    c=c,
                    server=server,
                    wire=wire,
                    headers=headers,
                    threads=threads,
                    turns_per_worker=per_worker,
                    provider_ttft_s=provider_ttft_s,
                    fake=fake,
                    db=db,
                    workers=workers,
                )
                row["attempt"] = attempt
                if row["foreign_cores"] <= FOREIGN_LIMIT or attempt == MAX_ATTEMPTS:
                    break
                log(f"another job used {row['foreign_cores']} cores meanwhile: measuring again")
                self.results["load"].remove(row)
                self.quiet()

    # --- scenarios ---------------------------------------------------------------------

    def control(self) -> None:
        log("control: the client straight against the fake provider (instant)")
        self.quiet()
        fake = self.start_fake()
        try:
            self.levels(target="control", mode="instant", server=fake, provider_ttft_s=0.0)
        finally:
            fake.stop()

    def bare(self, mode: str) -> None:
        first, delay = self._pace(mode)
        log(f"bare ASGI SSE app ({mode})")
        self.quiet()
        app = self.start_bare(first, delay)
        try:
            self.levels(target="bare", mode=mode, server=app, provider_ttft_s=first)
        finally:
            app.stop()

    def _pace(self, mode: str) -> tuple[float, float]:
        if mode == "paced":
            return self.cfg.paced_first_token_delay_s, self.cfg.paced_token_delay_s
        return 0.0, 0.0

    def service(self, mode: str, workers: int = 1) -> None:
        first, delay = self._pace(mode)
        log(f"service ({mode}, --workers {workers})")
        with self.scenario(first, delay, workers) as (svc, fake, db):
            hook = None
            if self.cfg.profile and workers == 1:
                hook = self._profiler(svc, mode)
            self.levels(
                target="service",
                mode=mode,
                server=svc,
                provider_ttft_s=first,
                fake=fake,
                db=db,
                workers=workers,
                on_level=hook,
            )

    def _profiler(self, svc: Child, mode: str) -> Callable[[int], None] | None:
        """Collapsed stacks of the service for 8 s of each level: py-spy's (if
        installed), or the CPU-time sampler's (``--profile cpu``)."""
        if self.cfg.profile == "cpu":
            control = self.cfg.log_dir / "cpu-sampler.next"
            pending: list[threading.Timer] = []

            def sample(c: int) -> None:
                if pending and pending[-1].is_alive():  # the last level was under 8 s
                    pending[-1].cancel()
                    _signal_quietly(svc.pid, signal.SIGUSR1)
                    time.sleep(0.2)  # let it write before the next start
                out = self.cfg.log_dir / f"profile-cpu-service-{mode}-c{c}.txt"
                log(f"sampling the service's CPU at c={c} into {out}")
                control.write_text(str(out))
                os.kill(svc.pid, signal.SIGUSR2)
                stop = threading.Timer(8.0, _signal_quietly, (svc.pid, signal.SIGUSR1))
                stop.daemon = True
                stop.start()
                pending.append(stop)

            return sample
        spy = shutil.which("py-spy") or (str(BIN / "py-spy") if (BIN / "py-spy").exists() else None)
        if spy is None:
            log("--profile: py-spy not found (.venv/bin/pip install py-spy); not profiling")
            return None

        def hook(c: int) -> None:
            out = self.cfg.log_dir / f"profile-service-{mode}-c{c}.txt"
            log(f"profiling the service at c={c} into {out}")
            argv = [spy, "record", "--pid", str(svc.pid), "--duration", "8", "--rate", "200"]
            argv += ["--format", "raw", "--nonblocking", "-o", str(out)]
            spawn(self._name("py-spy"), argv, self._env(), self.cfg.log_dir)

        return hook

    def ratios(self) -> None:
        rows = self.results["load"]
        for svc in rows:
            if svc["target"] != "service" or svc["workers"] != 1:
                continue
            bare = next(
                (
                    r
                    for r in rows
                    if r["target"] == "bare"
                    and r["mode"] == svc["mode"]
                    and r["concurrency"] == svc["concurrency"]
                ),
                None,
            )
            if bare is None or not bare["turns_per_s"]:
                continue
            b_cpu = bare["server_cpu_ms_per_turn"] or None
            b_ttft = bare["ttft_ms"]["p50"] or None
            self.results["ratios"].append(
                {
                    "mode": svc["mode"],
                    "concurrency": svc["concurrency"],
                    "throughput_ratio": round(svc["turns_per_s"] / bare["turns_per_s"], 3),
                    "cpu_ratio": round(svc["server_cpu_ms_per_turn"] / b_cpu, 2) if b_cpu else None,
                    "ttft_p50_ratio": round(svc["ttft_ms"]["p50"] / b_ttft, 2) if b_ttft else None,
                    "extra_cpu_ms_per_turn": round(
                        svc["server_cpu_ms_per_turn"] - bare["server_cpu_ms_per_turn"], 3
                    ),
                }
            )
        for row in rows:
            control = next(
                (
                    r
                    for r in rows
                    if r["target"] == "control"
                    and r["mode"] == row["mode"]
                    and r["concurrency"] == row["concurrency"]
                ),
                None,
            )
            if control is not None and row["target"] != "control":
                p50, ctl = row["ttft_overhead_ms"]["p50"], control["ttft_overhead_ms"]["p50"]
                if p50 is not None and ctl is not None:
                    row["net_overhead_p50_ms"] = round(p50 - ctl, 2)

    def history(self) -> None:
        n = self.cfg.history_messages
        log(f"history growth: {n} messages on one thread")
        with self.scenario() as (svc, fake, db):
            agent = self.create_agent(svc.url)
            self.warm(svc, "service", self.headers, self.create_threads(svc.url, agent, 4))
            thread = self.create_threads(svc.url, agent, 1)[0]
            ours = self._ours(svc, fake, db)
            before = CpuSnapshot.take(ours)
            job = TurnJob(
                base_url=svc.url,
                headers=self.headers,
                workers=[WorkerPlan(0, [thread], n)],
                start_at=time.time() + 0.5,
                stop_at=time.time() + 600,
                per_thread=n,
                cpu_pids=svc.pids(),
            )
            records = sorted(self.pool.run([job], timeout=900)[0].records, key=lambda r: r[1])
            foreign = CpuSnapshot.take(ours).foreign_cores(before, ours)
        windows = []
        starts = sorted({0, *range(50, n - 10, 50), n - 10})
        for s in starts:
            chunk = [r for r in records[s : s + 10] if r[5] is None]
            windows.append(
                {
                    "from": s + 1,
                    "to": s + len(records[s : s + 10]),
                    "overhead_ms": _ms(pct([r[2] for r in chunk if r[2] is not None], 50)),
                    "e2e_ms": _ms(pct([r[3] for r in chunk], 50)),
                    "server_cpu_ms": _ms(pct([(r[6] or 0) / 1e9 for r in chunk], 50)),
                }
            )
        first, last = windows[0]["overhead_ms"], windows[-1]["overhead_ms"]
        self.results["history"] = {
            "messages": len(records),
            "last_n": n,
            "errors": sum(1 for r in records if r[5] is not None),
            "windows": windows,
            "first_overhead_ms": first,
            "last_overhead_ms": last,
            "ratio": round(last / first, 2) if first and last else None,
            "foreign_cores": round(foreign, 2),
            "per_message": [
                [r[1] + 1, _ms(r[2]), _ms(r[3]), _ms(r[6] / 1e9 if r[6] is not None else None)]
                for r in records
            ],
        }
        log(f"history: overhead {first} ms at 1-10 -> {last} ms at {n - 9}-{n}")

    def crud(self) -> None:
        c = self.cfg.crud_concurrency
        log(f"CRUD request rates at concurrency {c}")
        with self.scenario() as (svc, fake, db):
            agent = self.create_agent(svc.url)
            self.create_threads(svc.url, agent, 60)
            for op in ("create_agent", "get_agent", "create_thread", "list_threads"):
                per_worker = math.ceil(self.cfg.crud_requests / c)
                workers = _split(list(range(c)), min(self.pool.n, c))
                start_at = time.time() + 1.0
                jobs: list[TurnJob | CrudJob | None] = [
                    CrudJob(
                        svc.url,
                        self.headers,
                        op,
                        agent,
                        len(w),
                        per_worker,
                        start_at,
                        start_at + 20,
                    )
                    for w in workers
                ]
                self.pool.send(jobs)
                time.sleep(max(0.0, start_at - time.time()))
                pids, pg_pids = svc.pids(), db.backend_pids()
                mine = [*fake.pids(), os.getpid(), *self.pool.pids()]
                before = CpuSnapshot.take(pids + pg_pids + mine)
                results = self.pool.collect(timeout=120)
                pg_pids = sorted(set(pg_pids) | set(db.backend_pids()))
                after = CpuSnapshot.take(pids + pg_pids + mine)
                records = [r for res in results for r in res.records]
                ok = [r for r in records if 200 <= r[1] < 300]
                window = max(r.ended for r in results) - min(r.began for r in results)
                n_ok = max(1, len(ok))
                row: dict[str, Any] = {
                    "op": op,
                    "concurrency": c,
                    "requests": len(ok),
                    "errors": len(records) - len(ok),
                    "requests_per_s": round(len(ok) / window, 1) if window > 0 else None,
                    "latency_ms": summary_ms([r[0] for r in ok]),
                    "server_cpu_ms_per_request": round(after.since(before, pids) * 1000 / n_ok, 3),
                    "pg_cpu_ms_per_request": round(after.since(before, pg_pids) * 1000 / n_ok, 3),
                    "client_cpu_ms_per_request": round(
                        sum(r.cpu_s for r in results) * 1000 / n_ok, 3
                    ),
                    "machine_busy_pct": round(after.busy_fraction(before) * 100, 1),
                    "foreign_cores": round(
                        after.foreign_cores(before, [*pids, *pg_pids, *mine]), 2
                    ),
                }
                self.results["crud"].append(row)
                log(
                    f"crud {op:14} {row['requests_per_s']} req/s, p50 "
                    f"{row['latency_ms']['p50']} ms, cpu {row['server_cpu_ms_per_request']} ms"
                )

    def slow(self) -> None:
        cap = self.cfg.slow_streams
        counts = [cap]
        done: set[int] = set()
        while counts:
            n = counts.pop(0)
            done.add(n)
            row = self._slow(n)
            self.results["slow_streams"].append(row)
            if row["errors"] and self.cfg.slow_search and len(done) < 3 and n // 2 >= 50:
                counts.append(n // 2)

    def _slow(self, n: int) -> dict[str, Any]:
        cfg = self.cfg
        pace = f"{cfg.slow_tokens} tokens, 1 per {cfg.slow_token_delay_s:g} s"
        log(f"slow streams: {n} at once ({pace}), opened at {cfg.slow_ramp_per_s:g}/s")
        scenario = self.scenario(0.0, cfg.slow_token_delay_s, fake_tokens=cfg.slow_tokens)
        with scenario as (svc, fake, db):
            agent = self.create_agent(svc.url)
            threads = self.create_threads(svc.url, agent, n)
            time.sleep(1.0)
            pids = svc.pids()
            rss_before = sum(status_kb(p, "VmRSS") for p in pids)
            self.pool.reset_gauges()
            ours = self._ours(svc, fake, db)
            before = CpuSnapshot.take(ours)
            plans = [WorkerPlan(i, [threads[i]], 1) for i in range(n)]
            start_at = time.time() + 1.0
            expected = n / cfg.slow_ramp_per_s + cfg.slow_tokens * cfg.slow_token_delay_s
            jobs: list[TurnJob | CrudJob | None] = [
                TurnJob(
                    base_url=svc.url,
                    headers=self.headers,
                    workers=part,
                    start_at=start_at,
                    stop_at=start_at + expected + 60,
                    ramp_per_s=cfg.slow_ramp_per_s,
                )
                for part in _split(plans, self.pool.n)
            ]
            self.pool.send(jobs)
            peak_live = peak_rss = peak_fds = 0
            rss_at_peak = rss_before
            db_conns: dict[str, int] = {}
            deadline = time.monotonic() + expected + 300
            last_db = 0.0
            while not self.pool.ready() and time.monotonic() < deadline:
                live = self.pool.gauge(GAUGE_LIVE)
                rss = sum(status_kb(p, "VmRSS") for p in pids)
                peak_rss = max(peak_rss, rss)
                if live >= peak_live:
                    peak_live, rss_at_peak = live, rss
                    peak_fds = max(peak_fds, sum(open_fds(p) for p in pids))
                    if time.monotonic() - last_db > 2.0:
                        db_conns = self._db_connections(db)
                        last_db = time.monotonic()
                time.sleep(0.25)
            results = self.pool.collect(timeout=60)
            ours = sorted(set(ours) | set(db.backend_pids()))
            foreign = CpuSnapshot.take(ours).foreign_cores(before, ours)
        records = [r for res in results for r in res.records]
        errors = [r[5] for r in records if r[5] is not None]
        row = {
            "streams": n,
            "pace": pace,
            "ramp_per_s": cfg.slow_ramp_per_s,
            "ok": len(records) - len(errors),
            "errors": len(errors),
            "error_kinds": dict(Counter(_error_kind(e) for e in errors)),
            "error_samples": errors[:3],
            "peak_live": peak_live,
            "rss_before_mb": round(rss_before / 1024, 1),
            "rss_peak_mb": round(peak_rss / 1024, 1),
            "kb_per_stream": round((rss_at_peak - rss_before) / peak_live, 1)
            if peak_live
            else None,
            "server_fds_peak": peak_fds,
            "db_connections": sum(db_conns.values()),
            "db_connection_states": db_conns,
            "ttft_ms": summary_ms([r[2] for r in records if r[2] is not None]),
            "e2e_s_p50": _round(pct([r[3] for r in records if r[5] is None], 50)),
            "foreign_cores": round(foreign, 2),
        }
        log(
            f"slow streams {n}: ok={row['ok']} errors={row['errors']} {row['error_kinds']} "
            f"peak live={peak_live} rss {row['rss_before_mb']}->{row['rss_peak_mb']} MB "
            f"({row['kb_per_stream']} KB/stream), DB connections {db_conns}"
        )
        return row

    def _ours(self, svc: Child, fake: Child, db: Database) -> list[int]:
        """Every process of this run: CPU of any other is another job's."""
        return [*svc.pids(), *fake.pids(), *db.backend_pids(), os.getpid(), *self.pool.pids()]

    def _db_connections(self, db: Database) -> dict[str, int]:
        """Connections to the scenario's database by state (pg_stat_activity)."""
        if not db.external:
            return {}
        try:
            with psycopg.connect(self.dbs.admin, connect_timeout=3) as conn:
                rows = conn.execute(
                    "SELECT coalesce(state, '?'), count(*) FROM pg_stat_activity"
                    " WHERE datname = %s AND pid <> pg_backend_pid() GROUP BY 1",
                    (db.name,),
                ).fetchall()
        except psycopg.Error:
            return {}
        return {str(k): int(v) for k, v in rows}


def _signal_quietly(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the level ended, and the service with it
        os.kill(pid, sig)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 3)
