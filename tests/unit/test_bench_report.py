"""The benchmark's verdicts (bench/report.py): what each target is judged on."""

from __future__ import annotations

from typing import Any

from bench.report import evaluate_targets, markdown


def _ms(p50: float, p95: float, n: int = 10) -> dict[str, Any]:
    return {"p50": p50, "p95": p95, "p99": p95, "mean": p50, "n": n}


def _row(
    target: str, mode: str, c: int, *, all95: float, first50: float, then95: float
) -> dict[str, Any]:
    return {
        "target": target,
        "mode": mode,
        "concurrency": c,
        "workers": 1,
        "turns": 500,
        "errors": 0,
        "ttft_overhead_ms": _ms(3.0, all95),
        "ttft_overhead_first_ms": _ms(first50, first50, n=c),
        "ttft_overhead_steady_ms": _ms(3.0, then95),
        "e2e_ms": _ms(5.0, 9.0),
        "turns_per_s": 100.0,
        "tokens_per_s": 5000.0,
        "server_cpu_ms_per_turn": 2.0,
        "peak_rss_mb": 100.0,
        "machine_busy_pct": 50.0,
    }


def _verdict(targets: list[dict[str, Any]], start: str) -> dict[str, Any]:
    (found,) = [t for t in targets if t["target"].startswith(start)]
    return found


def test_the_c50_p95_is_judged_after_each_workers_first_turn_and_shows_the_burst() -> None:
    results = {
        "load": [
            _row("service", "paced", 50, all95=180.0, first50=170.0, then95=45.0),
            _row("service", "instant", 50, all95=200.0, first50=190.0, then95=80.0),
            _row("bare", "paced", 50, all95=14.0, first50=12.0, then95=9.0),
        ]
    }
    targets = evaluate_targets(results, slow_cap=2000)
    paced = _verdict(targets, "TTFT overhead p95 at c=50 after each worker's first turn (paced")
    assert (paced["measured"], paced["status"]) == (45.0, "PASS")
    assert "all turns: 180.0 ms" in paced["factor"]
    assert "sent at one instant: p50 170.0 ms" in paced["factor"]
    assert "bare ASGI app: 9.0 ms" in paced["factor"]
    instant = _verdict(targets, "TTFT overhead p95 at c=50 after each worker's first turn (instant")
    assert (instant["measured"], instant["status"]) == (80.0, "MISS")


def test_the_c1_p50_is_judged_on_every_turn() -> None:
    row = _row("service", "instant", 1, all95=9.0, first50=8.0, then95=7.0)
    row["ttft_overhead_ms"] = _ms(6.0, 9.0)
    targets = evaluate_targets({"load": [row]}, slow_cap=2000)
    c1 = _verdict(targets, "TTFT overhead p50 at c=1 (instant")
    assert (c1["measured"], c1["status"]) == (6.0, "MISS")


def _results(load: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "started": "now",
        "duration_s": 1.0,
        "git": "abc",
        "machine": {
            "nproc": 2,
            "cpu_model": "x",
            "ram_gib": 1,
            "kernel": "6",
            "python": "3.11",
            "postgresql": "15",
            "client_processes": 2,
        },
        "config": {
            "quick": True,
            "tokens": 50,
            "paced_first_token_delay_s": 0.1,
            "paced_token_delay_s": 0.01,
        },
        "load": load,
    }


def test_the_turns_table_shows_the_first_turns_and_the_rest() -> None:
    results = _results([_row("service", "paced", 50, all95=180.0, first50=170.0, then95=45.0)])
    results["targets"] = evaluate_targets(results, slow_cap=2000)
    text = markdown(results)
    assert "| first turns p50 / then p95 ms |" in text
    assert "| 170.0 / 45.0 |" in text


def test_without_later_turns_the_c50_p95_falls_back_to_every_turn() -> None:
    old = _row("service", "paced", 50, all95=60.0, first50=50.0, then95=1.0)
    del old["ttft_overhead_steady_ms"], old["ttft_overhead_first_ms"]  # a row from before
    new = _row("service", "instant", 50, all95=70.0, first50=65.0, then95=40.0)
    targets = evaluate_targets({"load": [old, new]}, slow_cap=2000)
    paced = _verdict(targets, "TTFT overhead p95 at c=50 (paced")
    assert (paced["measured"], paced["status"]) == (60.0, "MISS")
    instant = _verdict(targets, "TTFT overhead p95 at c=50 after each worker's first turn (inst")
    assert (instant["measured"], instant["status"]) == (40.0, "PASS")


def _budget_rows(text: str) -> list[str]:
    table = text[text.index("### Where the machine's CPU went") :].split("\n\n")[1]
    return table.splitlines()[2:]


def test_the_machine_table_shows_each_part_and_the_whole_per_turn() -> None:
    service = _row("service", "instant", 50, all95=9.0, first50=9.0, then95=9.0)
    service |= {"pg_cpu_ms_per_turn": 1.25, "fake_cpu_ms_per_turn": 0.5}
    service |= {"client_cpu_ms_per_turn": 1.75, "machine_cpu_ms_per_turn": 5.75}
    bare = _row("bare", "instant", 50, all95=9.0, first50=9.0, then95=9.0)
    bare |= {"client_cpu_ms_per_turn": 1.5, "machine_cpu_ms_per_turn": 3.5}
    paced = _row("service", "paced", 50, all95=9.0, first50=9.0, then95=9.0)
    assert _budget_rows(markdown(_results([bare, service, paced]))) == [
        "| bare | 50 | 2.00 | - | - | 1.50 | 3.50 |",
        "| service | 50 | 2.00 | 1.25 | 0.50 | 1.75 | 5.75 |",
    ]  # the paced row is not in it


def _segment(i: int, ms: float, buffers: float) -> dict[str, Any]:
    return {
        "segment": i,
        "turns": 2000,
        "errors": 0,
        "turns_per_s": 150.0,
        "statement_ms_per_turn": ms,
        "buffers_per_turn": buffers,
        "analyze_s": 0.1,
        "pg_cpu_ms_per_turn": 1.0,
        "server_cpu_ms_per_turn": 3.0,
        "foreign_cores": 0.1,
        "analyzed": ["messages"] if i == 1 else [],
        "autoanalyzed": [],
        "top": [{"statement": "SELECT 1", "calls": 2000, "mean_ms": 0.2, "buffers_per_call": 30}],
    }


def _sustained(first: float, last: float) -> dict[str, Any]:
    return {
        "segments": [_segment(1, first, 140.0), _segment(2, 1.0, 141.0), _segment(3, last, 150.0)],
        "segment_turns": 2000,
        "concurrency": 50,
        "judged_by": "statement_ms_per_turn",
        "ratio": round(last / first, 2),
        "server_cpu_ratio": 1.0,
        "pg_cpu_ratio": 1.0,
        "buffers_ratio": round(150.0 / 140.0, 2),
    }


def test_the_sustained_run_is_judged_on_its_last_segment_against_its_first() -> None:
    flat = _verdict(evaluate_targets({"sustained": _sustained(1.0, 1.1)}, 2000), "statement time")
    assert (flat["measured"], flat["status"]) == (1.1, "PASS")
    assert "segment 3 vs 1 of 2000 turns" in flat["target"]
    assert "buffers per turn 140.0 -> 150.0" in flat["factor"]
    grows = _verdict(evaluate_targets({"sustained": _sustained(1.0, 1.2)}, 2000), "statement time")
    assert (grows["measured"], grows["status"]) == (1.2, "MISS")
    assert not [t for t in evaluate_targets({}, 2000) if "sustained" in t["target"]]


def test_the_sustained_table_has_a_row_per_segment() -> None:
    results = _results([]) | {"sustained": _sustained(1.0, 12.0)}
    text = markdown(results)
    table = text[text.index("### Sustained load") :].split("\n\n")[1].splitlines()
    assert len(table) == 2 + 3
    assert table[2].startswith("| 1 | 2000 | 0 | 150.0 | 1.000 | 140 | 0.10 |")
    assert table[4].startswith("| 3 | 2000 | 0 | 150.0 | 12.000 | 150 |")
    assert "Last/first segment: **12.00x**" in text
