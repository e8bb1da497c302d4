"""The in-process signal buses: stops, revocations, follow requests and thread news
within one process.

``LocalStopBus``, ``LocalRevocations``, ``LocalThreadNews`` and ``LocalFollows``
implement ``StopBus``, ``Revocations``, ``ThreadNews`` (``agentsvc_core.ports.signals``)
and ``FollowRequests`` (``agentsvc_core.ports.streams``) for one process: the memory
storage's wiring and the tests use them as they are; ``PostgresStopBus`` extends them
with LISTEN/NOTIFY across processes. A shared adapters module (as ``outbound`` is), not part of
``memory``: the PostgreSQL adapter builds on them and no adapter imports another.
"""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from agentsvc_core.ports.signals import (
    Revocations,
    RevokedCallback,
    StopBus,
    StopSignal,
    ThreadNews,
)
from agentsvc_core.ports.streams import FollowRequests

__all__ = ["LocalFollows", "LocalRevocations", "LocalStopBus", "LocalThreadNews"]


class LocalStopBus(StopBus):
    """Stops within one process (memory storage, tests)."""

    def __init__(self) -> None:
        self._events: dict[UUID, StopSignal] = {}

    async def publish(self, run_id: UUID) -> None:
        self.deliver(run_id)

    def deliver(self, run_id: UUID) -> None:
        event = self._events.get(run_id)
        if event is not None:
            event.set()

    def watch(self, run_id: UUID) -> StopSignal:
        signal = self._events.get(run_id)
        if signal is None:
            signal = self._events[run_id] = StopSignal()
        return signal

    def unwatch(self, run_id: UUID) -> None:
        self._events.pop(run_id, None)


class LocalRevocations(Revocations):
    """Revocations within one process (memory storage, tests)."""

    def __init__(self) -> None:
        self._callbacks: list[RevokedCallback] = []

    async def publish_revoked(self, key_id: UUID) -> None:
        self.deliver_revoked(key_id)

    def deliver_revoked(self, key_id: UUID | None) -> None:
        for callback in self._callbacks:
            callback(key_id)

    def on_revoked(self, callback: RevokedCallback) -> None:
        self._callbacks.append(callback)


class LocalFollows(FollowRequests):
    """Follow requests within one process (memory storage, tests): the reply's
    process serves its followers from memory, so this only tells the callbacks."""

    def __init__(self) -> None:
        self._follow_callbacks: list[Callable[[UUID], None]] = []

    async def publish_follow(self, run_id: UUID) -> None:
        self.deliver_follow(run_id)

    def deliver_follow(self, run_id: UUID) -> None:
        for callback in self._follow_callbacks:
            callback(run_id)

    def on_follow(self, callback: Callable[[UUID], None]) -> None:
        self._follow_callbacks.append(callback)


class LocalThreadNews(ThreadNews):
    """Thread news within one process (memory storage, tests)."""

    def __init__(self) -> None:
        self._news_callbacks: list[Callable[[UUID], None]] = []

    async def publish_news(self, thread_id: UUID) -> None:
        self.deliver_news(thread_id)

    def deliver_news(self, thread_id: UUID) -> None:
        for callback in self._news_callbacks:
            callback(thread_id)

    def on_news(self, callback: Callable[[UUID], None]) -> None:
        self._news_callbacks.append(callback)
