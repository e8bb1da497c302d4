"""Server-Sent Events framing of a ``Turn`` (spec 6.1, decisions.md).

Every event is ``id: N`` (increasing within the reply), ``event: NAME`` and one
``data:`` line of JSON. Events that arrive together go out in one write. While
the model is silent a comment line keeps proxies from closing the connection.

``SseStream`` is Litestar's ``Stream`` without its watch for the client leaving:
that watch costs every reply a task group, a task and a pending ``receive`` (about
5% of the service's CPU per turn), and it would only stop the writing early, since a
client that disconnects does not cancel the reply (decisions.md). The frames end with
the turn; uvicorn drops writes to a closed connection, and a server that raises on
them ends the response quietly.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
from litestar.response import Stream
from litestar.response.base import ASGIResponse
from litestar.response.streaming import ASGIStreamingResponse
from litestar.types import HTTPResponseBodyEvent, Receive, Send

from agentsvc_core.use_cases import Turn
from agentsvc_core.use_cases.turn import EVENT_NAMES

KEEPALIVE_S = 15.0
KEEPALIVE = b": keep-alive\n\n"
_encoder = msgspec.json.Encoder()
_NAMES = {cls: name.encode() for cls, name in EVENT_NAMES.items()}


async def sse_frames(turn: Turn, keepalive_s: float = KEEPALIVE_S) -> AsyncIterator[bytes]:
    sent = 0
    while True:
        batch = await turn.read(sent, keepalive_s)
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


class _ASGISse(ASGIStreamingResponse):
    __slots__ = ()

    async def send_body(self, send: Send, receive: Receive) -> None:
        try:
            async for chunk in self.iterator:
                body: HTTPResponseBodyEvent = {
                    "type": "http.response.body",
                    "body": chunk if isinstance(chunk, bytes) else chunk.encode(),
                    "more_body": True,
                }
                await send(body)
            end: HTTPResponseBodyEvent = {
                "type": "http.response.body",
                "body": b"",
                "more_body": False,
            }
            await send(end)
        except OSError:  # the client left, on a server that says so (ASGI 2.4)
            return


class SseStream(Stream):
    """A ``text/event-stream`` response of ``sse_frames``, written chunk by chunk."""

    __slots__ = ()

    def to_asgi_response(self, *args: Any, **kwargs: Any) -> ASGIResponse:
        response = super().to_asgi_response(*args, **kwargs)
        response.__class__ = _ASGISse  # the same slots: only send_body differs
        return response
