"""``Analytics.report`` over a generated month (tests/contract/month.py), on both
adapters, against sums computed directly from the generated rows: every totals
field, every bucket of the series (present, zero-filled, in order), the breakdowns
by model and by agent, the ``agentId`` filter, custom ranges (Hypothesis), and
another organization's rows (in the same days, with the same agent id) that must
never count.
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentsvc_core.entities import Principal
from agentsvc_core.use_cases.analytics import Analytics, AnalyticsReport
from tests.contract.conftest import Backend
from tests.contract.month import (
    COSTS,
    FIELDS,
    GRID,
    MONTH_START,
    NOW,
    STEP,
    Expected,
    Fixed,
    Month,
    a_turn,
    bucket_start,
    expected,
    generate,
)
from tests.contract.test_conversations_contract import a_thread


@pytest.fixture(scope="module")
def month(backend: Backend) -> Month:
    generated = generate(backend)
    # the sweep's fold (PostgreSQL: into the hourly sums; memory: nothing to do):
    # the month's rows are hours old by the fold's mark, read from the sums only
    backend.run(backend.storage.analytics.roll_up)
    return generated


def fields(totals: Any) -> dict[str, float]:
    return {name: getattr(totals, name) for name in FIELDS}


def assert_same(
    got: dict[str, Any], want: dict[str, Any], where: str, tolerance: float = 1e-6
) -> None:
    """Equal; costs within ``tolerance`` (the report rounds each to 6 decimals)."""
    for name, value in want.items():
        if value is None or name not in COSTS:
            assert got[name] == value, f"{where}: {name}"
        else:
            assert got[name] == pytest.approx(value, abs=tolerance), f"{where}: {name}"
    assert got.keys() == want.keys()


def check(report: AnalyticsReport, want: Expected) -> None:
    """``report`` says what ``want`` does, in every part."""
    assert [p.start for p in report.series] == list(want.series)  # every bucket, in order
    for point in report.series:
        assert_same(fields(point), want.series[point.start], f"bucket {point.start}")
    assert_same(fields(report.totals), want.totals, "totals")
    # the points add up to the totals (so do the agents), costs to within their
    # rounding: half a millionth of a dollar each, the parts' and the total's own
    # (each is rounded from a sum PostgreSQL adds in its own order)
    for parts in (report.series, report.by_agent):
        added = {name: sum(getattr(p, name) for p in parts) for name in FIELDS}
        bound = 5e-7 * (len(parts) + 1) + 1e-9
        assert_same(added, fields(report.totals), "sum of parts", bound)
    assert {a.agent_id: fields(a) for a in report.by_agent}.keys() == want.agents.keys()
    for a in report.by_agent:
        assert_same(fields(a), want.agents[a.agent_id], f"agent {a.agent_id}")
    assert report.by_agent == sorted(report.by_agent, key=lambda a: (-a.cost_usd, str(a.agent_id)))
    got_models = {
        mt.model: {
            "model_calls": mt.model_calls,
            "input_tokens": mt.input_tokens,
            "output_tokens": mt.output_tokens,
            "cached_input_tokens": mt.cached_input_tokens,
            "cost_usd": mt.cost_usd,
        }
        for mt in report.by_model
    }
    assert got_models.keys() == want.models.keys()
    for name, values in want.models.items():
        assert_same(got_models[name], values, f"model {name}")
    assert [mt.model for mt in report.by_model] == [
        mt.model for mt in sorted(report.by_model, key=lambda x: (-(x.cost_usd or 0), x.model))
    ]


def analytics(backend: Backend) -> Analytics:
    return Analytics(backend.storage.analytics, Fixed(NOW), "2026-01-15")


def report(backend: Backend, org: str, period: str, **kw: Any) -> AnalyticsReport:
    who = Principal(org_id=org, method="api_key")
    return backend.run(lambda: analytics(backend).report(who, period, **kw))


# --- analytics ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("period", "points", "bucket"), [("24h", 24, "hour"), ("7d", 168, "hour"), ("30d", 30, "day")]
)
@pytest.mark.parametrize("one_agent", [False, True])
def test_a_period_reports_the_month_exactly(
    backend: Backend, month: Month, period: str, points: int, bucket: str, one_agent: bool
) -> None:
    agent = month.agents[0] if one_agent else None
    got = report(backend, month.org, period, agent_id=agent)
    since = bucket_start(NOW, bucket) - STEP[bucket] * (points - 1)
    assert (got.since, got.until, got.granularity) == (since, NOW, bucket)
    assert (got.period, got.agent_id, got.prices_taken) == (period, agent, "2026-01-15")
    assert len(got.series) == points
    want = expected(month, month.org, since, NOW, bucket, agent)
    assert want.totals["model_calls"] > 0, "the window has data"
    check(got, want)
    if one_agent:
        assert [a.agent_id for a in got.by_agent] == [agent]


def test_the_30d_report_is_not_trivial(backend: Backend, month: Month) -> None:
    """The month exercises what the checks above compare: unpriced calls and an
    unpriced model, compaction, memory collection, BYOK, errors, tool errors, and
    rows before the window."""
    got = report(backend, month.org, "30d")
    t = got.totals
    for name in (
        "unpriced_calls",
        "compaction_calls",
        "memory_calls",
        "byok_calls",
        "platform_calls",
    ):
        assert getattr(t, name) > 0, name
    for name in ("errors", "tool_errors", "threads"):
        assert getattr(t, name) > 0, name
    assert t.messages > t.replies
    assert t.cost_usd > t.compaction_cost_usd > 0
    assert t.cost_usd > t.memory_cost_usd > 0
    costs = {mt.model: mt.cost_usd for mt in got.by_model}
    assert costs["local-x"] is None
    assert isinstance(costs["gpt-a"], float)
    assert isinstance(costs["gpt-b"], float)
    assert len(got.by_agent) == 3
    assert any(u.created_at < got.since for u in month.usage if u.org_id == month.org)
    assert any(p.model_calls == 0 for p in report(backend, month.org, "24h").series)


@settings(max_examples=25)
@given(
    start=st.integers(min_value=0, max_value=33 * 24 * 6),
    length=st.integers(min_value=1, max_value=33 * 24 * 6),
    jitter=st.sampled_from([timedelta(0), timedelta(microseconds=1), timedelta(minutes=7)]),
    granularity=st.sampled_from([None, "hour", "day"]),
    one_agent=st.booleans(),
)
def test_a_custom_range_reports_the_month_exactly(
    backend: Backend,
    month: Month,
    start: int,
    length: int,
    jitter: timedelta,
    granularity: Any,
    one_agent: bool,
) -> None:
    since = MONTH_START - timedelta(days=1) + GRID * start + jitter
    until = since + GRID * length
    agent = month.agents[1] if one_agent else None
    got = report(
        backend,
        month.org,
        "custom",
        since=since,
        until=until,
        granularity=granularity,
        agent_id=agent,
    )
    # whole hours: from rounded down, to up (not past now)
    since = bucket_start(since, "hour")
    if until != bucket_start(until, "hour") and until < NOW:
        until = min(bucket_start(until, "hour") + STEP["hour"], NOW)
    bucket = granularity or ("hour" if until - since <= timedelta(days=7) else "day")
    assert (got.since, got.until, got.granularity) == (since, until, bucket)
    check(got, expected(month, month.org, since, until, bucket, agent))


@pytest.mark.parametrize("kind", ["usage", "traces", "threads"])
def test_a_range_holds_its_start_and_not_its_end(backend: Backend, month: Month, kind: str) -> None:
    """A custom range from one row's time to another's: the first counts, the last
    does not."""
    rows: dict[str, list[datetime]] = {
        "usage": [u.created_at for u in month.usage if u.org_id == month.org],
        "traces": [t.started_at for t in month.traces if t.org_id == month.org],
        "threads": [th.created_at for th in month.threads if th.org_id == month.org],
    }
    times = sorted({bucket_start(t, "hour") for t in rows[kind]})
    since, until = times[len(times) // 4], times[3 * len(times) // 4]
    got = report(backend, month.org, "custom", since=since, until=until, granularity="hour")
    assert any(t == until for t in rows[kind]) or any(
        until <= t < until + STEP["hour"] for t in rows[kind]
    )
    check(got, expected(month, month.org, since, until, "hour", None))


def test_another_organization_never_counts(backend: Backend, month: Month) -> None:
    # the other organization's threads use the first agent's id, in the same days
    theirs = report(backend, month.other, "30d", agent_id=month.agents[0])
    since = bucket_start(NOW, "day") - timedelta(days=29)
    want = expected(month, month.other, since, NOW, "day", month.agents[0])
    assert want.totals["replies"] > 0
    check(theirs, want)
    # an organization with nothing: every bucket, all zero
    empty = report(backend, backend.fresh_org(), "7d")
    assert len(empty.series) == 168
    assert all(fields(p) == dict.fromkeys(FIELDS, 0) for p in empty.series)
    assert (empty.by_agent, empty.by_model) == ([], [])


def test_rows_stored_since_the_last_fold_count_before_and_after_it(backend: Backend) -> None:
    """Turns of the last two hours, stored after the last fold: analytics reads them
    as rows (the fold has not summed them yet), and after the fold from the sums;
    the answer is the same, and folding again changes nothing."""
    now = datetime.now(UTC)
    rng = random.Random(23)
    m = Month(org=backend.fresh_org(), other="", agents=[uuid.uuid4()], runners=[uuid.uuid4()])
    backend.run(backend.storage.analytics.roll_up)  # the mark: about two minutes ago
    start = now - timedelta(minutes=100)
    th = backend.run(
        backend.storage.threads.add,
        a_thread(m.org, m.agents[0], created_at=start, updated_at=start),
    )
    m.threads.append(th)
    for k in range(6):
        a_turn(backend, m, th, start + timedelta(minutes=15 * k + 1), rng)
    since = bucket_start(now, "hour") - timedelta(hours=23)
    live = Analytics(backend.storage.analytics, Fixed(now), None)
    who = Principal(org_id=m.org, method="api_key")

    def got() -> AnalyticsReport:
        return backend.run(lambda: live.report(who, "24h"))

    want = expected(m, m.org, since, now, "hour", None)
    assert want.totals["replies"] == 6
    check(got(), want)
    backend.run(backend.storage.analytics.roll_up)
    check(got(), want)
    backend.run(backend.storage.analytics.roll_up)
    check(got(), want)
