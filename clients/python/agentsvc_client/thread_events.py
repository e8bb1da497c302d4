"""A multiplayer thread's live events (``GET /api/threads/{id}/events``), typed, across
dropped connections (docs/multiplayer.md).

``MessagePosted`` (a person's message) and ``ReplyStored`` (the agent's) carry the
SSE id of their position in the thread's history; ``ReplyStarted`` has none (it is
not replayed). When the connection drops the stream asks again with
``Last-Event-ID`` = the last id seen, so nothing is missed or seen twice. It never
ends by itself: stop iterating (or ``close()``) to leave.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any, Union

import msgspec

from agentsvc_client import errors
from agentsvc_client._base import _seg
from agentsvc_client._sse import SSEDecoder
from agentsvc_client._stream import DROPPED, RETRY_STATUSES

if TYPE_CHECKING:
    from agentsvc_client.client import AsyncClient, Client


class MessagePosted(msgspec.Struct, frozen=True, kw_only=True):
    """``message``: a person's message, stored (``id``: its place in the history)."""

    id: int = 0
    message_id: str = ""
    sender_id: str | None
    sender_name: str | None
    content: str
    created_at: str


class ReplyStored(msgspec.Struct, frozen=True, kw_only=True):
    """``reply``: the agent's message, stored."""

    id: int = 0
    message_id: str = ""
    run_id: str | None
    content: str
    status: str
    created_at: str


class ReplyStarted(msgspec.Struct, frozen=True, kw_only=True):
    """``reply_started``: the agent began answering (live only)."""

    run_id: str
    started_at: str


ThreadEvent = Union[MessagePosted, ReplyStored, ReplyStarted]  # noqa: UP007 (runtime alias)

_TYPES: dict[str, type[Any]] = {
    "message": MessagePosted,
    "reply": ReplyStored,
    "reply_started": ReplyStarted,
}


def _typed(name: str, raw_id: str, data: str) -> ThreadEvent | None:
    """The typed event (None: a name this client does not know, from a newer service)."""
    cls = _TYPES.get(name)
    if cls is None:
        return None
    try:
        fields = msgspec.json.decode(data)
        if cls is not ReplyStarted:
            fields = {**fields, "message_id": fields.pop("id"), "id": int(raw_id or 0)}
        event: ThreadEvent = msgspec.convert(fields, cls)
    except (msgspec.ValidationError, msgspec.DecodeError, KeyError, TypeError) as exc:
        raise errors.UnexpectedResponse(
            f"the thread's event {name!r} does not decode: {exc}"
        ) from exc
    return event


class _Cursor:
    def __init__(self, thread_id: str, after: int | None) -> None:
        self.path = f"/api/threads/{_seg(thread_id)}/events"
        self.last_id = after
        self.failures = 0

    def request(self) -> tuple[dict[str, str], dict[str, Any]]:
        if self.last_id is None:
            return {}, {}
        return {"Last-Event-ID": str(self.last_id)}, {}

    def accept(self, name: str, raw_id: str, data: str) -> ThreadEvent | None:
        if raw_id.isdigit() and self.last_id is not None and int(raw_id) <= self.last_id:
            return None
        event = _typed(name, raw_id, data)
        if raw_id.isdigit():
            self.last_id = int(raw_id)
        self.failures = 0
        return event

    def failed(self, exc: BaseException, retries: int, backoff: float) -> float:
        self.failures += 1
        if self.failures > retries:
            raise errors.StreamInterrupted(
                f"the thread's events dropped and {retries} attempts failed: {exc!r}",
                run_id=None,
                last_event_id=self.last_id or 0,
                attempts=self.failures,
            ) from exc
        return float(min(backoff * 2 ** (self.failures - 1), 10.0))


class ThreadEventStream:
    """An endless iterator of a thread's events. Iterate it once."""

    def __init__(self, client: Client, thread_id: str, after: int | None) -> None:
        self._client = client
        self._cursor = _Cursor(thread_id, after)
        self._iterator: Iterator[ThreadEvent] | None = None

    @property
    def last_event_id(self) -> int | None:
        return self._cursor.last_id

    def __iter__(self) -> Iterator[ThreadEvent]:
        if self._iterator is None:
            self._iterator = self._events()
        return self._iterator

    def __next__(self) -> ThreadEvent:
        return next(iter(self))

    def __enter__(self) -> ThreadEventStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._iterator is not None:
            self._iterator.close()  # type: ignore[attr-defined]

    def _events(self) -> Iterator[ThreadEvent]:
        cursor, client = self._cursor, self._client
        while True:
            headers, params = cursor.request()
            try:
                with client._stream(
                    "GET", cursor.path, headers=headers, params=params, body=None
                ) as r:
                    if r.status_code in RETRY_STATUSES:
                        raise ConnectionError(f"status {r.status_code}")
                    decoder = SSEDecoder()
                    for line in r.iter_lines():
                        raw = decoder.feed(line)
                        if raw is not None and (event := cursor.accept(*raw)) is not None:
                            yield event
                    raise ConnectionError("the stream ended")
            except (*DROPPED, ConnectionError) as exc:
                time.sleep(cursor.failed(exc, client.stream_retries, client.stream_backoff))


class AsyncThreadEventStream:
    """An endless async iterator of a thread's events. Iterate it once."""

    def __init__(self, client: AsyncClient, thread_id: str, after: int | None) -> None:
        self._client = client
        self._cursor = _Cursor(thread_id, after)
        self._iterator: AsyncIterator[ThreadEvent] | None = None

    @property
    def last_event_id(self) -> int | None:
        return self._cursor.last_id

    def __aiter__(self) -> AsyncIterator[ThreadEvent]:
        if self._iterator is None:
            self._iterator = self._events()
        return self._iterator

    async def __anext__(self) -> ThreadEvent:
        return await self.__aiter__().__anext__()

    async def __aenter__(self) -> AsyncThreadEventStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._iterator is not None:
            await self._iterator.aclose()  # type: ignore[attr-defined]

    async def _events(self) -> AsyncIterator[ThreadEvent]:
        cursor, client = self._cursor, self._client
        while True:
            headers, params = cursor.request()
            try:
                async with client._stream(
                    "GET", cursor.path, headers=headers, params=params, body=None
                ) as r:
                    if r.status_code in RETRY_STATUSES:
                        raise ConnectionError(f"status {r.status_code}")
                    decoder = SSEDecoder()
                    async for line in r.aiter_lines():
                        raw = decoder.feed(line)
                        if raw is not None and (event := cursor.accept(*raw)) is not None:
                            yield event
                    raise ConnectionError("the stream ended")
            except (*DROPPED, ConnectionError) as exc:
                await asyncio.sleep(
                    cursor.failed(exc, client.stream_retries, client.stream_backoff)
                )


__all__ = [
    "AsyncThreadEventStream",
    "MessagePosted",
    "ReplyStarted",
    "ReplyStored",
    "ThreadEvent",
    "ThreadEventStream",
]
