"""Summarise a py-spy ``--format raw`` profile (collapsed stacks): where the CPU goes.

``python -m bench.profile_top PROFILE.txt [--top 25]`` prints the share of samples by
library, the functions with the most samples *in* them (self) and the functions with the
most samples *under* them (inclusive), each with its file:line. ``python -m bench
--profile`` records one such file per instant load level (in the logs folder it names).
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?):(?P<line>\d+)\)$")

AREAS = (
    ("agentsvc", ("agentsvc_core/", "agentsvc_adapters/", "agentsvc_web/")),
    ("litestar", ("litestar/",)),
    ("uvicorn/httptools", ("uvicorn/", "httptools/")),
    ("httpx/httpcore", ("httpx/", "httpcore/", "h11/")),
    ("psycopg", ("psycopg/", "psycopg_pool/", "psycopg_binary/")),
    ("anyio", ("anyio/",)),
    ("asyncio", ("asyncio/",)),
    ("msgspec", ("msgspec/",)),
)


def area(file: str) -> str:
    for name, prefixes in AREAS:
        if any(p in file for p in prefixes):
            return name
    return "other: " + file.split("/", 1)[0]


def parse(path: Path) -> list[tuple[list[str], int]]:
    stacks = []
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks.append((stack.split(";"), int(count)))
    return stacks


def _where(frame: str) -> tuple[str, str]:
    m = _FRAME.match(frame)
    if m is None:
        return frame, ""
    return m.group("func"), f"{m.group('file')}:{m.group('line')}"


def summarise(path: Path, top: int = 25) -> str:
    stacks = parse(path)
    total = sum(c for _, c in stacks) or 1
    by_area: Counter[str] = Counter()
    self_time: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    for frames, count in stacks:
        leaf_func, leaf_where = _where(frames[-1])
        self_time[f"{leaf_func} ({leaf_where})"] += count
        # the innermost frame of a library we know names the area; the project's own
        # frames count as agentsvc only when they are the leaf
        by_area[area(leaf_where)] += count
        seen = set()
        for frame in frames:
            func, where = _where(frame)
            key = f"{func} ({where.rsplit(':', 1)[0]})"
            if key not in seen:
                seen.add(key)
                inclusive[key] += count
    out = [f"{path}: {total} samples", "", "by library (leaf frame):"]
    out += [f"  {n / total:6.1%}  {name}" for name, n in by_area.most_common()]
    out += ["", f"top {top} self:"]
    out += [f"  {n / total:6.1%}  {name}" for name, n in self_time.most_common(top)]
    out += ["", f"top {top} inclusive (project and libraries, by function and file):"]
    out += [f"  {n / total:6.1%}  {name}" for name, n in inclusive.most_common(top)]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("profile", type=Path, nargs="+")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    for path in args.profile:
        print(summarise(path, args.top))
        print()


if __name__ == "__main__":
    main()
