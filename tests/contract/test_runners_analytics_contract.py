"""A runner's sums (``RunnerStore.run_sums``, the analytics' one read): the memory
and PostgreSQL adapters sum the same runs the same way, by the UTC day of their
creation and their steps by model, checked against the sums worked out here
from the runs themselves, over runs Hypothesis makes.

Runs are written far in the future (``updated_at``), so that the sweep of a
service sharing the database never takes them for stale, and go with their
runner at the end of each example.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentsvc_core.entities.runner import RUN_ENDED, RunnerRun, StepRun
from agentsvc_core.ports.runners import DaySums, ModelSums, RunSums
from tests.contract.conftest import Backend
from tests.contract.test_runners_contract import run_in, with_runner

SINCE = datetime(2040, 3, 10, 12, 0, tzinfo=UTC)
UPDATED = datetime(2100, 1, 1, tzinfo=UTC)
STATUSES = ["queued", "running", "paused", "succeeded", "failed", "cancelled"]

offsets = st.integers(-3600, 3 * 86400)  # seconds from SINCE: some before it
costs = st.floats(0, 1000, allow_nan=False, allow_infinity=False)
models = st.sampled_from([None, "m-a", "m-b", "ünï/💡"])
step_runs = st.builds(
    StepRun,
    step_id=st.just("s"),
    status=st.sampled_from(["pending", "succeeded", "failed"]),
    tokens=st.integers(0, 10**9),
    cost_usd=costs,
    model=models,
)
runs = st.builds(
    lambda created, status, tokens, cost, started, took, steps: {
        "created": created,
        "status": status,
        "tokens": tokens,
        "cost": cost,
        "started": started,
        "took": took,
        "steps": tuple(steps),
    },
    offsets,
    st.sampled_from(STATUSES),
    st.integers(0, 10**12),
    costs,
    st.none() | st.integers(0, 600),  # seconds from creation to start (None: no start)
    st.none() | st.integers(0, 7200),  # seconds from start to end (None: no end)
    st.lists(step_runs, max_size=4),
)
examples = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))


def _run(org: str, runner_id: uuid.UUID, made: dict[str, Any]) -> RunnerRun:
    created = SINCE + timedelta(seconds=made["created"])
    started = None if made["started"] is None else created + timedelta(seconds=made["started"])
    ended = None
    if made["took"] is not None:
        ended = (started or created) + timedelta(seconds=made["took"])
    return run_in(
        org,
        runner_id=runner_id,
        status=made["status"],
        tokens=made["tokens"],
        cost_usd=made["cost"],
        created_at=created,
        started_at=started,
        ended_at=ended,
        updated_at=UPDATED,
        steps=made["steps"],
    )


def _expected(runs: list[RunnerRun]) -> tuple[list[DaySums], list[ModelSums]]:
    """The sums, worked out from the runs one by one."""
    days: dict[date, dict[str, Any]] = defaultdict(lambda: defaultdict(int))
    by_model: dict[str, dict[str, Any]] = defaultdict(lambda: defaultdict(int))
    for r in runs:
        if r.created_at < SINCE:
            continue
        d = days[r.created_at.astimezone(UTC).date()]
        d["runs"] += 1
        if r.status in ("succeeded", "failed", "cancelled", "paused"):
            d[r.status] += 1
        d["tokens"] += r.tokens
        d["cost_usd"] += r.cost_usd
        if r.status in RUN_ENDED and r.ended_at is not None:
            d["timed"] += 1
            d["seconds"] += (r.ended_at - (r.started_at or r.created_at)).total_seconds()
        for s in r.steps:
            if s.model is not None:
                m = by_model[s.model]
                m["steps"] += 1
                m["tokens"] += s.tokens
                m["cost_usd"] += s.cost_usd
    return (
        [DaySums(day, **dict(days[day])) for day in sorted(days)],
        sorted((ModelSums(name, **dict(m)) for name, m in by_model.items()), key=_model),
    )


def _model(m: ModelSums) -> str:
    return m.model


def _close(got: RunSums, days: list[DaySums], by_model: list[ModelSums]) -> None:
    """Counts exact; sums of floats to their rounding (the order of a sum is the
    storage's own)."""
    assert [(d.day, d.runs, d.succeeded, d.failed, d.cancelled, d.paused) for d in got.days] == [
        (d.day, d.runs, d.succeeded, d.failed, d.cancelled, d.paused) for d in days
    ]
    assert [(d.tokens, d.timed) for d in got.days] == [(d.tokens, d.timed) for d in days]
    assert [d.cost_usd for d in got.days] == pytest.approx([d.cost_usd for d in days], rel=1e-9)
    assert [d.seconds for d in got.days] == pytest.approx([d.seconds for d in days], rel=1e-9)
    mine = sorted(got.models, key=_model)
    assert [(m.model, m.steps, m.tokens) for m in mine] == [
        (m.model, m.steps, m.tokens) for m in by_model
    ]
    assert [m.cost_usd for m in mine] == pytest.approx([m.cost_usd for m in by_model], rel=1e-9)
    assert all(isinstance(m.tokens, int) and isinstance(m.cost_usd, float) for m in mine)


@examples
@given(made=st.lists(runs, max_size=12))
def test_run_sums_are_the_runners_runs_summed_by_day_and_model(
    backend: Backend, made: list[dict[str, Any]]
) -> None:
    org, runner = with_runner(backend)
    _, other = with_runner(backend, org)
    stranger_org, stranger = with_runner(backend)
    store = backend.storage.runners
    mine = [_run(org, runner.id, m) for m in made]
    try:
        for r in mine:
            backend.run(store.add_run, r)
        # another runner's runs, and another organization's: not summed
        for r in (_run(org, other.id, m) for m in made[:3]):
            backend.run(store.add_run, r)
        for r in (_run(stranger_org, stranger.id, m) for m in made[:3]):
            backend.run(store.add_run, r)
        _close(backend.run(store.run_sums, org, runner.id, SINCE), *_expected(mine))
        # nothing of it for another organization asking with the runner's id
        assert backend.run(store.run_sums, stranger_org, runner.id, SINCE) == RunSums(
            days=[], models=[]
        )
    finally:
        for o, owner in ((org, runner), (org, other), (stranger_org, stranger)):
            backend.run(store.delete, o, owner.id)


def test_a_day_is_the_utc_day_and_since_counts_from_its_instant(backend: Backend) -> None:
    org, runner = with_runner(backend)
    store = backend.storage.runners
    new_york = timezone(timedelta(hours=-5))
    made = [
        run_in(org, runner_id=runner.id, created_at=SINCE - timedelta(microseconds=1)),
        run_in(org, runner_id=runner.id, created_at=SINCE, status="succeeded"),
        # 07:00 in New York is 12:00 UTC: since, to the microsecond
        run_in(org, runner_id=runner.id, created_at=datetime(2040, 3, 10, 7, tzinfo=new_york)),
        run_in(
            org,
            runner_id=runner.id,
            created_at=datetime(2040, 3, 10, 23, 59, 59, 999999, tzinfo=UTC),
            status="failed",
            started_at=datetime(2040, 3, 11, tzinfo=UTC),
            ended_at=datetime(2040, 3, 11, 0, 0, 1, 500000, tzinfo=UTC),
        ),
        # the evening of the 10th in New York is the 11th in UTC
        run_in(org, runner_id=runner.id, created_at=datetime(2040, 3, 10, 23, tzinfo=new_york)),
    ]
    try:
        for r in made:
            backend.run(store.add_run, msgspec.structs.replace(r, updated_at=UPDATED))
        got = backend.run(store.run_sums, org, runner.id, SINCE)
        assert [(d.day, d.runs, d.succeeded, d.failed, d.timed) for d in got.days] == [
            (date(2040, 3, 10), 3, 1, 1, 1),
            (date(2040, 3, 11), 1, 0, 0, 0),
        ]
        assert got.days[0].seconds == 1.5  # from its start, not its creation
        assert got.models == []
    finally:
        backend.run(store.delete, org, runner.id)
