"""``TokenBuckets``: the rate limiter's arithmetic and its bounded memory."""

from __future__ import annotations

import pytest

from agentsvc_web.limits import TokenBuckets


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_full_bucket_then_one_token_per_interval() -> None:
    clock = Clock()
    b = TokenBuckets(60, clock=clock)  # 60 at once, then one a second
    assert [b.take("k") for _ in range(60)] == [0.0] * 60
    assert b.take("k") == pytest.approx(1.0)
    assert b.wait("k") == pytest.approx(1.0)
    clock.now += 0.5
    assert b.take("k") == pytest.approx(0.5)  # a refusal takes nothing
    clock.now += 0.5
    assert b.take("k") == 0.0
    assert b.take("other") == 0.0  # keys are independent
    clock.now += 3600
    assert [b.take("k") for _ in range(60)] == [0.0] * 60  # full again, never more


def test_wait_takes_nothing() -> None:
    b = TokenBuckets(2, clock=Clock())
    assert b.wait("k") == 0.0
    assert b.wait("k") == 0.0
    assert (b.take("k"), b.take("k")) == (0.0, 0.0)
    assert b.wait("k") == pytest.approx(30.0)


def test_memory_is_bounded_by_max_keys_dropping_the_least_recently_used() -> None:
    clock = Clock()
    b = TokenBuckets(1, max_keys=100, clock=clock)
    b.take("busy")
    for i in range(1000):
        b.take(i)
        b.take("busy")  # used all along: never the one dropped
        assert len(b) <= 100
    assert b.wait("busy") > 0


def test_idle_buckets_are_dropped_as_new_keys_come() -> None:
    clock = Clock()
    b = TokenBuckets(6, clock=clock)  # an empty bucket is full again after 60 s
    for i in range(50):
        b.take(i)
    clock.now += 61
    for i in range(50, 75):
        b.take(i)
    assert len(b) == 25  # two idle ones go per new key


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        TokenBuckets(0)
