"""Usage analytics (agentsvc_core/use_cases/analytics.py): the time range and bucket
of a request, and the report made of storage's grouped sums (a store that answers
the groups a test gives, and the memory storage)."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from uuid import UUID

import msgspec
import pytest

from agentsvc_adapters.memory import MemoryStorage
from agentsvc_core.entities import Principal, Usage, UsageRecord
from agentsvc_core.errors import InvalidInput
from agentsvc_core.ports import AnalyticsGroups, AnalyticsStore
from agentsvc_core.ports.traces import Bucket, ThreadGroup, TraceGroup, UsageGroup
from agentsvc_core.use_cases.analytics import Analytics, SeriesPoint, Totals
from tests.contract.test_conversations_contract import a_thread

NOW = datetime(2026, 11, 24, 10, 30, tzinfo=UTC)
ORG = "org-analytics"
WHO = Principal(org_id=ORG, method="api_key")


class Clock:
    def now(self) -> datetime:
        return NOW


def window(*args: Any) -> tuple[datetime, datetime, str]:
    return Analytics(None, Clock(), None).window(*args)  # type: ignore[arg-type]


def test_periods_are_whole_buckets_ending_now() -> None:
    since, until, bucket = window("24h", None, None, None)
    assert (since, until, bucket) == (NOW.replace(minute=0) - timedelta(hours=23), NOW, "hour")
    since, until, bucket = window("7d", None, None, None)
    assert (since, bucket) == (NOW.replace(minute=0) - timedelta(hours=167), "hour")
    since, until, bucket = window("30d", None, None, None)
    assert (since, bucket) == (NOW.replace(hour=0, minute=0) - timedelta(days=29), "day")
    since, until, bucket = window("30d", None, None, "hour")
    assert (since, bucket) == (NOW.replace(minute=0) - timedelta(hours=719), "hour")


def test_custom_ranges() -> None:
    start = NOW - timedelta(days=3)  # 10:30: whole hours, from 10:00
    assert window("custom", start, None, None) == (start.replace(minute=0), NOW, "hour")
    end = NOW - timedelta(hours=5, minutes=10)  # 05:20: up to 06:00
    assert window("custom", start, end, None)[1] == NOW.replace(hour=6, minute=0)
    assert window("custom", start, NOW + timedelta(days=1), None)[1] == NOW + timedelta(days=1)
    assert window("custom", NOW - timedelta(days=40), NOW - timedelta(days=1), None)[2] == "day"
    for args in (
        ("custom", None, None, None),
        ("custom", NOW, NOW - timedelta(hours=1), None),
        ("custom", NOW - timedelta(days=500), None, None),
        ("custom", NOW - timedelta(days=300), None, "hour"),
        ("7d", start, None, None),
        ("1y", None, None, None),
    ):
        with pytest.raises(InvalidInput):
            window(*args)


def refusal(*args: Any) -> tuple[str, str]:
    """The field and problem of the window's refusal of ``args``."""
    with pytest.raises(InvalidInput) as caught:
        window(*args)
    return caught.value.field, caught.value.problem


HOUR = NOW.replace(minute=0)  # 10:00, the start of NOW's hour


def test_each_refusal_names_its_field_and_problem() -> None:
    assert refusal("custom", None, None, None) == ("from", "is required with period=custom")
    assert refusal("custom", NOW, NOW - timedelta(hours=1), None) == (
        "from",
        "must be before to",
    )
    assert refusal("custom", HOUR - timedelta(days=401), HOUR, None) == (
        "from",
        "the range is at most 400 days",
    )
    assert refusal("1y", None, None, None) == ("period", "must be one of 24h, 7d, 30d, custom")
    assert refusal("7d", NOW - timedelta(days=1), None, None) == (
        "from",
        "from and to go with period=custom",
    )
    # a `to` alone is refused as well as a `from` alone
    assert refusal("7d", None, NOW, None) == ("from", "from and to go with period=custom")
    assert refusal("custom", HOUR - timedelta(hours=2001), HOUR, "hour") == (
        "granularity",
        "the series would have more than 2000 points",
    )


def test_a_range_of_exactly_400_days_is_allowed() -> None:
    since, until, bucket = window("custom", HOUR - timedelta(days=400), HOUR, None)
    assert (since, until, bucket) == (HOUR - timedelta(days=400), HOUR, "day")
    assert refusal("custom", HOUR - timedelta(days=400, hours=1), HOUR, None)[0] == "from"


def test_a_series_of_exactly_2000_points_is_allowed() -> None:
    since, until, bucket = window("custom", HOUR - timedelta(hours=2000), HOUR, "hour")
    assert (since, until, bucket) == (HOUR - timedelta(hours=2000), HOUR, "hour")


def test_up_to_seven_days_is_hours_and_longer_is_days() -> None:
    assert window("custom", HOUR - timedelta(days=7), HOUR, None)[2] == "hour"
    assert window("custom", HOUR - timedelta(days=7, hours=1), HOUR, None)[2] == "day"
    # a granularity given is kept
    assert window("custom", HOUR - timedelta(days=30), HOUR, "hour")[2] == "hour"
    assert window("custom", HOUR - timedelta(days=1), HOUR, "day")[2] == "day"


def test_an_end_within_an_hour_is_taken_up_to_the_hour_but_not_past_now() -> None:
    since = HOUR - timedelta(days=2)
    # an end on the hour stays; one within an earlier hour goes up to its end
    assert window("custom", since, HOUR - timedelta(hours=3), None)[1] == HOUR - timedelta(hours=3)
    assert window("custom", since, HOUR - timedelta(minutes=150), None)[1] == HOUR - timedelta(
        hours=2
    )
    # within the current hour: up to now, not to the hour's end
    assert window("custom", since, NOW - timedelta(minutes=10), None)[1] == NOW
    # an end in the future stays as it is
    later = NOW + timedelta(minutes=7)
    assert window("custom", since, later, None)[1] == later


@pytest.fixture
def far_east() -> Iterator[None]:
    """The machine's own time zone is Tokyo's (UTC+9) for the test."""
    saved = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Tokyo"
    time.tzset()
    try:
        yield
    finally:
        if saved is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = saved
        time.tzset()


@pytest.mark.usefixtures("far_east")
def test_custom_times_are_answered_in_utc() -> None:
    paris = timezone(timedelta(hours=1))
    since, until, _ = window(
        "custom",
        datetime(2026, 11, 20, 12, 30, tzinfo=paris),
        datetime(2026, 11, 21, 9, tzinfo=paris),
        None,
    )
    assert (since, until) == (
        datetime(2026, 11, 20, 11, tzinfo=UTC),
        datetime(2026, 11, 21, 8, tzinfo=UTC),
    )
    assert since.utcoffset() == until.utcoffset() == timedelta(0)


def test_a_period_shorter_than_its_bucket_is_one_point() -> None:
    since, until, bucket = window("24h", None, None, "day")
    assert (since, until, bucket) == (NOW.replace(hour=0, minute=0), NOW, "day")


# --- the report -----------------------------------------------------------------------

AGENT_A = UUID(int=1)
AGENT_B = UUID(int=2)


class Groups(AnalyticsStore):
    """Storage that answers the groups a test gives, and records what it was asked."""

    def __init__(self, groups: AnalyticsGroups, rolled: int = 0) -> None:
        self.groups = groups
        self.asked: list[tuple[Any, ...]] = []
        self.rolled = rolled

    async def analytics(
        self,
        org_id: str,
        since: datetime,
        until: datetime,
        bucket: Bucket,
        agent_id: UUID | None = None,
    ) -> AnalyticsGroups:
        self.asked.append((org_id, since, until, bucket, agent_id))
        return self.groups

    async def roll_up(self) -> int:
        return self.rolled


def usage(**given: Any) -> UsageGroup:
    values: dict[str, Any] = {
        "calls": 1,
        "input_tokens": 0,
        "output_tokens": 0,
        "cached_input_tokens": 0,
        "cost_usd": 0.0,
        "unpriced": 0,
    }
    return UsageGroup(**(values | given))


def test_a_usage_group_adds_to_each_total_it_names() -> None:
    t = Totals()
    t.add_usage(
        usage(
            calls=2,
            input_tokens=100,
            output_tokens=30,
            cached_input_tokens=7,
            cost_usd=0.25,
            unpriced=1,
            purpose="compaction",
            key_source="byok",
        )
    )
    t.add_usage(usage(calls=1, cost_usd=0.125, purpose="compaction", key_source="byok"))
    t.add_usage(usage(calls=3, input_tokens=5, output_tokens=4, cost_usd=0.5, purpose="memory"))
    t.add_usage(usage(calls=2, cost_usd=0.25, purpose="memory"))
    t.add_usage(usage(calls=4, cost_usd=1.0, purpose="reply", key_source="platform"))
    assert msgspec.structs.asdict(t) == {
        "threads": 0,
        "messages": 0,
        "replies": 0,
        "model_calls": 12,
        "input_tokens": 105,
        "output_tokens": 34,
        "cached_input_tokens": 7,
        "total_tokens": 139,
        "cost_usd": 2.125,
        "unpriced_calls": 1,
        "tool_calls": 0,
        "tool_errors": 0,
        "errors": 0,
        "compaction_calls": 3,
        "compaction_cost_usd": 0.375,
        "memory_calls": 5,
        "memory_cost_usd": 0.75,
        "byok_calls": 3,
        "platform_calls": 9,  # a group without a key source is the platform's
    }


def test_costs_are_rounded_to_millionths() -> None:
    t = Totals(cost_usd=0.1234564, compaction_cost_usd=2.0000006, memory_cost_usd=1.2345674)
    assert t.rounded() is t
    assert (t.cost_usd, t.compaction_cost_usd, t.memory_cost_usd) == (0.123456, 2.000001, 1.234567)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_the_report_asks_storage_for_its_window_and_says_what_it_asked() -> None:
    store = Groups(AnalyticsGroups(usage=[], traces=[], threads=[]))
    analytics = Analytics(store, Clock(), "2026-11-01", trace_retention_days=7)
    got = run(analytics.report(WHO, "24h", agent_id=AGENT_A))
    first = HOUR - timedelta(hours=23)
    assert store.asked == [(ORG, first, NOW, "hour", AGENT_A)]
    assert (got.period, got.since, got.until, got.granularity, got.agent_id) == (
        "24h",
        first,
        NOW,
        "hour",
        AGENT_A,
    )
    assert (got.prices_taken, got.trace_retention_days) == ("2026-11-01", 7)
    # every hour a point, zero-filled, the current one last
    assert [p.start for p in got.series] == [first + timedelta(hours=h) for h in range(24)]
    assert all(p == SeriesPoint(start=p.start) for p in got.series)
    assert got.totals == Totals()
    assert (got.by_model, got.by_agent) == ([], [])
    assert Analytics(store, Clock(), None)._retention == 30  # the default: 30 days


def test_a_custom_report_asks_for_the_range_given() -> None:
    store = Groups(AnalyticsGroups(usage=[], traces=[], threads=[]))
    since = HOUR - timedelta(days=20)
    got = run(
        Analytics(store, Clock(), None).report(
            WHO, "custom", since=since, until=HOUR, granularity="day"
        )
    )
    assert store.asked == [(ORG, since, HOUR, "day", None)]
    assert [p.start for p in got.series][:2] == [
        since.replace(hour=0),
        since.replace(hour=0) + timedelta(days=1),
    ]
    # the last day is the one the range ends in
    assert got.series[-1].start == HOUR.replace(hour=0)
    assert len(got.series) == 21


def test_each_group_adds_to_the_totals_its_bucket_and_its_agent() -> None:
    first = HOUR - timedelta(hours=23)
    groups = AnalyticsGroups(
        usage=[
            # a bucket and an agent: the totals, the point and the agent
            usage(bucket=first, agent_id=AGENT_A, model="gpt-a", calls=2, cost_usd=0.5),
            # a bucket alone (storage's by-bucket view): the totals and the point
            usage(bucket=HOUR, calls=1, cost_usd=0.25),
            # an agent alone (the by-agent view): the agent only
            usage(agent_id=AGENT_B, calls=5, cost_usd=2.0),
            # a bucket outside the series: the first point
            usage(bucket=first - timedelta(hours=5), calls=7, cost_usd=0.0),
        ],
        traces=[
            TraceGroup(
                bucket=HOUR,
                agent_id=AGENT_A,
                replies=3,
                messages=4,
                tool_calls=5,
                tool_errors=1,
                errors=2,
            ),
            TraceGroup(
                agent_id=AGENT_B, replies=1, messages=1, tool_calls=0, tool_errors=0, errors=0
            ),
        ],
        threads=[
            ThreadGroup(bucket=first, agent_id=AGENT_B, threads=6),
            ThreadGroup(bucket=HOUR, threads=1),
        ],
    )
    got = run(Analytics(Groups(groups), Clock(), None).report(WHO, "24h"))
    points = {p.start: p for p in got.series}
    assert (got.totals.model_calls, got.totals.cost_usd) == (10, 0.75)
    assert (points[first].model_calls, points[first].cost_usd) == (9, 0.5)
    assert (points[HOUR].model_calls, points[HOUR].cost_usd) == (1, 0.25)
    assert sum(p.model_calls for p in got.series) == got.totals.model_calls
    assert (got.totals.replies, got.totals.messages, got.totals.tool_calls) == (3, 4, 5)
    assert (got.totals.tool_errors, got.totals.errors, got.totals.threads) == (1, 2, 7)
    assert (points[HOUR].replies, points[HOUR].errors, points[HOUR].threads) == (3, 2, 1)
    assert (points[first].threads, points[first].replies) == (6, 0)
    a, b = sorted(got.by_agent, key=lambda x: x.agent_id)
    assert (a.agent_id, a.model_calls, a.cost_usd, a.replies, a.messages, a.threads) == (
        AGENT_A,
        2,
        0.5,
        3,
        4,
        0,
    )
    assert (a.tool_calls, a.tool_errors, a.errors) == (5, 1, 2)
    assert (b.agent_id, b.model_calls, b.cost_usd, b.replies, b.threads) == (AGENT_B, 5, 2.0, 1, 6)


def test_models_add_up_and_an_unpriced_one_has_no_cost() -> None:
    groups = AnalyticsGroups(
        usage=[
            usage(
                model="gpt-a",
                calls=1,
                input_tokens=10,
                output_tokens=2,
                cached_input_tokens=1,
                cost_usd=0.1000004,
            ),
            usage(
                model="gpt-a",
                calls=2,
                input_tokens=20,
                output_tokens=4,
                cached_input_tokens=3,
                cost_usd=0.2,
            ),
            usage(model="local-x", calls=1, cost_usd=0.0, unpriced=1),
            usage(model="local-x", calls=1, cost_usd=0.3),
            usage(model="gpt-b", calls=1, cost_usd=0.9),
            usage(model="gpt-c", calls=1, cost_usd=0.9),
            usage(model="cheap", calls=1, cost_usd=0.0),
            usage(calls=4, cost_usd=1.0),  # a group of no model: in no model's row
        ],
        traces=[],
        threads=[],
    )
    got = run(Analytics(Groups(groups), Clock(), None).report(WHO, "7d"))
    rows = [
        (m.model, m.model_calls, m.input_tokens, m.output_tokens, m.cached_input_tokens, m.cost_usd)
        for m in got.by_model
    ]
    # the costliest first, names in order between equals; an unknown cost counts as none
    assert rows == [
        ("gpt-b", 1, 0, 0, 0, 0.9),
        ("gpt-c", 1, 0, 0, 0, 0.9),
        ("gpt-a", 3, 30, 6, 4, 0.3),
        ("cheap", 1, 0, 0, 0, 0.0),
        ("local-x", 2, 0, 0, 0, None),
    ]


def test_agents_are_ordered_by_cost_then_id_and_rounded() -> None:
    c = UUID(int=3)
    groups = AnalyticsGroups(
        usage=[
            usage(agent_id=c, cost_usd=0.5),
            usage(agent_id=AGENT_B, cost_usd=0.0000004),
            usage(agent_id=AGENT_A, cost_usd=0.0),
            usage(agent_id=UUID(int=4), cost_usd=0.5),
        ],
        traces=[],
        threads=[],
    )
    got = run(Analytics(Groups(groups), Clock(), None).report(WHO, "7d"))
    assert [(a.agent_id, a.cost_usd) for a in got.by_agent] == [
        (c, 0.5),
        (UUID(int=4), 0.5),
        (AGENT_A, 0.0),
        (AGENT_B, 0.0),  # 0.0000004, rounded
    ]


def test_the_totals_and_points_are_rounded() -> None:
    groups = AnalyticsGroups(usage=[usage(bucket=HOUR, cost_usd=0.1234564)], traces=[], threads=[])
    got = run(Analytics(Groups(groups), Clock(), None).report(WHO, "24h"))
    assert got.totals.cost_usd == 0.123456
    assert got.series[-1].cost_usd == 0.123456


def test_roll_up_folds_through_storage() -> None:
    store = Groups(AnalyticsGroups(usage=[], traces=[], threads=[]), rolled=12)
    assert run(Analytics(store, Clock(), None).roll_up()) == 12


def test_a_report_over_the_memory_storage() -> None:
    """Turns, usage and threads as stored, read back through the memory adapter."""
    storage = MemoryStorage()
    thread = a_thread(ORG, AGENT_A, created_at=HOUR - timedelta(hours=2))
    run(storage.threads.add(thread))
    records = [
        UsageRecord(
            id=uuid.uuid4(),
            org_id=org,
            agent_id=AGENT_A,
            thread_id=thread.id,
            run_id=uuid.uuid4(),
            message_id=None,
            provider="fake",
            model="gpt-a",
            usage=Usage(input_tokens=100, output_tokens=10),
            key_source="platform",
            metadata={},
            created_at=at,
            cost_usd=0.01,
        )
        for org, at in [
            (ORG, HOUR - timedelta(hours=2)),
            (ORG, NOW - timedelta(minutes=1)),
            (ORG, NOW),  # the window's end is not in it
            ("another-org", NOW - timedelta(minutes=1)),
        ]
    ]
    run(storage.conversations.add_usage(records))
    clock = Clock()
    got = run(Analytics(storage.analytics, clock, None).report(WHO, "24h"))
    assert (got.totals.model_calls, got.totals.input_tokens, got.totals.total_tokens) == (
        2,
        200,
        220,
    )
    assert got.totals.cost_usd == 0.02
    assert got.totals.threads == 1
    points = {p.start: p.model_calls for p in got.series if p.model_calls}
    assert points == {HOUR - timedelta(hours=2): 1, HOUR: 1}
    [agent] = got.by_agent
    assert (agent.agent_id, agent.model_calls, agent.threads) == (AGENT_A, 2, 1)


def test_a_granularity_asked_is_the_reports() -> None:
    store = Groups(AnalyticsGroups(usage=[], traces=[], threads=[]))
    since = HOUR - timedelta(days=2)  # two days: hours, unless days are asked for
    got = run(
        Analytics(store, Clock(), None).report(
            WHO, "custom", since=since, until=HOUR, granularity="day"
        )
    )
    assert (got.granularity, store.asked[0][3]) == ("day", "day")
    assert [p.start for p in got.series] == [
        since.replace(hour=0) + timedelta(days=d) for d in range(3)
    ]


def test_a_series_ends_before_a_range_that_ends_on_a_bucket() -> None:
    store = Groups(AnalyticsGroups(usage=[], traces=[], threads=[]))
    analytics = Analytics(store, Clock(), None)
    got = run(analytics.report(WHO, "custom", since=HOUR - timedelta(hours=2), until=HOUR))
    assert [p.start for p in got.series] == [HOUR - timedelta(hours=2), HOUR - timedelta(hours=1)]


def test_a_group_is_counted_in_the_bucket_its_time_falls_in() -> None:
    """Storage names a group's bucket by its start; any time in it counts there too."""
    day = HOUR.replace(hour=0)
    groups = AnalyticsGroups(
        usage=[usage(bucket=day - timedelta(days=3) + timedelta(hours=13), calls=2)],
        traces=[],
        threads=[],
    )
    got = run(Analytics(Groups(groups), Clock(), None).report(WHO, "30d"))
    points = {p.start: p.model_calls for p in got.series if p.model_calls}
    assert points == {day - timedelta(days=3): 2}


def test_turns_of_several_groups_add_up() -> None:
    both = [
        TraceGroup(
            bucket=HOUR, agent_id=a, replies=1, messages=2, tool_calls=3, tool_errors=1, errors=1
        )
        for a in (AGENT_A, AGENT_B)
    ]
    store = Groups(AnalyticsGroups(usage=[], traces=both, threads=[]))
    got = run(Analytics(store, Clock(), None).report(WHO, "24h"))
    t = got.totals
    assert (t.replies, t.messages, t.tool_calls, t.tool_errors, t.errors) == (2, 4, 6, 2, 2)
    assert got.series[-1].replies == 2
