"""Statistics, the machine description, targets, and the markdown / JSON output."""

from __future__ import annotations

import json
import math
import os
import platform
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any


def pct(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100), linear between closest ranks; None when empty."""
    if not values:
        return None
    s = sorted(values)
    if len(s) == 1:
        return s[0]
    k = (len(s) - 1) * q / 100
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summary_ms(values_s: Sequence[float]) -> dict[str, float | None]:
    ms = [v * 1000 for v in values_s]
    return {
        "p50": _r(pct(ms, 50)),
        "p95": _r(pct(ms, 95)),
        "p99": _r(pct(ms, 99)),
        "mean": _r(sum(ms) / len(ms)) if ms else None,
        "n": len(ms),
    }


def _r(v: float | None, digits: int = 2) -> float | None:
    return None if v is None else round(v, digits)


# --- the machine -------------------------------------------------------------------------


def machine(pg_version: str, clients: int) -> dict[str, Any]:
    cpu_model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_kb = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    except OSError:
        pass
    versions: dict[str, str | None] = {}
    for pkg in ("litestar", "uvicorn", "uvloop", "httptools", "httpx", "psycopg", "msgspec"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    return {
        "nproc": os.cpu_count(),
        "cpu_model": cpu_model,
        "ram_gib": round(mem_kb / 1024 / 1024, 1),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "postgresql": pg_version,
        "client_processes": clients,
        "packages": versions,
    }


def machine_line(m: dict[str, Any]) -> str:
    return (
        f"{m['nproc']} vCPU ({m['cpu_model']}), {m['ram_gib']} GiB RAM, Linux {m['kernel']}, "
        f"Python {m['python']}, {m['postgresql']}; everything (service, PostgreSQL, fake "
        f"provider, {m['client_processes']} client processes) on the same machine"
    )


# --- targets ---------------------------------------------------------------------------------


def _find(rows: list[dict[str, Any]], **match: Any) -> dict[str, Any] | None:
    for row in rows:
        if all(row.get(k) == v for k, v in match.items()):
            return row
    return None


def _target(
    name: str, limit: str, value: float | None, ok: bool | None, factor: str
) -> dict[str, Any]:
    status = "n/a" if ok is None else ("PASS" if ok else "MISS")
    return {"target": name, "limit": limit, "measured": value, "status": status, "factor": factor}


def _ttft_targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    # At c=50 the p95 is judged on the level's steady state: each worker's first turn
    # is one of c requests the harness sends at the same instant, a burst that is
    # shown beside it (and in the turns table) but is not the load of c conversations.
    for c, key, limit, field in (
        (1, "p50", 5.0, "ttft_overhead_ms"),
        (50, "p95", 50.0, "ttft_overhead_steady_ms"),
    ):
        for mode in ("instant", "paced"):
            row = _find(rows, target="service", mode=mode, concurrency=c)
            if row is None and mode == "paced":
                continue
            judged = field
            if row is not None and not (row.get(field) or {}).get("n"):
                judged = "ttft_overhead_ms"  # no turn after the first ones (or an old row)
            value = (row.get(judged) or {}).get(key) if row else None
            note = "" if value is None else f"{value / limit:.1f}x the limit"
            bare = _find(rows, target="bare", mode=mode, concurrency=c)
            if bare is not None and value is not None:
                note += f"; bare ASGI app: {(bare.get(judged) or {}).get(key)} ms"
            if row is not None and judged != "ttft_overhead_ms":
                first = row.get("ttft_overhead_first_ms") or {}
                note += f"; all turns: {row['ttft_overhead_ms'][key]} ms"
                if first.get("n"):
                    note += f"; the {c} first turns, sent at one instant: p50 {first['p50']} ms"
            label = " after each worker's first turn" if judged != "ttft_overhead_ms" else ""
            out.append(
                _target(
                    f"TTFT overhead {key} at c={c}{label} ({mode} provider)",
                    f"<= {limit:g} ms",
                    value,
                    None if value is None else value <= limit,
                    note,
                )
            )
    return out


def evaluate_targets(results: dict[str, Any], slow_cap: int) -> list[dict[str, Any]]:
    rows = [r for r in results.get("load", []) if r["workers"] == 1]
    out = []

    svc = [r for r in rows if r["target"] == "service" and r["mode"] == "instant"]
    if svc:
        worst = max(svc, key=lambda r: r["server_cpu_ms_per_turn"])
        cpu = worst["server_cpu_ms_per_turn"]
        best = min(r["server_cpu_ms_per_turn"] for r in svc)
        paced = [
            r["server_cpu_ms_per_turn"]
            for r in rows
            if r["target"] == "service" and r["mode"] == "paced"
        ]
        note = f"{cpu / 4:.1f}x the limit at c={worst['concurrency']}; best level {best} ms"
        if paced:
            note += f"; paced provider: {min(paced)}-{max(paced)} ms"
        out.append(
            _target(
                "server CPU per 50-token turn (instant, worst level)",
                "<= 4 ms",
                cpu,
                cpu <= 4,
                note,
            )
        )
    out.extend(_ttft_targets(rows))
    svc50 = _find(rows, target="service", mode="instant", concurrency=50)
    bare50 = _find(rows, target="bare", mode="instant", concurrency=50)
    if svc50 and bare50:
        ratio = svc50["turns_per_s"] / bare50["turns_per_s"]
        out.append(
            _target(
                "turns/s at c=50 vs the bare ASGI floor",
                ">= 0.5x",
                round(ratio, 3),
                ratio >= 0.5,
                f"{svc50['turns_per_s']} vs {bare50['turns_per_s']} turns/s "
                f"({0.5 / ratio:.1f}x short)"
                if ratio < 0.5
                else f"{svc50['turns_per_s']} vs {bare50['turns_per_s']} turns/s",
            )
        )
    else:
        out.append(_target("turns/s at c=50 vs the bare ASGI floor", ">= 0.5x", None, None, ""))
    hist = results.get("history")
    if hist and hist.get("ratio") is not None:
        ratio = hist["ratio"]
        last = hist["last_n"]
        out.append(
            _target(
                f"overhead at message {last} vs message 1 (median of 10)",
                "<= 1.5x",
                ratio,
                ratio <= 1.5,
                f"{hist['first_overhead_ms']} ms -> {hist['last_overhead_ms']} ms",
            )
        )
    out.extend(_sustained_target(results.get("sustained")))
    slow = results.get("slow_streams") or []
    if slow:
        at_cap = [s for s in slow if s["streams"] >= slow_cap]
        best = max((s["streams"] for s in slow if s["errors"] == 0), default=0)
        cap_row = at_cap[0] if at_cap else None
        ok = cap_row is not None and cap_row["errors"] == 0
        errors = cap_row["errors"] if cap_row else None
        out.append(
            _target(
                f"{slow_cap} concurrent slow streams, zero errors",
                "0 errors",
                errors,
                ok,
                f"most with zero errors: {best}"
                + ("" if ok else f" ({slow_cap / best:.1f}x short)" if best else ""),
            )
        )
    return out


def _sustained_target(sus: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The turn's cost in the last segment of the sustained run against the first."""
    if not sus or sus.get("ratio") is None:
        return []
    first, last = sus["segments"][0], sus["segments"][-1]
    key = sus["judged_by"]
    what = "statement time" if key == "statement_ms_per_turn" else "PostgreSQL CPU"
    note = f"{first[key]} -> {last[key]} ms per turn"
    if sus.get("buffers_ratio") is not None:
        note += (
            f"; buffers per turn {first['buffers_per_turn']} -> {last['buffers_per_turn']}"
            f" ({sus['buffers_ratio']}x)"
        )
    n = len(sus["segments"])
    return [
        _target(
            f"{what} per turn, segment {n} vs 1 of {sus['segment_turns']} turns (sustained)",
            "<= 1.1x",
            sus["ratio"],
            sus["ratio"] <= 1.1,
            note,
        )
    ]


# --- markdown ---------------------------------------------------------------------------


def _f(v: Any, digits: int = 1) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _trio(d: dict[str, Any]) -> str:
    return f"{_f(d['p50'])} / {_f(d['p95'])} / {_f(d['p99'])}"


def _burst(r: dict[str, Any]) -> str:
    """The first turns (all workers at one instant), then the rest's p95."""
    first, steady = r.get("ttft_overhead_first_ms"), r.get("ttft_overhead_steady_ms")
    if not first or not steady:
        return "-"
    return f"{_f(first['p50'])} / {_f(steady['p95'])}"


def _machine_budget(results: dict[str, Any]) -> list[str]:
    """Where the machine's CPU went per turn, instant provider: on one machine the clients,
    PostgreSQL and the fake provider share the cores with the server."""
    nproc = results["machine"]["nproc"]
    rows = [
        r
        for r in results.get("load", [])
        if r["mode"] == "instant" and r["target"] in ("bare", "service") and r["workers"] == 1
    ]
    if not rows:
        return []
    lines = [
        "",
        f"### Where the machine's CPU went (instant provider, ms per turn, {nproc} vCPU)",
        "",
        "| target | c | server | PostgreSQL | fake provider | clients | whole machine |",
        "|---|---|---|---|---|---|---|",
    ]
    lines.extend(
        f"| {r['target']} | {r['concurrency']} | {_f(r['server_cpu_ms_per_turn'], 2)} | "
        f"{_f(r.get('pg_cpu_ms_per_turn'), 2)} | {_f(r.get('fake_cpu_ms_per_turn'), 2)} | "
        f"{_f(r.get('client_cpu_ms_per_turn'), 2)} | {_f(r.get('machine_cpu_ms_per_turn'), 2)} |"
        for r in rows
    )
    return lines


def _sustained(sus: dict[str, Any] | None) -> list[str]:
    """One row per segment of the sustained run: a cost that grows with the stored rows
    grows down this table."""
    if not sus:
        return []
    segs = sus["segments"]
    lines = [
        "",
        f"### Sustained load ({len(segs)} segments of {sus['segment_turns']} turns at "
        f"c={sus['concurrency']}, one database, instant provider)",
        "",
        "| segment | turns | err | turns/s | statements ms/turn | buffers/turn "
        "| service's ANALYZE s | PG CPU ms/turn | server CPU ms/turn | other load "
        "| tables analyzed (by autovacuum) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in segs:
        auto = ", ".join(r.get("autoanalyzed") or []) or "-"
        lines.append(
            f"| {r['segment']} | {r['turns']} | {r['errors']} | {_f(r['turns_per_s'])} | "
            f"{_f(r.get('statement_ms_per_turn'), 3)} | {_f(r.get('buffers_per_turn'), 0)} | "
            f"{_f(r.get('analyze_s'), 2)} | {_f(r['pg_cpu_ms_per_turn'], 2)} | "
            f"{_f(r['server_cpu_ms_per_turn'], 2)} | {_f(r['foreign_cores'], 2)} | "
            f"{', '.join(r['analyzed']) or '-'} ({auto}) |"
        )
    lines += [
        "",
        f"Last/first segment: **{_f(sus['ratio'], 2)}x** ({sus['judged_by']}); "
        f"PostgreSQL CPU {_f(sus['pg_cpu_ratio'], 2)}x; server CPU "
        f"{_f(sus['server_cpu_ratio'], 2)}x"
        + (
            f"; buffers per turn {_f(sus['buffers_ratio'], 2)}x."
            if sus.get("buffers_ratio") is not None
            else "."
        ),
    ]
    top = segs[-1].get("top")
    if top:
        lines += [
            "",
            f"The statements that took the most time in segment {segs[-1]['segment']}:",
            "",
            "| statement | calls | mean ms | buffers per call |",
            "|---|---|---|---|",
        ]
        lines.extend(
            f"| `{t['statement'][:70]}` | {t['calls']} | {_f(t['mean_ms'], 3)} | "
            f"{_f(t['buffers_per_call'], 1)} |"
            for t in top
        )
    return lines


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    cfg = results["config"]
    lines = [
        f"Run {results['started']} ({'quick' if cfg['quick'] else 'full'}, "
        f"{results['duration_s']:.0f} s) of {results.get('git', '?')}. "
        f"Machine: {machine_line(m)}.",
        "",
        f"Reply: {cfg['tokens']} tokens. Instant: the fake provider sends them at once. "
        f"Paced: first token after {cfg['paced_first_token_delay_s'] * 1000:.0f} ms, then one "
        f"every {cfg['paced_token_delay_s'] * 1000:.0f} ms. Overhead = client TTFT - the "
        "provider's configured TTFT; net = overhead - the control row's p50 at the same "
        "concurrency (the fake's and the client's own share).",
        "",
        "### Targets",
        "",
        "| target | limit | measured | status | note |",
        "|---|---|---|---|---|",
    ]
    lines.extend(
        f"| {t['target']} | {t['limit']} | {_f(t['measured'], 2)} | **{t['status']}** | "
        f"{t['factor']} |"
        for t in results.get("targets", [])
    )
    lines += [
        "",
        "### Turns under load",
        "",
        "| target | mode | c | turns | err | TTFT overhead p50/p95/p99 ms "
        "| first turns p50 / then p95 ms | net p50 ms "
        "| e2e p50/p95/p99 ms | turns/s | tokens/s | server CPU ms/turn | PG CPU ms/turn "
        "| peak RSS MB | machine busy | other load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results.get("load", []):
        name = r["target"] + (f" (--workers {r['workers']})" if r["workers"] > 1 else "")
        lines.append(
            f"| {name} | {r['mode']} | {r['concurrency']} | {r['turns']} | {r['errors']} | "
            f"{_trio(r['ttft_overhead_ms'])} | {_burst(r)} | "
            f"{_f(r.get('net_overhead_p50_ms'))} | "
            f"{_trio(r['e2e_ms'])} | {_f(r['turns_per_s'])} | {_f(r['tokens_per_s'], 0)} | "
            f"{_f(r['server_cpu_ms_per_turn'], 2)} | {_f(r.get('pg_cpu_ms_per_turn'), 2)} | "
            f"{_f(r['peak_rss_mb'])} | {_f(r['machine_busy_pct'], 0)}% | "
            f"{_f(r.get('foreign_cores'), 2)} |"
        )
    ratios = results.get("ratios", [])
    if ratios:
        lines += [
            "",
            "### Service / bare ASGI",
            "",
            "| mode | c | turns/s ratio | server CPU per turn ratio | TTFT p50 ratio "
            "| extra CPU ms/turn |",
            "|---|---|---|---|---|---|",
        ]
        for x in ratios:
            lines.append(
                f"| {x['mode']} | {x['concurrency']} | {_f(x['throughput_ratio'], 2)} | "
                f"{_f(x['cpu_ratio'], 1)}x | {_f(x['ttft_p50_ratio'], 1)}x | "
                f"{_f(x['extra_cpu_ms_per_turn'], 2)} |"
            )
    lines += _machine_budget(results)
    hist = results.get("history")
    if hist:
        lines += [
            "",
            f"### History growth (one thread, {hist['last_n']} messages, instant provider)",
            "",
            "| messages | TTFT overhead median ms | e2e median ms | server CPU ms/turn |",
            "|---|---|---|---|",
        ]
        for w in hist["windows"]:
            lines.append(
                f"| {w['from']}-{w['to']} | {_f(w['overhead_ms'], 2)} | {_f(w['e2e_ms'], 2)} | "
                f"{_f(w['server_cpu_ms'], 2)} |"
            )
        lines.append("")
        lines.append(
            f"Ratio last/first (TTFT overhead): **{_f(hist['ratio'], 2)}x**; "
            f"errors: {hist['errors']}."
        )
    lines += _sustained(results.get("sustained"))
    slow = results.get("slow_streams") or []
    if slow:
        lines += [
            "",
            "### Concurrent slow streams",
            "",
            "| streams | pace | ok | errors | peak live | RSS before MB | RSS peak MB "
            "| KB per open stream | server fds at peak | DB connections at peak | error kinds |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for s in slow:
            kinds = "; ".join(f"{k} x{v}" for k, v in s["error_kinds"].items()) or "-"
            lines.append(
                f"| {s['streams']} | {s['pace']} | {s['ok']} | {s['errors']} | {s['peak_live']} | "
                f"{_f(s['rss_before_mb'])} | {_f(s['rss_peak_mb'])} | "
                f"{_f(s['kb_per_stream'], 0)} | {s['server_fds_peak']} | {s['db_connections']} | "
                f"{kinds} |"
            )
    crud = results.get("crud") or []
    if crud:
        lines += [
            "",
            f"### CRUD request rates (concurrency {crud[0]['concurrency']})",
            "",
            "| operation | requests | errors | requests/s | p50 ms | p99 ms "
            "| server CPU ms/request | PG CPU ms/request | machine busy |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for c in crud:
            lines.append(
                f"| {c['op']} | {c['requests']} | {c['errors']} | {_f(c['requests_per_s'])} | "
                f"{_f(c['latency_ms']['p50'], 2)} | {_f(c['latency_ms']['p99'], 2)} | "
                f"{_f(c['server_cpu_ms_per_request'], 2)} | "
                f"{_f(c['pg_cpu_ms_per_request'], 2)} | {_f(c['machine_busy_pct'], 0)}% |"
            )
    for r in results.get("reattach") or []:
        lines += [
            "",
            f"### Re-attach ({r['workers']} workers: a re-attach lands on either process)",
            "",
            f"{r['flows']} replies of {r['tokens']} tokens; each client hangs up after "
            f"{r['cut_after_events']} events and re-attaches with Last-Event-ID.",
            "",
            "| every event exactly once | first event p50 ms | p95 ms "
            "| server CPU ms/flow (read whole) | PG CPU ms/flow (read whole) |",
            "|---|---|---|---|---|",
            f"| {r['every_event_once']}/{r['flows']} | "
            f"{_f(r['reattach_first_event_ms']['p50'], 1)} | "
            f"{_f(r['reattach_first_event_ms']['p95'], 1)} | "
            f"{_f(r['server_cpu_ms_per_flow'], 2)} ({_f(r['server_cpu_ms_per_whole_reply'], 2)}) | "
            f"{_f(r['pg_cpu_ms_per_flow'], 2)} ({_f(r['pg_cpu_ms_per_whole_reply'], 2)}) |",
        ]
    for r in results.get("fork") or []:
        lines += [
            "",
            f"### Fork of a {r['messages']}-message thread (docs/threads.md)",
            "",
            "| forks | whole copies | p50 ms | p95 ms | server CPU ms/fork | PG CPU ms/fork |",
            "|---|---|---|---|---|---|",
            f"| {r['forks']} | {r['whole_copies']}/{r['forks']} | "
            f"{_f(r['latency_ms']['p50'], 1)} | {_f(r['latency_ms']['p95'], 1)} | "
            f"{_f(r['server_cpu_ms_per_fork'], 2)} | {_f(r['pg_cpu_ms_per_fork'], 2)} |",
        ]
    return "\n".join(lines) + "\n"


def write(results: dict[str, Any], out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    stamp = results["started"].replace(":", "").replace("-", "")
    json_path = out / f"bench-{stamp}.json"
    md_path = out / f"bench-{stamp}.md"
    json_path.write_text(json.dumps(results, indent=2, default=str) + "\n")
    md_path.write_text(markdown(results))
    (out / "latest.json").write_text(json_path.read_text())
    (out / "latest.md").write_text(md_path.read_text())
    return json_path, md_path
