from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol
from uuid import UUID


class StopBus(Protocol):
    """Carries "stop this reply" to whichever process runs it.

    The process that runs a reply ``watch``es its run id and gets an event that
    is set when anyone, in any process, ``publish``es a stop for that id.
    """

    async def publish(self, run_id: UUID) -> None: ...

    def watch(self, run_id: UUID) -> asyncio.Event: ...

    def unwatch(self, run_id: UUID) -> None: ...


class LocalStopBus(StopBus):
    """Stops within one process (memory storage, tests)."""

    def __init__(self) -> None:
        self._events: dict[UUID, asyncio.Event] = {}

    async def publish(self, run_id: UUID) -> None:
        self.deliver(run_id)

    def deliver(self, run_id: UUID) -> None:
        event = self._events.get(run_id)
        if event is not None:
            event.set()

    def watch(self, run_id: UUID) -> asyncio.Event:
        return self._events.setdefault(run_id, asyncio.Event())

    def unwatch(self, run_id: UUID) -> None:
        self._events.pop(run_id, None)


RevokedCallback = Callable[[UUID | None], None]


class Revocations(Protocol):
    """Carries "this API key was revoked" to every process, so each drops the key
    from its cache of recent lookups. A callback gets the key id, or ``None``
    when notices may have been missed (drop everything)."""

    async def publish_revoked(self, key_id: UUID) -> None: ...

    def on_revoked(self, callback: RevokedCallback) -> None: ...


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
