"""The benchmark's model provider: the ``beta`` wire format at the cost of the bare app.

``python -m bench.fake_server --tokens 50 [--token-delay S] [--first-token-delay S]``
prints ``URL http://127.0.0.1:PORT`` once listening and serves until SIGTERM. Every
``POST /v1/chat/completions`` gets the same reply: ``--tokens`` text deltas (`` t0``,
`` t1``, ...) as OpenAI Chat Completions ``chat.completion.chunk`` events, byte for byte
what the test fake (``tests.fakes.providers``, kind ``beta``) streams: a role chunk,
one chunk per delta, the ``finish_reason`` chunk, the usage chunk and ``data: [DONE]``,
one write each, paced like the bare app (first token after ``--first-token-delay``,
then one every ``--token-delay`` on a fixed schedule).

Why not the test fake itself: it plans a scripted reply from every request and builds
each chunk as a dict, which cost about 1 ms of CPU per 50-token turn on the benchmark's
machine, twice what the bare app spends on the same 50 events. In a deployment the
provider runs elsewhere; here it shares the service's two cores, so its CPU is taken
from the service's turns per second. This one checks what a real provider would refuse
(the API key; a JSON body with ``model``, ``messages`` and ``stream: true``) and answers
with chunks encoded once at start, so it costs about what the bare app does.

Unlike the test fake it always sends the usage chunk (the service always asks for it
with ``stream_options.include_usage``), sends no ``x-request-id`` header, answers errors
with ``{"error": {"message", "type", "code"}}`` only, and does not stop a stream whose
client left (neither does the bare app).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import socket
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import msgspec
import uvicorn

from bench.bare_app import SERVE

API_KEY = "sk-bench-0123456789abcdef"
PATH = "/v1/chat/completions"
INPUT_TOKENS = 12  # what the test fake reports by default

_Scope = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
_Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
]
_AUTH = b"Bearer " + API_KEY.encode()


class _Request(msgspec.Struct):
    """The fields checked; the rest of the body is skipped, not decoded."""

    model: str
    messages: list[msgspec.Raw]
    stream: bool = False


_decode = msgspec.json.Decoder(_Request).decode
_encode = msgspec.json.encode


def tokens(n: int) -> list[str]:
    return [f" t{i}" for i in range(n)]


def _chunk(delta: object, finish: str | None, usage: object = None, choices: bool = True) -> bytes:
    """The part of a chunk after its ``model`` (id, created and model vary per request)."""
    body = {
        "system_fingerprint": "fp_fake",
        "choices": (
            [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
            if choices
            else []
        ),
        "usage": usage,
    }
    return b"," + _encode(body)[1:] + b"\n\n"


class Reply:
    """The reply's chunks, encoded once: each request only adds its head."""

    def __init__(self, deltas: list[str]) -> None:
        self.role = _chunk({"role": "assistant", "content": "", "refusal": None}, None)
        self.deltas = [_chunk({"content": d}, None) for d in deltas]
        self.finish = _chunk({}, "stop")
        usage = {
            "prompt_tokens": INPUT_TOKENS,
            "completion_tokens": len(deltas),
            "total_tokens": INPUT_TOKENS + len(deltas),
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }
        self.usage = _chunk(None, None, usage, choices=False)


def _error(status: int, kind: str, message: str) -> tuple[int, bytes]:
    return status, _encode({"error": {"message": message, "type": kind, "code": None}})


class FakeProviderApp:
    """A raw ASGI app, served like the bare app (uvicorn, uvloop, httptools)."""

    def __init__(self, deltas: list[str], token_delay: float, first_token_delay: float) -> None:
        self.reply = Reply(deltas)
        self.token_delay = token_delay
        self.first_token_delay = first_token_delay
        self._ids = itertools.count(1)

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if message["type"] == "http.disconnect" or not message.get("more_body"):
                break
        refused = self._check(scope, b"".join(chunks))
        if isinstance(refused, tuple):
            status, body = refused
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await self._stream(send, refused)

    def _check(self, scope: _Scope, body: bytes) -> tuple[int, bytes] | str:
        """The request's model, or the error a provider would answer."""
        if scope["method"] != "POST" or scope["path"] != PATH:
            return _error(404, "invalid_request_error", "Unknown request URL")
        auth = dict(scope["headers"]).get(b"authorization")
        if auth != _AUTH:
            return _error(401, "invalid_request_error", "Incorrect API key provided")
        try:
            request = _decode(body)
        except msgspec.ValidationError as exc:
            return _error(400, "invalid_request_error", str(exc))
        except msgspec.DecodeError:
            return _error(400, "invalid_request_error", "The body is not valid JSON")
        if not request.stream or not request.messages:
            return _error(400, "invalid_request_error", "expected stream: true and messages")
        return request.model

    async def _stream(self, send: _Send, model: str) -> None:
        reply = self.reply
        head = b'data: {"id":"chatcmpl-%024x","object":"chat.completion.chunk","created":%d,' % (
            next(self._ids),
            int(time.time()),
        )
        head += b'"model":' + _encode(model)

        async def emit(rest: bytes) -> None:
            await send({"type": "http.response.body", "body": head + rest, "more_body": True})

        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        await emit(reply.role)
        loop = asyncio.get_running_loop()
        due = loop.time()
        for i, delta in enumerate(reply.deltas):
            delay = self.first_token_delay if i == 0 else self.token_delay
            if delay > 0:
                due += delay
                await asyncio.sleep(max(0.0, due - loop.time()))
            await emit(delta)
        await emit(reply.finish)
        await emit(reply.usage)
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=50)
    parser.add_argument("--token-delay", type=float, default=0.0)
    parser.add_argument("--first-token-delay", type=float, default=0.0)
    args = parser.parse_args()
    app = FakeProviderApp(tokens(args.tokens), args.token_delay, args.first_token_delay)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(4096)  # connections made before uvicorn is up wait in the backlog
    server = uvicorn.Server(uvicorn.Config(app, **SERVE))
    print(f"URL http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
