"""``python -m bench``: the service's own cost per conversation turn, against a bare floor.

Starts the real ``agentsvc serve`` on a fresh PostgreSQL database, a scripted fake model
provider in its own process, a bare ASGI SSE app in its own process, and client
processes (asyncio + httpx); measures time to first token, turn time, throughput, server
CPU and memory at several concurrency levels, history growth, concurrent slow streams
and CRUD rates; writes JSON and markdown to ``--out``. See docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

from bench import report
from bench.fork import TURNS, fork
from bench.harness import Bench, Config, log
from bench.procs import ROOT, raise_nofile, stop_all
from bench.reattach import reattach
from bench.sustained import SEGMENT_TURNS, sustained

SCENARIOS = (
    "control",
    "bare",
    "service",
    "workers2",
    "history",
    "sustained",
    "crud",
    "slow",
    "reattach",
    "fork",
)


def _levels(raw: str) -> list[int]:
    levels = sorted({int(x) for x in raw.split(",") if x.strip()})
    if not levels or levels[0] < 1 or levels[-1] > 5000:
        raise argparse.ArgumentTypeError("levels are whole numbers between 1 and 5000")
    return levels


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="a small run (< 2 min) to smoke-test")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results", help="output folder")
    p.add_argument("--levels", type=_levels, help="concurrency levels (default 1,10,50,200)")
    p.add_argument("--turns", type=int, help="turns per level, instant provider (default 500)")
    p.add_argument("--tokens", type=int, default=50, help="tokens per reply (default 50)")
    p.add_argument("--clients", type=int, help="client processes (default: 2..4 by CPU count)")
    p.add_argument("--slow-streams", type=int, help="concurrent slow streams (default 2000)")
    p.add_argument("--slow-ramp", type=float, help="slow streams opened per second (default 50)")
    p.add_argument(
        "--segments",
        type=int,
        help=f"segments of {SEGMENT_TURNS} turns in the sustained scenario (default 10; quick 2)",
    )
    p.add_argument(
        "--only",
        help=f"comma-separated scenarios to run (of {','.join(SCENARIOS)}); default all",
    )
    p.add_argument(
        "--otlp",
        action="store_true",
        help="run the service with tracing export on (OTEL_TRACES_EXPORTER=otlp) to a loopback"
        " OTLP sink (bench/otlp_sink.py): the cost of the export",
    )
    p.add_argument(
        "--profile",
        nargs="?",
        const="py-spy",
        choices=("py-spy", "cpu"),
        help="record the service's stacks for 8 s of each level of the one-worker service rows"
        " (skews its numbers): with py-spy (the default; needs py-spy), or 'cpu': sampled"
        " by the service's own CPU time (bench/cpu_sampler)",
    )
    return p.parse_args(argv)


def config(args: argparse.Namespace, log_dir: Path) -> Config:
    quick = args.quick
    only = set(SCENARIOS)
    if args.only:
        only = {s.strip() for s in args.only.split(",") if s.strip()}
        unknown = only - set(SCENARIOS)
        if unknown:
            raise SystemExit(f"unknown scenarios: {', '.join(sorted(unknown))}")
    return Config(
        quick=quick,
        levels=args.levels or ([1, 10] if quick else [1, 10, 50, 200]),
        turns=args.turns or (100 if quick else 500),
        tokens=args.tokens,
        paced_first_token_delay_s=0.1,
        paced_token_delay_s=0.01,
        paced_turns=12 if quick else 60,
        level_cap_s=15.0 if quick else 60.0,
        clients=args.clients or max(2, min(4, os.cpu_count() or 2)),
        workers2=not quick,
        history_messages=100 if quick else 500,
        sustained_segments=max(2, args.segments or (2 if quick else 10)),
        slow_streams=args.slow_streams or (200 if quick else 2000),
        slow_tokens=20 if quick else 60,
        slow_token_delay_s=1.0,
        slow_ramp_per_s=args.slow_ramp or 50.0,
        slow_search=not quick,
        crud_concurrency=10,
        crud_requests=300 if quick else 2000,
        profile=args.profile,
        log_dir=log_dir,
        only=only if not quick or args.only else only - {"workers2"},
        quiet_wait_s=60.0 if quick else 300.0,
        otlp=args.otlp,
    )


def git_state() -> str:
    """The commit measured, and whether the work tree differed from it."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "src"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        return "unknown commit"
    return f"commit {head}" + (" (src/ with uncommitted changes)" if dirty else "")


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def _write(
    bench: Bench, cfg: Config, out: Path, started: datetime, duration: float, complete: bool
) -> None:
    try:
        bench.ratios()
        results = {
            "started": started.isoformat().replace("+00:00", "Z"),
            "duration_s": round(duration, 1),
            "complete": complete,
            "machine": report.machine(bench.dbs.version or bench.dbs.describe(), cfg.clients),
            "database": bench.dbs.describe(),
            "git": git_state(),
            "config": {
                k: (sorted(v) if isinstance(v, set) else str(v) if isinstance(v, Path) else v)
                for k, v in vars(cfg).items()
            },
            **bench.results,
        }
        results["targets"] = report.evaluate_targets(results, cfg.slow_streams)
        json_path, md_path = report.write(results, out)
        print()
        print(report.markdown(results))
        log(f"wrote {json_path} and {md_path}")
    except Exception as exc:  # noqa: BLE001 - keep the original error visible
        log(f"could not write the results: {type(exc).__name__}: {exc}")


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    raise_nofile()
    log_dir = args.out / "logs"  # the started processes' output, profiles; kept until the next run
    shutil.rmtree(log_dir, ignore_errors=True)
    log_dir.mkdir(parents=True)
    cfg = config(args, log_dir)
    started = datetime.now(UTC).replace(microsecond=0)
    t0 = time.monotonic()
    log(f"logs of the started processes: {log_dir}")
    bench = Bench(cfg)
    log(f"database: {bench.dbs.describe()}; {cfg.clients} client processes")
    status = 0
    try:
        _scenarios(bench, cfg)
    except KeyboardInterrupt:
        log("interrupted; writing what was measured")
        status = 130
    except Exception as exc:
        log(f"failed: {type(exc).__name__}: {exc}")
        status = 1
        raise
    finally:
        stop_all()
        bench.close()
        _write(bench, cfg, args.out, started, time.monotonic() - t0, status == 0)
    return status


def _scenarios(bench: Bench, cfg: Config) -> None:
    """The scenarios ``cfg.only`` names, in the order of ``SCENARIOS``."""
    run = cfg.only
    if "control" in run:
        bench.control()
    if "bare" in run:
        bench.bare("instant")
        bench.bare("paced")
    if "service" in run:
        bench.service("instant")
        bench.service("paced")
    if "workers2" in run and cfg.workers2:
        bench.service("instant", workers=2)
    if "history" in run:
        bench.history()
    if "sustained" in run:
        sustained(bench, cfg.sustained_segments)
    if "crud" in run:
        bench.crud()
    if "slow" in run:
        bench.slow()
    if "reattach" in run:
        reattach(bench)
    if "fork" in run:
        fork(bench, 50 if cfg.quick else TURNS)


if __name__ == "__main__":
    sys.exit(main())
