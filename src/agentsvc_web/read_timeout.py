"""A bounded time to receive a request (``AGENTSVC_REQUEST_READ_TIMEOUT_S``), so a
client sending its request a byte at a time (slowloris), or never finishing it,
cannot hold a connection and a worker's slot for ever.

uvicorn bounds only the idle time between requests (``timeout_keep_alive``); its
httptools protocol has no timer while a request's head or body arrives. Two parts
close that gap:

- ``ReadTimeoutProtocol`` (uvicorn's ``http=`` for ``agentsvc serve``) closes a
  connection whose request head is not complete within the bound of its first
  byte (or of the connection's opening), and one whose body is still arriving
  the bound after the answer was sent without reading it (a 401, a 429);
- ``BodyDeadline`` (an ASGI middleware) bounds reading the body the app asks
  for: past the bound from the head's arrival, the request is answered 408
  ``REQUEST_TIMEOUT`` and the connection closed.

The bound is on receiving the request only: once it is read, an answer (a reply
streamed for minutes) has no time limit from here.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from litestar import Request, Response
from litestar.enums import ScopeType
from litestar.exceptions import HTTPException
from litestar.types import ASGIApp, Receive, ReceiveMessage, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from agentsvc_web.errors import error_response
from agentsvc_web.schemas import ErrorBody
from agentsvc_web.settings import Settings


class RequestReadTimeout(HTTPException):
    status_code = 408


def request_timeout_response(_: Request[Any, Any, Any], exc: RequestReadTimeout) -> Response[Any]:
    response: Response[ErrorBody] = error_response(
        408, exc.detail, "REQUEST_TIMEOUT", headers={"Connection": "close"}
    )
    return response


class BodyDeadline:
    """Reading the request body must end within ``timeout_s`` of the request's
    start; once the body is complete, ``receive`` (which then only waits for the
    client to leave) is passed through untouched.

    A few timers, not one per request (Litestar builds a route's middleware once
    per route, so each route has its own sweep): ``asyncio.timeout`` around each
    ``receive`` cost about 5 us a request (measured on uvloop), more than the rest
    of the limits together. Instead the requests
    waiting for their body are kept in a dictionary (request task -> deadline),
    which a sweep looks at every ``timeout_s / 4`` seconds (at most 1 s) while
    any is waiting; an overdue one is cancelled out of its ``receive``, and the
    cancellation turned into ``RequestReadTimeout`` (408). A request is answered
    between ``timeout_s`` and ``timeout_s`` plus one sweep after it began.
    """

    def __init__(self, app: ASGIApp, timeout_s: float) -> None:
        self.app = app
        self._timeout_s = timeout_s
        self._sweep_s = min(1.0, timeout_s / 4)
        self._waiting: dict[asyncio.Task[Any], float] = {}
        self._expired: set[asyncio.Task[Any]] = set()
        self._swept: asyncio.AbstractEventLoop | None = None  # the loop a sweep is due on

    def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        now = time.monotonic()
        for task, deadline in list(self._waiting.items()):
            if task.get_loop() is not loop:  # left by a loop now gone (tests run many)
                del self._waiting[task]
            elif deadline <= now:
                del self._waiting[task]
                self._expired.add(task)
                task.cancel()
        self._swept = loop if self._waiting else None
        if self._swept is not None:
            loop.call_later(self._sweep_s, self._sweep)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        deadline = time.monotonic() + self._timeout_s
        complete = False

        async def bounded() -> ReceiveMessage:
            nonlocal complete
            if complete:
                return await receive()
            task = asyncio.current_task()
            assert task is not None
            self._waiting[task] = deadline
            if self._swept is not task.get_loop():
                self._swept = task.get_loop()
                self._swept.call_later(self._sweep_s, self._sweep)
            try:
                message = await receive()
            except asyncio.CancelledError:
                if task not in self._expired:
                    raise
                self._expired.discard(task)
                task.uncancel()
                raise RequestReadTimeout(
                    detail=f"the request body did not arrive within {self._timeout_s:g} s"
                ) from None
            finally:
                self._waiting.pop(task, None)
            complete = message["type"] != "http.request" or not message.get("more_body")
            return message

        await self.app(scope, bounded, send)


MAX_HEAD_BYTES = 64 * 1024

_HEAD_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
)


def _head_too_large() -> bytes:
    body = b'{"error":"HEADERS_TOO_LARGE","detail":"request head over %d bytes"}' % MAX_HEAD_BYTES
    return _HEAD_TOO_LARGE % (len(body), body)


class ReadTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a timer on the request head (and on a
    body nobody reads), and a bound on the head's size (``MAX_HEAD_BYTES``: httptools
    has none, and uvicorn keeps every header line it is sent). Used as
    ``http="agentsvc_web.read_timeout:ReadTimeoutProtocol"`` (an import string, so
    every worker process imports it); the time bound comes from
    ``AGENTSVC_REQUEST_READ_TIMEOUT_S``, read once per process."""

    timeout_s: float | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if ReadTimeoutProtocol.timeout_s is None:
            ReadTimeoutProtocol.timeout_s = float(Settings.from_env().request_read_timeout_s)
        self._timeout_s: float = ReadTimeoutProtocol.timeout_s
        self._timer: asyncio.TimerHandle | None = None
        self._in_request = False  # between a request's first byte and its last
        self._head_bytes: int | None = 0  # bytes of a head not yet complete; None: none

    def _arm(self) -> None:
        if self._timer is None:
            self._timer = self.loop.call_later(self._timeout_s, self._expired)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self) -> None:
        self._timer = None
        if self.flow.read_paused:
            # We stopped reading (a pipelined request waits, or the app has not
            # taken the body yet): the delay is ours, not the client's.
            self._arm()
        elif not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._head_bytes is not None:  # all of ``data`` went into a head still open
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES and not self.transport.is_closing():
                self.transport.write(_head_too_large())
                self.transport.close()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_request = True
        self._head_bytes = 0
        self._arm()

    def on_headers_complete(self) -> None:
        self._head_bytes = None
        self._disarm()  # the body's time is BodyDeadline's while the app reads it
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_request = False
        self._disarm()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._in_request and not self.transport.is_closing():
            self._arm()  # answered before its body arrived: the rest must come in time
