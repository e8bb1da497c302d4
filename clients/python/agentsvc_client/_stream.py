"""The reply stream: typed events, exactly once, across dropped connections.

A send is ``POST /api/threads/{id}/messages`` with an ``Idempotency-Key``. When the
connection drops mid-reply (a read error, a cut chunked body, a read timeout) the
reply goes on in the service, so the stream picks it up again:

- after ``meta`` (the run id is known): ``GET /api/threads/{id}/stream?runId=...``
  with ``Last-Event-ID`` = the last event id seen; the service answers every event
  after it, then the live rest;
- before ``meta``: the same POST with the same ``Idempotency-Key``; the service stores
  nothing new and answers the same reply from its first event.

Events are numbered within the reply, so an event whose id was already seen is
dropped: the caller sees each exactly once. Retries are bounded (``retries`` in a
row without a new event, with exponential backoff); then ``StreamInterrupted``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import httpx
import msgspec

from agentsvc_client import errors
from agentsvc_client._base import _seg
from agentsvc_client._sse import SSEDecoder
from agentsvc_client.events import Done, Error, Event, Meta, Token, decode

if TYPE_CHECKING:
    from agentsvc_client.client import AsyncClient, Client

# What a dropped connection looks like to httpx (a cut chunked body is a
# RemoteProtocolError; a silent peer a ReadTimeout, as the service sends a
# keep-alive every 15 s).
DROPPED = (httpx.NetworkError, httpx.TimeoutException, httpx.RemoteProtocolError)
# Statuses worth another try while the service restarts or a proxy hiccups.
RETRY_STATUSES = frozenset({502, 503, 504})


class _Dropped(Exception):
    """The body ended before ``done`` or ``error``."""


class _State:
    """What the stream knows so far: enough to pick it up again."""

    def __init__(
        self,
        thread_id: str,
        body: bytes | None,
        key: str,
        run_id: str | None,
        after: int,
        path: str | None = None,
    ) -> None:
        self.thread_id = thread_id
        self.body = body  # None: an attach, never a send
        # where the send goes: the thread's messages, or an edit's or a regenerate's path
        self.path = path or f"/api/threads/{_seg(thread_id)}/messages"
        self.key = key
        self.run_id = run_id
        self.last_id = after  # the last event the caller has: 0 for a send
        self.failures = 0

    def request(self) -> tuple[str, str, dict[str, str], dict[str, Any], bytes | None]:
        """(method, path, headers, params, body) of the next request."""
        if self.run_id is None and self.body is not None:
            headers = {"Idempotency-Key": self.key, "Content-Type": "application/json"}
            return "POST", self.path, headers, {}, self.body
        headers = {"Last-Event-ID": str(self.last_id)}
        params = {"runId": self.run_id} if self.run_id else {}
        return "GET", f"/api/threads/{_seg(self.thread_id)}/stream", headers, params, None

    def accept(self, raw_name: str, raw_id: str, data: str) -> Event | None:
        """The typed event if it is new, else None."""
        event_id = int(raw_id) if raw_id.isdigit() else 0
        if event_id and event_id <= self.last_id:
            return None  # sent again after a re-attach or a re-send
        try:
            event = decode(raw_name, event_id, data)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise errors.UnexpectedResponse(
                f"the reply's event {raw_name!r} (id {raw_id}) does not decode: {exc}"
                f" (run {self.run_id}, last event {self.last_id})"
            ) from exc
        if event_id:
            self.last_id = event_id
        self.failures = 0
        if isinstance(event, Meta):
            self.run_id = event.run_id
        return event

    def failed(self, exc: BaseException, retries: int, backoff: float) -> float:
        """Count a drop; the delay before the next try, or raise when out of tries."""
        self.failures += 1
        if self.failures > retries:
            raise errors.StreamInterrupted(
                f"the reply's stream dropped and {retries} re-attach attempts failed"
                f" (run {self.run_id}, last event {self.last_id}): {exc!r}",
                run_id=self.run_id,
                last_event_id=self.last_id,
                attempts=self.failures,
            ) from exc
        return float(min(backoff * 2 ** (self.failures - 1), 10.0))


class ReplyStream:
    """An iterator of the reply's events (``Meta``, ``Token``, ..., ``Done`` or ``Error``).

    Nothing is sent until you iterate (or call ``text()``/``final()``). Iterate it once.
    """

    def __init__(
        self,
        client: Client,
        thread_id: str,
        body: bytes | None,
        *,
        idempotency_key: str,
        run_id: str | None = None,
        after: int = 0,
        path: str | None = None,
    ) -> None:
        self._client = client
        self._state = _State(thread_id, body, idempotency_key, run_id, after, path)
        self._iterator: Iterator[Event] | None = None
        self._done: Done | None = None
        self.idempotency_key = idempotency_key

    @property
    def run_id(self) -> str | None:
        """The reply's run id, once ``meta`` arrived."""
        return self._state.run_id

    @property
    def last_event_id(self) -> int:
        return self._state.last_id

    def __iter__(self) -> Iterator[Event]:
        if self._iterator is None:
            self._iterator = self._events()
        return self._iterator

    def __next__(self) -> Event:
        return next(iter(self))

    def __enter__(self) -> ReplyStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop reading and close the connection (the reply goes on in the service)."""
        if self._iterator is not None:
            self._iterator.close()  # type: ignore[attr-defined]

    def text_stream(self) -> Iterator[str]:
        """The reply's text as it comes, piece by piece. Raises ``ReplyError``."""
        for event in self._until_final():
            if isinstance(event, Token):
                yield event.delta

    def text(self) -> str:
        """Read to the end; the reply's text (the tokens joined). Raises ``ReplyError``."""
        return "".join(e.delta for e in self._until_final() if isinstance(e, Token))

    def final(self) -> Done:
        """Read to the end; the ``Done`` event, or ``ReplyError`` for an ``error`` event."""
        for _ in self._until_final():
            pass
        assert self._done is not None
        return self._done

    def _until_final(self) -> Iterator[Event]:
        for event in self:
            if isinstance(event, Done):
                self._done = event
            elif isinstance(event, Error):
                self.close()  # the connection goes back to the pool now
                raise errors.ReplyError(
                    f"the reply failed: {event.code}: {event.detail or ''}".rstrip(": "),
                    error=event.code,
                    detail=event.detail,
                )
            yield event
        if self._done is None:
            raise errors.UnexpectedResponse("the reply's stream ended without done or error")

    def _events(self) -> Iterator[Event]:
        state, client = self._state, self._client
        while True:
            method, path, headers, params, body = state.request()
            try:
                with client._stream(method, path, headers=headers, params=params, body=body) as r:
                    if r.status_code in RETRY_STATUSES:
                        raise _Dropped(f"status {r.status_code}")
                    decoder = SSEDecoder()
                    for line in r.iter_lines():
                        raw = decoder.feed(line)
                        if raw is None:
                            continue
                        event = state.accept(*raw)
                        if event is None:
                            continue
                        yield event
                        if isinstance(event, Done | Error):
                            return
                    raise _Dropped("the stream ended before done or error")
            except (*DROPPED, _Dropped) as exc:
                time.sleep(state.failed(exc, client.stream_retries, client.stream_backoff))


class AsyncReplyStream:
    """An async iterator of the reply's events; ``await stream.text()``, ``final()``.

    Nothing is sent until you iterate. Iterate it once.
    """

    def __init__(
        self,
        client: AsyncClient,
        thread_id: str,
        body: bytes | None,
        *,
        idempotency_key: str,
        run_id: str | None = None,
        after: int = 0,
        path: str | None = None,
    ) -> None:
        self._client = client
        self._state = _State(thread_id, body, idempotency_key, run_id, after, path)
        self._iterator: AsyncIterator[Event] | None = None
        self._done: Done | None = None
        self.idempotency_key = idempotency_key

    @property
    def run_id(self) -> str | None:
        return self._state.run_id

    @property
    def last_event_id(self) -> int:
        return self._state.last_id

    def __aiter__(self) -> AsyncIterator[Event]:
        if self._iterator is None:
            self._iterator = self._events()
        return self._iterator

    async def __anext__(self) -> Event:
        return await self.__aiter__().__anext__()

    async def __aenter__(self) -> AsyncReplyStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop reading and close the connection (the reply goes on in the service).
        Call it (or use ``async with``) when you leave an ``async for`` early."""
        if self._iterator is not None:
            await self._iterator.aclose()  # type: ignore[attr-defined]

    async def text_stream(self) -> AsyncIterator[str]:
        """The reply's text as it comes, piece by piece. Raises ``ReplyError``."""
        async for event in self._until_final():
            if isinstance(event, Token):
                yield event.delta

    async def text(self) -> str:
        """Read to the end; the reply's text. Raises ``ReplyError``."""
        parts = [e.delta async for e in self._until_final() if isinstance(e, Token)]
        return "".join(parts)

    async def final(self) -> Done:
        """Read to the end; the ``Done`` event, or ``ReplyError`` for an ``error`` event."""
        async for _ in self._until_final():
            pass
        assert self._done is not None
        return self._done

    async def _until_final(self) -> AsyncIterator[Event]:
        async for event in self:
            if isinstance(event, Done):
                self._done = event
            elif isinstance(event, Error):
                await self.aclose()  # the connection goes back to the pool now
                raise errors.ReplyError(
                    f"the reply failed: {event.code}: {event.detail or ''}".rstrip(": "),
                    error=event.code,
                    detail=event.detail,
                )
            yield event
        if self._done is None:
            raise errors.UnexpectedResponse("the reply's stream ended without done or error")

    async def _events(self) -> AsyncIterator[Event]:
        state, client = self._state, self._client
        while True:
            method, path, headers, params, body = state.request()
            try:
                async with client._stream(
                    method, path, headers=headers, params=params, body=body
                ) as r:
                    if r.status_code in RETRY_STATUSES:
                        raise _Dropped(f"status {r.status_code}")
                    decoder = SSEDecoder()
                    async for line in r.aiter_lines():
                        raw = decoder.feed(line)
                        if raw is None:
                            continue
                        event = state.accept(*raw)
                        if event is None:
                            continue
                        yield event
                        if isinstance(event, Done | Error):
                            return
                    raise _Dropped("the stream ended before done or error")
            except (*DROPPED, _Dropped) as exc:
                await asyncio.sleep(state.failed(exc, client.stream_retries, client.stream_backoff))
