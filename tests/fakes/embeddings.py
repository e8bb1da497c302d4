"""A loopback fake of an OpenAI-compatible embeddings API (``POST /v1/embeddings``,
OpenAI's wire format), and the same vectors in process (``HashingEmbedder``).
Serve the fake with ``tests.web.live.serve``; its base URL is ``url + "/v1"``.

The vectors mean something, so that search tests can rank: each lower-cased word
is hashed into one of ``dimensions`` buckets with a sign (feature hashing), the
counts are summed and the vector is L2-normalised. Texts that share words are
close (cosine similarity = shared words, weighted), texts that share none are
nearly orthogonal, and the same text always gets the same vector.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import math
import re
import struct
from collections.abc import Sequence
from typing import Any

from agentsvc_core.ports.embeddings import Embedder

__all__ = ["EMBEDDINGS_KEY", "EmbeddingsCall", "FakeEmbeddings", "HashingEmbedder", "hash_vector"]

EMBEDDINGS_KEY = "sk-embeddings-test-key-0123456789abcdef"
_WORD = re.compile(r"\w+")


def hash_vector(text: str, dimensions: int) -> list[float]:
    """The fake's vector of ``text`` (module docstring); all zeros for a text
    without words."""
    vector = [0.0] * dimensions
    for word in _WORD.findall(text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        vector[value % dimensions] += 1.0 if value >> 63 else -1.0
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else vector


class HashingEmbedder(Embedder):
    """The fake's vectors without HTTP, for tests of what uses an ``Embedder``.
    ``calls``: the texts of each ``embed``."""

    def __init__(self, dimensions: int = 64, model: str = "hashing-test") -> None:
        self.model = model
        self.dimensions = dimensions
        self.calls: list[list[str]] = []

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [hash_vector(t, self.dimensions) for t in texts]


class EmbeddingsCall:
    """One request the fake received: its body (parsed) and Authorization header."""

    def __init__(self, path: str, authorization: str | None, body: Any) -> None:
        self.path = path
        self.authorization = authorization
        self.body = body

    @property
    def inputs(self) -> list[str]:
        return list(self.body["input"]) if isinstance(self.body, dict) else []


class FakeEmbeddings:
    """``POST /v1/embeddings`` as OpenAI answers it: ``input`` a string or a list
    of strings (an empty string is refused with 400, as OpenAI does), vectors of the
    request's ``dimensions`` or else ``dimensions`` (the model's own length), in
    ``data`` with their ``index``, ``usage`` counted in words. With ``key`` set,
    another bearer token is 401 with OpenAI's error body.

    Steering (``reset()`` undoes it and sets ``key`` back): ``fail(n, status,
    retry_after=None)`` answers the next ``n`` requests with ``status`` (and a
    ``Retry-After`` header); ``wrong_dimensions = True``
    answers vectors one element short; ``shuffle = True`` lists ``data`` in reverse
    order (the indexes still right); ``base64 = True`` answers each embedding as
    base64 of little-endian float32, as OpenAI does for ``encoding_format: base64``
    (and some servers whatever was asked); ``raw = b"..."`` answers 200 with that
    body; ``stall_s`` waits that long before answering the next request (then
    goes back to 0). ``calls``: every request, in order."""

    def __init__(self, key: str | None = EMBEDDINGS_KEY, dimensions: int = 1536) -> None:
        self.key = self._key = key
        self.dimensions = dimensions
        self.calls: list[EmbeddingsCall] = []
        self.wrong_dimensions = False
        self.shuffle = False
        self.base64 = False
        self.raw: bytes | None = None
        self.stall_s = 0.0
        self._failures: list[tuple[int, str | None]] = []
        self.delay_s = 0.0  # each answer waits this long (an indexing caught mid-way)

    def reset(self) -> None:
        """Back to answering well, with an empty record (a fixture shared by tests)."""
        self.key = self._key
        self.calls.clear()
        self.wrong_dimensions = self.shuffle = self.base64 = False
        self.raw = None
        self.stall_s = 0.0
        self._failures.clear()
        self.delay_s = 0.0

    def fail(self, n: int, status: int, retry_after: str | None = None) -> None:
        self._failures.extend([(status, retry_after)] * n)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        self.calls.append(EmbeddingsCall(scope["path"], headers.get("authorization"), body))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.stall_s:
            stall, self.stall_s = self.stall_s, 0.0
            await asyncio.sleep(stall)
        status, extra, answer = self._answer(scope["method"], scope["path"], headers, body)
        encoded = json.dumps(answer).encode()
        if self.raw is not None and status == 200:
            encoded = self.raw
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), *extra],
            }
        )
        await send({"type": "http.response.body", "body": encoded})

    def _answer(
        self, method: str, path: str, headers: dict[str, str], body: Any
    ) -> tuple[int, list[tuple[bytes, bytes]], dict[str, Any]]:
        if method != "POST" or path != "/v1/embeddings":
            return 404, [], _error("Not found", "invalid_request_error", None)
        if self.key is not None and headers.get("authorization") != f"Bearer {self.key}":
            return 401, [], _error("Incorrect API key provided.", "invalid_request_error", None)
        if self._failures:
            status, retry_after = self._failures.pop(0)
            extra = [] if retry_after is None else [(b"retry-after", retry_after.encode())]
            return status, extra, _error("Try again", "server_error", None)
        inputs = body.get("input") if isinstance(body, dict) else None
        if isinstance(inputs, str):
            inputs = [inputs]
        if (
            not isinstance(inputs, list)
            or not inputs
            or not all(isinstance(t, str) and t for t in inputs)
            or not isinstance(body.get("model"), str)
        ):
            return 400, [], _error("'$.input' is invalid.", "invalid_request_error", "input")
        dimensions = body.get("dimensions", self.dimensions)
        length = dimensions - 1 if self.wrong_dimensions else dimensions
        data = [
            {"object": "embedding", "index": i, "embedding": self._encode(vector[:length])}
            for i, vector in enumerate(hash_vector(text, dimensions) for text in inputs)
        ]
        if self.shuffle:
            data.reverse()
        words = sum(len(_WORD.findall(t)) for t in inputs)
        return (
            200,
            [],
            {
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": words, "total_tokens": words},
            },
        )

    def _encode(self, vector: list[float]) -> list[float] | str:
        if not self.base64:
            return vector
        return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()


def _error(message: str, kind: str, param: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}
