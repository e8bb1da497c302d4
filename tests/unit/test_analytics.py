"""Usage analytics (agentsvc_core/use_cases/analytics.py): the time range and bucket
of a request."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agentsvc_core.errors import InvalidInput
from agentsvc_core.use_cases.analytics import Analytics

NOW = datetime(2026, 11, 24, 10, 30, tzinfo=UTC)


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
