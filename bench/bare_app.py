"""The floor: a bare ASGI app that answers a turn with the same SSE events, and nothing else.

``python -m bench.bare_app --port P --tokens 50 [--token-delay S] [--first-token-delay S]``

Served like the service (uvicorn, uvloop, httptools, no access log). ``POST`` to any
path reads the body and streams ``meta``, ``--tokens`` ``token`` events and ``done``
with the service's framing (``id: N`` / ``event: NAME`` / ``data: JSON``), one write per
event, paced like the fake provider (first token after ``--first-token-delay``, then one
every ``--token-delay`` on a fixed schedule). ``GET /healthz`` answers ``{"ok":true}``.
No authentication, storage, validation or provider call: what is left is the ASGI
server, the HTTP framing and the JSON of the events.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import UTC, datetime
from typing import Any

import msgspec
import uvicorn

_Scope = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
_Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

_encode = msgspec.json.Encoder().encode
SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
JSON_HEADERS = [(b"content-type", b"application/json"), (b"content-length", b"11")]


# how the bare app (and the benchmark's fake provider) are served: like the service
SERVE: dict[str, Any] = {
    "loop": "uvloop",
    "http": "httptools",
    "lifespan": "off",
    "ws": "none",
    "access_log": False,
    "log_level": "warning",
    "timeout_graceful_shutdown": 2,
    "backlog": 4096,
}


def frame(n: int, name: bytes, data: object) -> bytes:
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (n, name, _encode(data))


class BareApp:
    def __init__(self, tokens: list[str], token_delay: float, first_token_delay: float) -> None:
        self.tokens = tokens
        self.token_delay = token_delay
        self.first_token_delay = first_token_delay

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        if scope["type"] != "http":
            return
        if scope["method"] != "POST":
            await send({"type": "http.response.start", "status": 200, "headers": JSON_HEADERS})
            await send({"type": "http.response.body", "body": b'{"ok":true}'})
            return
        while True:  # read the request body
            message = await receive()
            if message["type"] == "http.disconnect" or not message.get("more_body"):
                break
        await self.stream(send)

    async def stream(self, send: _Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})

        async def emit(data: bytes) -> None:
            await send({"type": "http.response.body", "body": data, "more_body": True})

        started = datetime.now(UTC)
        run_id = uuid.uuid4()
        meta = {
            "startedAt": started,
            "runId": run_id,
            "threadId": uuid.uuid4(),
            "model": "gpt-bench",
        }
        await emit(frame(1, b"meta", meta))
        loop = asyncio.get_running_loop()
        due = loop.time()
        n = 1
        for i, token in enumerate(self.tokens):
            delay = self.first_token_delay if i == 0 else self.token_delay
            if delay > 0:
                due += delay
                await asyncio.sleep(max(0.0, due - loop.time()))
            n += 1
            await emit(frame(n, b"token", {"delta": token}))
        done = {
            "ok": True,
            "content": "".join(self.tokens),
            "messageId": uuid.uuid4(),
            "usage": {"inputTokens": 12, "outputTokens": len(self.tokens), "totalTokens": 62},
        }
        await emit(frame(n + 1, b"done", done))
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tokens", type=int, default=50)
    parser.add_argument("--token-delay", type=float, default=0.0)
    parser.add_argument("--first-token-delay", type=float, default=0.0)
    args = parser.parse_args()
    app = BareApp([f" t{i}" for i in range(args.tokens)], args.token_delay, args.first_token_delay)
    print(f"bare app on 127.0.0.1:{args.port} at {time.strftime('%H:%M:%S')}", flush=True)
    uvicorn.run(app, host="127.0.0.1", port=args.port, **SERVE)


if __name__ == "__main__":
    main()
