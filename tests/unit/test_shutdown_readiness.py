"""SIGTERM first makes the process not ready (/readyz 503), then begins the drain."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

import pytest

from agentsvc_adapters.memory import MemoryStorage
from agentsvc_core.errors import Unavailable
from agentsvc_core.use_cases.health import Readiness
from agentsvc_web.shutdown import _drain


class Closing:
    def __init__(self) -> None:
        self.closed_with: list[float] = []

    def close(self, grace_s: float) -> None:
        self.closed_with.append(grace_s)


async def test_the_signal_marks_the_process_not_ready_and_chains_on() -> None:
    readiness = Readiness(MemoryStorage())
    await readiness.check()  # ready
    conversation = Closing()
    chained: list[int] = []

    def previous(signum: int, frame: Any) -> None:
        chained.append(signum)

    loop = asyncio.get_running_loop()
    _drain(loop, conversation, 3.0, readiness, previous, signal.SIGTERM, None)  # type: ignore[arg-type]
    with pytest.raises(Unavailable, match="shutting down"):
        await readiness.check()
    assert chained == [signal.SIGTERM]
    await asyncio.sleep(0)
    assert conversation.closed_with == [3.0]


async def test_the_signal_ends_the_streams_that_never_end_by_themselves() -> None:
    left: list[str] = []
    loop = asyncio.get_running_loop()
    _drain(
        loop,
        Closing(),  # type: ignore[arg-type]
        3.0,
        None,
        lambda signum, frame: None,
        signal.SIGTERM,
        None,
        leaving=lambda: left.append("events"),
    )
    await asyncio.sleep(0)
    assert left == ["events"]
