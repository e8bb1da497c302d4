"""Two sends on one busy thread (``multitaskStrategy``): a send that finds the
thread's reply still running is refused by default (``reject``: 409
``THREAD_BUSY``, as the spec says); with ``enqueue`` it waits for the running
reply to end and then starts its own; with ``interrupt`` it first stops the
running reply (its text is kept, as ``POST .../stop`` keeps it) and then does the
same.

A waiting send answers at once with its stream (``Queued``): the client reads
keep-alives until its reply starts, then that reply's events from ``meta`` on.
What can refuse a send (access, validation, the agent) was checked before it
queued; what can only be known once the thread is free (the previous reply
waiting for client tool results, a thread deleted meanwhile) ends the stream
with an ``error`` event instead of an HTTP status.

Order: the sends waiting on one thread in one process form a line (``Line``)
and start one after the other, in the order they came; across processes each
waits for the thread on its own, so their order is the order in which they find
it free. A reply whose process runs it is awaited directly; one in another
process is looked for again every ``POLL_S``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Mapping
from datetime import timedelta
from typing import Literal
from uuid import UUID

from agentsvc_core.errors import (
    Conflict,
    DomainError,
    IdempotencyKeyReused,
    InvalidInput,
    NotFound,
    PermissionDenied,
    ThreadBusy,
    Unavailable,
)
from agentsvc_core.ports import Clock, ConversationStore
from agentsvc_core.use_cases.turn.events import ErrorEvent, EventData, EventSource

__all__ = ["MAX_WAIT_S", "POLL_S", "Line", "Queued", "Strategy", "Waiting", "error_event"]

Strategy = Literal["reject", "enqueue", "interrupt"]
STRATEGIES: tuple[Strategy, ...] = ("reject", "enqueue", "interrupt")
POLL_S = 0.25  # how often a reply of another process is looked for
MAX_WAIT_S = 600.0  # a send waits at most this long for its thread (then THREAD_BUSY)


class Line:
    """The sends of this process that wait for one thread, first come first
    served: ``turn`` yields once every send that came before has started (or
    given up)."""

    def __init__(self) -> None:
        self._lines: dict[Hashable, list[asyncio.Future[None]]] = {}

    def __len__(self) -> int:
        return len(self._lines)

    @contextlib.asynccontextmanager
    async def turn(self, key: Hashable) -> AsyncIterator[None]:
        line = self._lines.setdefault(key, [])
        me: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        line.append(me)
        if line[0] is me:
            me.set_result(None)
        try:
            await me
            yield
        finally:
            line.remove(me)
            if not line:
                del self._lines[key]
            elif not line[0].done():
                line[0].set_result(None)


ReplyOf = Callable[[], Awaitable["asyncio.Task[None] | bool"]]


def reply_of(
    store: ConversationStore,
    running: Mapping[UUID, tuple[str, asyncio.Task[None], object]],
    clock: Clock,
    stale_after: timedelta,
    org: str,
    thread_id: UUID,
) -> ReplyOf:
    """``until_free``'s question about one thread: the task of its running reply
    when this process runs it (``running``: the process's replies by run id), True
    when another process does, False when none runs."""

    async def ask() -> asyncio.Task[None] | bool:
        run = await store.running(org, thread_id, clock.now() - stale_after)
        entry = None if run is None else running.get(run.id)
        return run is not None if entry is None else entry[1]

    return ask


class Waiting:
    """This process's sends that wait for their thread: their line per thread,
    their tasks (cancelled by ``cancel``), and the keyed ones by key, so that a
    retry of one finds it."""

    def __init__(self) -> None:
        self._line = Line()
        self._tasks: set[asyncio.Task[EventSource]] = set()
        self._keys: dict[tuple[str, str], tuple[bytes, Queued]] = {}

    def keyed(self, org: str, key: str, fingerprint: bytes) -> Queued | None:
        """The waiting send of this idempotency key; ``IdempotencyKeyReused`` when
        it was sent with another request."""
        found = self._keys.get((org, key))
        if found is None:
            return None
        if found[0] != fingerprint:
            raise IdempotencyKeyReused()
        return found[1]

    def queue(
        self,
        org: str,
        thread_id: Hashable,
        key: tuple[str, bytes] | None,
        reply_of: ReplyOf,
        send: Callable[[], Awaitable[EventSource]],
    ) -> Queued:
        """Wait (in a task) for this send's turn in the thread's line and for the
        thread's reply to end (``reply_of``, as ``until_free`` takes it), then
        ``send``; again if another send took the thread first."""
        deadline = asyncio.get_running_loop().time() + MAX_WAIT_S

        async def started() -> EventSource:
            async with self._line.turn((org, thread_id)):
                while True:
                    await until_free(reply_of, deadline)
                    try:
                        return await send()
                    except ThreadBusy:
                        continue  # another send took the thread first: wait for it too

        queued = Queued(started)
        task = queued.task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if key is not None:
            held = (org, key[0])
            self._keys[held] = (key[1], queued)
            task.add_done_callback(lambda _: self._keys.pop(held, None))
        return queued

    def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()


class Queued(EventSource):
    """The stream of a send that waits for its thread: keep-alives (``read``
    answers None) until ``started()`` gives the reply's own stream, whose events it
    then passes on; a refusal met once the thread was free is one ``error``
    event."""

    def __init__(self, started: Callable[[], Awaitable[EventSource]]) -> None:
        self._task: asyncio.Task[EventSource] = asyncio.create_task(_or_refused(started))
        self._source: EventSource | None = None

    @property
    def task(self) -> asyncio.Task[EventSource]:
        return self._task

    async def read(self, start: int, wait_s: float) -> list[EventData] | None:
        if self._source is None:
            done, _ = await asyncio.wait({self._task}, timeout=wait_s)
            if not done:
                return None
            self._source = self._task.result()
        return await self._source.read(start, wait_s)


async def _or_refused(started: Callable[[], Awaitable[EventSource]]) -> EventSource:
    """The reply's stream, or a refusal met on the way as a stream of its own: the
    task never ends in a domain error, read or not (its client may have left)."""
    try:
        return await started()
    except DomainError as exc:
        return _Refused(error_event(exc))


class _Refused(EventSource):
    """A stream of one ``error`` event."""

    def __init__(self, event: ErrorEvent) -> None:
        self._events: list[EventData] = [event]

    async def read(self, start: int, wait_s: float) -> list[EventData] | None:
        return self._events[start:]


def error_event(exc: DomainError) -> ErrorEvent:
    """A refusal as the ``error`` event of a stream, with the code its HTTP answer
    would have carried."""
    match exc:
        case Conflict():
            code = exc.code
        case InvalidInput():
            code = "VALIDATION_ERROR"
        case NotFound():
            code = "NOT_FOUND"
        case PermissionDenied():
            code = "FORBIDDEN"
        case Unavailable():
            code = "UNAVAILABLE"
        case _:
            code = "ERROR"
    return ErrorEvent(code=code, detail=exc.detail)


async def until_free(running: ReplyOf, deadline: float) -> None:
    """Wait until the thread's reply ended: ``running`` answers the reply's task
    when this process runs it (awaited), True when another process does (looked
    for again in ``POLL_S``), False when none runs. ``Conflict`` (THREAD_BUSY)
    past ``deadline`` (the loop's clock)."""
    loop = asyncio.get_running_loop()
    while True:
        found = await running()
        if found is False:
            return
        left = deadline - loop.time()
        if left <= 0:
            raise Conflict(
                "a reply is still running on this thread; this send waited"
                f" {MAX_WAIT_S:.0f} s for it",
                code="THREAD_BUSY",
            )
        if isinstance(found, asyncio.Task):
            await asyncio.wait({found}, timeout=left)
        else:
            await asyncio.sleep(min(POLL_S, left))
