"""``make bench ARGS="--profile cpu"``: the sampler the service loads (bench/cpu_sampler)
records where the CPU goes, between the harness's two signals, and nowhere else."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SAMPLER = Path(__file__).resolve().parents[2] / "bench" / "cpu_sampler"

BUSY = """
import sys, time
def spin_here():
    end = time.monotonic() + 3.0
    n = 0
    while time.monotonic() < end:
        n += 1
    return n
print("ready", flush=True)
spin_here()
"""

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="setitimer and SIGUSR on Linux")


def _run(tmp_path: Path, control: bool) -> tuple[subprocess.Popen[str], Path]:
    env = {**os.environ, "PYTHONPATH": str(SAMPLER)}
    ctl = tmp_path / "next"
    out = tmp_path / "stacks.txt"
    ctl.write_text(str(out))
    if control:
        env["AGENTSVC_BENCH_CPU_SAMPLER"] = str(ctl)
    else:
        env.pop("AGENTSVC_BENCH_CPU_SAMPLER", None)
    proc = subprocess.Popen(
        [sys.executable, "-c", BUSY], env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc, out


def _cpu_ms(pid: int) -> float:
    """The process's user and system CPU so far, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def test_it_samples_between_the_signals(tmp_path: Path) -> None:
    proc, out = _run(tmp_path, control=True)
    with proc:  # closes its stdout, waits for it
        before = _cpu_ms(proc.pid)
        proc.send_signal(signal.SIGUSR2)
        time.sleep(1.0)
        proc.send_signal(signal.SIGUSR1)
        used = _cpu_ms(proc.pid) - before
        deadline = time.monotonic() + 5
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    lines = out.read_text().splitlines()
    total = sum(int(line.rsplit(" ", 1)[1]) for line in lines)
    # a sample per millisecond of the CPU the process had, as the kernel's timer
    # resolution allows (4 ms where HZ is 250): at least one per 10 ms of it. The CPU,
    # not the second it was given: on a loaded machine it has less
    assert used > 50
    assert total >= (used - 20) / 10
    spinning = sum(int(line.rsplit(" ", 1)[1]) for line in lines if "spin_here (" in line)
    assert spinning / total > 0.9


def test_without_its_variable_it_does_nothing(tmp_path: Path) -> None:
    proc, out = _run(tmp_path, control=False)
    with proc:
        proc.send_signal(signal.SIGUSR2)  # no handler installed: the default ends the process
        assert proc.wait(10) == -signal.SIGUSR2
    assert not out.exists()


def test_a_process_that_ends_while_sampling_writes_what_it_has(tmp_path: Path) -> None:
    proc, out = _run(tmp_path, control=True)
    with proc:
        proc.send_signal(signal.SIGUSR2)
        assert proc.wait(10) == 0  # the busy loop ends: no SIGUSR1 came
    assert "spin_here (" in out.read_text()
