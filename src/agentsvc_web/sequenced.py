"""The web side of sequenced logs (``agentsvc_core.use_cases.sequenced``): a runner
run's events and a code session's timeline are answered the same way, a page as
JSON (``events`` and ``next_after``) or, with ``Accept: text/event-stream``, followed
live as Server-Sent Events whose ``id:`` is the event's ``seq`` (a client
re-attaches with ``Last-Event-ID``) and whose ``event:`` is its ``type``, a comment
line while nothing happens."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated, Any, Self

import msgspec
from litestar import Request
from litestar.params import QueryParameter
from litestar.response import Stream

from agentsvc_core.use_cases.sequenced import Sequenced
from agentsvc_web.schemas import copied
from agentsvc_web.sse import KEEPALIVE, MAX_EVENT_ID, SSE_HEADERS

__all__ = [
    "After",
    "EventLimit",
    "SequencedEventOut",
    "followed",
    "sequenced_frames",
    "wants_live",
]

_enc = msgspec.json.Encoder()

# a page's query: the events after this seq, at most this many
After = Annotated[int, QueryParameter(name="after", ge=0, le=MAX_EVENT_ID)]
EventLimit = Annotated[int, QueryParameter(name="limit", ge=1, le=500)]


class SequencedEventOut(msgspec.Struct):
    """One event of a sequenced log (each log's own answer names its types)."""

    seq: int
    type: str
    data: dict[str, Any]
    created_at: datetime

    @classmethod
    def of(cls, e: Sequenced) -> Self:
        return copied(cls, e)


async def sequenced_frames(
    feed: AsyncIterator[list[Any] | None], out: type[SequencedEventOut]
) -> AsyncIterator[bytes]:
    """A follower's batches as Server-Sent Events (``id:`` the event's ``seq``,
    ``event:`` its type, ``data:`` the event as ``out`` answers it), a comment line
    for a keep-alive (None)."""
    async for batch in feed:
        if batch is None:
            yield KEEPALIVE
            continue
        chunk = bytearray()
        for e in batch:
            chunk += b"id: %d\nevent: %s\ndata: " % (e.seq, e.type.encode())
            chunk += _enc.encode(out.of(e))
            chunk += b"\n\n"
        yield bytes(chunk)


def wants_live(request: Request[Any, Any, Any]) -> bool:
    """Whether the client asks for the live stream (``Accept: text/event-stream``)."""
    return "text/event-stream" in request.headers.get("accept", "")


def followed(feed: AsyncIterator[list[Any] | None], out: type[SequencedEventOut]) -> Any:
    """The ``text/event-stream`` response of a follower (typed ``Any``: a route
    that answers JSON pages declares the page as its answer)."""
    return Stream(sequenced_frames(feed, out), media_type="text/event-stream", headers=SSE_HEADERS)
