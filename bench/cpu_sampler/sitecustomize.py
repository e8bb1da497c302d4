"""A CPU-time sampler for the service under ``make bench ARGS="--profile cpu"``.

Loaded by the service's interpreter at start-up (the harness puts this folder on its
``PYTHONPATH`` and names a control file in ``AGENTSVC_BENCH_CPU_SAMPLER``); does
nothing in any other process. SIGUSR2 starts sampling into the file whose path the
control file holds; SIGUSR1 stops it and writes the collapsed stacks there (py-spy's
``raw`` format, for ``bench/profile_top.py``), and so does the process's exit when a
level ended (and the service with it) before SIGUSR1 came.

Why not only py-spy: py-spy samples wall-clock time and counts a thread that is
runnable but not running as busy, so a ``send`` to PostgreSQL that wakes the backend
on the same CPU looks expensive while the service merely waits for its turn. This
samples the process's own CPU time (``setitimer(ITIMER_PROF)``, every millisecond of
it). The stack is read when the interpreter handles the signal, at the next bytecode:
time spent in C (the event loop, a syscall) is charged to the Python line that runs
next.
"""

from __future__ import annotations

import atexit
import os
import signal
import sysconfig
from collections import Counter
from pathlib import Path
from types import FrameType

_CONTROL = os.environ.get("AGENTSVC_BENCH_CPU_SAMPLER")
INTERVAL_S = 0.001


_STDLIB = sysconfig.get_paths()["stdlib"] + "/"


def _where(frame: FrameType) -> str:
    code = frame.f_code
    name = code.co_filename.removeprefix(_STDLIB)
    for marker in ("site-packages/", "/src/"):
        if marker in name:
            name = name.split(marker, 1)[1]
            break
    return f"{code.co_name} ({name}:{frame.f_lineno})"


class _Sampler:
    def __init__(self, control: Path) -> None:
        self.control = control
        self.out: Path | None = None
        self.counts: Counter[str] = Counter()

    def sample(self, _sig: int, frame: FrameType | None) -> None:
        stack = []
        while frame is not None:
            stack.append(_where(frame))
            frame = frame.f_back
        self.counts[";".join(reversed(stack))] += 1

    def start(self, *_: object) -> None:
        self.counts.clear()
        self.out = Path(self.control.read_text().strip())
        signal.signal(signal.SIGPROF, self.sample)
        signal.setitimer(signal.ITIMER_PROF, INTERVAL_S, INTERVAL_S)

    def stop(self, *_: object) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        out, self.out = self.out, None
        if out is not None:
            with out.open("w") as f:
                for stack, n in self.counts.items():
                    f.write(f"{stack} {n}\n")


if _CONTROL:
    _sampler = _Sampler(Path(_CONTROL))
    signal.signal(signal.SIGUSR2, _sampler.start)
    signal.signal(signal.SIGUSR1, _sampler.stop)
    atexit.register(_sampler.stop)
