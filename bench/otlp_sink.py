"""A loopback OTLP/HTTP trace receiver for ``python -m bench --otlp``: answers every
``POST /v1/traces`` 200 with an empty ``ExportTraceServiceResponse`` after reading the
body (it does not decode it: its own CPU is not the service's). Prints ``URL ...``
once listening; on SIGTERM/SIGINT prints how many export requests and bytes it got."""

from __future__ import annotations

import socket
from typing import Any

import uvicorn

from bench.bare_app import SERVE


class OtlpSink:
    def __init__(self) -> None:
        self.requests = 0
        self.bytes = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        more = True
        while more:
            message = await receive()
            self.bytes += len(message.get("body", b""))
            more = message.get("more_body", False)
        ok = scope["path"] == "/v1/traces" and scope["method"] == "POST"
        self.requests += ok
        await send(
            {
                "type": "http.response.start",
                "status": 200 if ok else 404,
                "headers": [(b"content-type", b"application/x-protobuf")],
            }
        )
        await send({"type": "http.response.body", "body": b""})


def main() -> None:
    sink = OtlpSink()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    server = uvicorn.Server(uvicorn.Config(sink, **SERVE))
    print(f"URL http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    try:
        server.run(sockets=[sock])
    finally:
        print(f"OTLP export requests {sink.requests}, bytes {sink.bytes}", flush=True)


if __name__ == "__main__":
    main()
