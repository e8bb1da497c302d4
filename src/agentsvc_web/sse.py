"""Server-Sent Events framing of a ``Turn`` (the events: docs/client-guide.md).

Every event is ``id: N`` (increasing within the reply), ``event: NAME`` and one
``data:`` line of JSON. Events that arrive together go out in one write. While
the model is silent a comment line keeps proxies from closing the connection,
every ``KEEPALIVE_S`` seconds (15 s by default, ``Settings.sse_keepalive_s``: well
under the 60 s idle timeout common to proxies and load balancers).

``SseStream`` is a Litestar ``Stream`` whose ASGI response is our own
``SseResponse``: Litestar's streaming response watches for the client leaving
with a task group, a task and a pending ``receive`` per reply (about 5% of the
service's CPU per turn), and that watch would only stop the writing early, since
a client that disconnects does not cancel the reply (it is stored, and the client
may re-attach to it). ``SseResponse`` writes each batch of frames and ends with the
turn, reading nothing from the client; uvicorn drops writes to a closed connection,
and a server that raises on them ends the response quietly. It is built through
Litestar's own extension points: ``SseStream.to_asgi_response`` builds it (where
Litestar's ``Stream`` builds its ``ASGIStreamingResponse``, with the same
arguments), and it overrides only ``send_body`` (the start line, headers and
cookies are Litestar's).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import msgspec
from litestar.enums import MediaType
from litestar.params import HeaderParameter
from litestar.response import Stream
from litestar.response.base import ASGIResponse
from litestar.response.streaming import ASGIStreamingResponse
from litestar.types import HTTPResponseBodyEvent, Receive, Send

from agentsvc_core.errors import InvalidInput
from agentsvc_core.use_cases.turn.events import EVENT_NAMES, EventSource

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from litestar import Litestar, Request
    from litestar.background_tasks import BackgroundTask, BackgroundTasks
    from litestar.datastructures import Cookie

    from agentsvc_web.metrics import HttpMetrics

KEEPALIVE_S = 15.0  # the default of Settings.sse_keepalive_s
KEEPALIVE = b": keep-alive\n\n"
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
MAX_EVENT_ID = 1_000_000_000
# the header a client re-attaching to a stream sends: the id of the last event it saw
LastEventId = Annotated[
    str, HeaderParameter(name="Last-Event-ID", pattern=r"^[0-9]{0,9}$", required=False)
]
_encoder = msgspec.json.Encoder()
_NAMES = {cls: name.encode() for cls, name in EVENT_NAMES.items()}
_END: HTTPResponseBodyEvent = {"type": "http.response.body", "body": b"", "more_body": False}


def event_id(raw: str) -> int:
    """The id of the last event a client saw (the ``Last-Event-ID`` header)."""
    text = raw.strip()
    if not text.isascii() or not text.isdigit() or int(text) > MAX_EVENT_ID:
        raise InvalidInput("Last-Event-ID", "must be the id of an event of the stream (a number)")
    return int(text)


_After = TypeVar("_After", int, int | None)


def resume_from(last_event_id: str, after: _After) -> _After:
    """Where a stream that re-attaches starts: after the ``Last-Event-ID`` a client
    sends back, else after the ``after`` query parameter (a multiplayer thread's
    None: from now)."""
    return event_id(last_event_id) if last_event_id else after


async def sse_frames(
    source: EventSource, keepalive_s: float = KEEPALIVE_S, start: int = 0
) -> AsyncIterator[bytes]:
    """The frames of ``source``'s events from index ``start`` on (ids ``start + 1``
    on: an event's id is its position in the reply)."""
    sent = start
    while True:
        batch = await source.read(sent, keepalive_s)
        if batch is None:
            yield KEEPALIVE
            continue
        if not batch:
            return
        chunk = bytearray()
        for event in batch:
            sent += 1
            chunk += b"id: %d\nevent: %s\ndata: " % (sent, _NAMES[type(event)])
            chunk += _encoder.encode(event)
            chunk += b"\n\n"
        yield bytes(chunk)


class SseResponse(ASGIStreamingResponse):
    """The ASGI response of an ``SseStream``: one write per batch of frames, then
    the end; unlike its base it never reads from the client. ``metrics`` (the
    app's ``HttpMetrics``, if any) counts it among the open streams while it writes."""

    __slots__ = ("metrics",)

    metrics: HttpMetrics | None

    async def send_body(self, send: Send, receive: Receive) -> None:
        metrics = self.metrics
        if metrics is not None:
            metrics.streams_open += 1
        try:
            async for chunk in self.iterator:
                body: HTTPResponseBodyEvent = {
                    "type": "http.response.body",
                    "body": chunk if isinstance(chunk, bytes) else chunk.encode(),
                    "more_body": True,
                }
                await send(body)
            await send(_END)
        except OSError:  # the client left, on a server that says so (ASGI 2.4)
            return
        finally:
            if metrics is not None:
                metrics.streams_open -= 1


class SseStream(Stream):
    """A ``text/event-stream`` response of ``sse_frames``, written batch by batch
    by ``SseResponse``."""

    __slots__ = ()

    def to_asgi_response(
        self,
        app: Litestar | None,
        request: Request[Any, Any, Any],
        *,
        background: BackgroundTask | BackgroundTasks | None = None,
        cookies: Iterable[Cookie] | None = None,
        encoded_headers: Iterable[tuple[bytes, bytes]] | None = None,
        headers: Mapping[str, str] | None = None,
        is_head_response: bool = False,
        media_type: MediaType | str | None = None,
        status_code: int | None = None,
        type_encoders: Any = None,
    ) -> ASGIResponse:
        frames = self.iterator
        if not isinstance(frames, AsyncIterator):
            raise TypeError("an SseStream streams an async iterator of bytes (sse_frames)")
        response = SseResponse(
            iterator=frames,
            background=self.background or background,
            cookies=self.cookies if cookies is None else itertools.chain(self.cookies, cookies),
            encoded_headers=encoded_headers,
            encoding=self.encoding,
            headers={**headers, **self.headers} if headers is not None else self.headers,
            is_head_response=is_head_response,
            content_length=0,
            media_type="text/event-stream",
            status_code=self.status_code or status_code,
        )
        owner = app if app is not None else request.scope.get("litestar_app")
        response.metrics = owner.state.get("http_metrics") if owner else None
        return response
