from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol
from uuid import UUID


class StopSignal(asyncio.Event):
    """Set when a reply must stop. ``on_set`` callbacks run the moment it is set, so
    the reply can cancel its model call without a task that only waits for this.
    ``interrupted`` tells a stop of the process shutting down from a user's stop."""

    def __init__(self) -> None:
        super().__init__()
        self._callbacks: list[Callable[[], object]] = []
        self.interrupted = False

    def interrupt(self) -> None:
        """Set, because the process is shutting down (unless already set)."""
        if not self.is_set():
            self.interrupted = True
            self.set()

    def set(self) -> None:
        if self.is_set():
            return
        super().set()
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def on_set(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Run ``callback`` when set (at once if already set); returns a remover."""
        if self.is_set():
            callback()
            return lambda: None
        self._callbacks.append(callback)

        def remove() -> None:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

        return remove


class StopBus(Protocol):
    """Carries "stop this reply" to whichever process runs it.

    The process that runs a reply ``watch``es its run id and gets an event that
    is set when anyone, in any process, ``publish``es a stop for that id.
    """

    async def publish(self, run_id: UUID) -> None: ...

    def watch(self, run_id: UUID) -> StopSignal: ...

    def unwatch(self, run_id: UUID) -> None: ...


RevokedCallback = Callable[[UUID | None], None]


class Revocations(Protocol):
    """Carries "this API key was revoked" to every process, so each drops the key
    from its cache of recent lookups. A callback gets the key id, or ``None``
    when notices may have been missed (drop everything)."""

    async def publish_revoked(self, key_id: UUID) -> None: ...

    def on_revoked(self, callback: RevokedCallback) -> None: ...


class ThreadNews(Protocol):
    """Carries "this thread has something new" (a message stored, a reply begun or
    stored) to every process, so the followers of its live events there read it
    again (``GET /api/threads/{id}/events``). Only multiplayer threads send it. A
    notice may be lost (a listener reconnecting): followers also read now and then."""

    async def publish_news(self, thread_id: UUID) -> None: ...

    def on_news(self, callback: Callable[[UUID], None]) -> None: ...
