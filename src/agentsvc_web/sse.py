"""Server-Sent Events framing of a ``Turn`` (spec 6.1, decisions.md).

Every event is ``id: N`` (increasing within the reply), ``event: NAME`` and one
``data:`` line of JSON. Events that arrive together go out in one write. While
the model is silent a comment line keeps proxies from closing the connection.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import msgspec

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
