"""Processes the benchmark starts, and what /proc says about them.

Every child runs in a session (process group) of its own, so ``stop()`` can end it and
whatever it forked (uvicorn workers) with one ``killpg`` of that group, and nothing else.
A registry of live children is emptied by ``stop_all()``, called from the orchestrator's
``finally`` and from ``atexit``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def raise_nofile() -> int:
    """Raise this process's soft RLIMIT_NOFILE to the hard limit (children inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = 1 << 20
    if soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- /proc ----------------------------------------------------------------------


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name is in parentheses and may contain spaces
    return raw[raw.rindex(")") + 2 :].split()


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads, live and exited), in seconds."""
    f = _stat_fields(pid)
    if f is None:
        return 0.0
    # fields after the name start at index 3 (state); utime is field 14, stime 15
    return (int(f[11]) + int(f[12])) / CLK_TCK


def cpu_ns_precise(pid: int) -> int:
    """CPU time of the live threads of a process in nanoseconds (schedstat), for short
    windows where the 10 ms tick of /proc/<pid>/stat is too coarse."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tasks:
        try:
            total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total


def children_of(pid: int) -> list[int]:
    """Direct and indirect children of ``pid`` (uvicorn's worker processes)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        f = _stat_fields(int(entry))
        if f is not None:
            parents[int(entry)] = int(f[1])
    found: list[int] = []
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        kids = [p for p, pp in parents.items() if pp == parent]
        found.extend(kids)
        frontier.extend(kids)
    return found


def status_kb(pid: int, key: str) -> int:
    """A ``kB`` field of /proc/<pid>/status (VmRSS, VmHWM), 0 if gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def open_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def machine_busy() -> tuple[int, int]:
    """(busy, total) jiffies over all CPUs, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]
    total = sum(values[:8])
    return total - idle, total


def postgres_backends(dbname: str) -> list[int]:
    """PostgreSQL backend processes connected to ``dbname`` (their title names it)."""
    found = []
    needle = f" {dbname} ".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if cmd.startswith(b"postgres: ") and needle in cmd:
            found.append(int(entry))
    return found


@dataclass
class CpuSnapshot:
    """CPU time per watched process at one instant, two ways.

    ``per_pid``: seconds from ``/proc/<pid>/task/*/schedstat`` (the scheduler's exact
    run time; threads that exit between two snapshots are lost). ``ticks``: seconds from
    ``/proc/<pid>/stat`` utime+stime, which this kernel samples at the timer tick
    (TICK_CPU_ACCOUNTING): unbiased for busy processes, but it misses or overcounts
    processes that wake on timers, so it is kept only as a cross-check.
    """

    per_pid: dict[int, float]
    ticks: dict[int, float]
    busy: int
    total: int
    at: float

    @staticmethod
    def take(pids: Sequence[int]) -> CpuSnapshot:
        busy, total = machine_busy()
        return CpuSnapshot(
            {p: cpu_ns_precise(p) / 1e9 for p in pids},
            {p: cpu_seconds(p) for p in pids},
            busy,
            total,
            time.monotonic(),
        )

    def since(self, before: CpuSnapshot, pids: Sequence[int]) -> float:
        """Seconds of CPU ``pids`` spent since ``before`` (schedstat)."""
        # a process that appeared counts from zero; one that vanished (0 now) is skipped
        return sum(max(0.0, self.per_pid.get(p, 0.0) - before.per_pid.get(p, 0.0)) for p in pids)

    def ticks_since(self, before: CpuSnapshot, pids: Sequence[int]) -> float:
        return sum(max(0.0, self.ticks.get(p, 0.0) - before.ticks.get(p, 0.0)) for p in pids)

    def busy_fraction(self, before: CpuSnapshot) -> float:
        total = self.total - before.total
        return (self.busy - before.busy) / total if total else 0.0

    def machine_seconds(self, before: CpuSnapshot) -> float:
        """CPU seconds the whole machine spent since ``before``, every CPU and process
        (``/proc/stat``, sampled at the timer tick: +-1 tick per CPU)."""
        return (self.busy - before.busy) / CLK_TCK

    def foreign_cores(self, before: CpuSnapshot, ours: Sequence[int]) -> float:
        """CPUs' worth of work done by processes other than ``ours`` (another job on the
        machine disturbs the measurement; kernel work on our behalf counts here too)."""
        window = self.at - before.at
        if window <= 0:
            return 0.0
        return max(0.0, (self.machine_seconds(before) - self.since(before, ours)) / window)


def wait_quiet(limit: float, max_wait_s: float, say: Callable[[str], None]) -> float:
    """Wait (at most ``max_wait_s``) until the machine is at most ``limit`` busy over 2 s;
    return the last busy fraction seen."""
    deadline = time.monotonic() + max_wait_s
    warned = False
    while True:
        b0, t0 = machine_busy()
        time.sleep(2.0)
        b1, t1 = machine_busy()
        frac = (b1 - b0) / (t1 - t0) if t1 > t0 else 0.0
        if frac <= limit or time.monotonic() > deadline:
            if warned or frac > limit:
                say(f"machine {frac:.0%} busy before this scenario")
            return frac
        if not warned:
            say(f"machine {frac:.0%} busy (another job?); waiting up to {max_wait_s:.0f}s")
            warned = True


# --- children -----------------------------------------------------------------------

_LIVE: set[Child] = set()
_LOCK = threading.Lock()


@dataclass(eq=False)
class Child:
    """One started process (in its own process group)."""

    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    url: str = ""
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def pids(self) -> list[int]:
        """The process and its descendants (uvicorn workers)."""
        return [self.pid, *children_of(self.pid)]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def output(self, limit: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 15.0) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        # workers left in the group after the parent exited
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        with _LOCK:
            _LIVE.discard(self)


def spawn(name: str, argv: Sequence[str], env: Mapping[str, str], log_dir: Path) -> Child:
    log_path = log_dir / f"{name}.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            list(argv),
            env=dict(env),
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    child = Child(name, proc, log_path)
    with _LOCK:
        _LIVE.add(child)
    return child


def stop_all() -> None:
    with _LOCK:
        children = list(_LIVE)
    for child in children:
        child.stop(timeout=10)


atexit.register(stop_all)


def wait_http(child: Child, url: str, timeout: float = 60.0, ok: tuple[int, ...] = (200,)) -> None:
    """Poll ``url`` until it answers one of ``ok`` (or the process dies)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not child.alive():
            raise RuntimeError(f"{child.name} exited early:\n{child.output()}")
        try:
            if httpx.get(url, timeout=1.0).status_code in ok:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{child.name} not ready after {timeout}s:\n{child.output()}")


def wait_line(child: Child, prefix: str, timeout: float = 30.0) -> str:
    """Wait for a line starting with ``prefix`` in the child's log; return the rest."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in child.output(20000).splitlines():
            if line.startswith(prefix):
                return line[len(prefix) :].strip()
        if not child.alive():
            raise RuntimeError(f"{child.name} exited early:\n{child.output()}")
        time.sleep(0.05)
    raise RuntimeError(f"{child.name} printed no {prefix!r} after {timeout}s:\n{child.output()}")


class RssSampler:
    """Samples the summed VmRSS of some processes (and optional extra gauges) in a thread."""

    def __init__(self, pids: Sequence[int], every: float = 0.1) -> None:
        self.pids = list(pids)
        self.every = every
        self.samples: list[tuple[float, int]] = []  # (monotonic, kB)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            kb = sum(status_kb(p, "VmRSS") for p in self.pids)
            self.samples.append((time.monotonic(), kb))
            self._stop.wait(self.every)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)

    @property
    def peak_kb(self) -> int:
        return max((kb for _, kb in self.samples), default=0)
