"""An OpenAI-compatible embeddings API (``AGENTSVC_EMBEDDINGS_URL``), for the
vector half of knowledge search (the core's ``Embedder``).

The wire format is OpenAI's ``POST {base}/embeddings`` (``base`` as the OpenAI
client's ``base_url``: ``https://api.openai.com/v1``, or a local server's
``http://127.0.0.1:11434/v1``): a body ``{"model", "input": [texts],
"encoding_format": "float"}`` plus ``"dimensions"`` only when the operator set
them (models before ``text-embedding-3`` and many local servers refuse the
field), ``Authorization: Bearer <key>`` when a key is set; the answer's
``data`` are ``{"index", "embedding"}``, sorted here by ``index``. A base64
``embedding`` (little-endian float32, what some servers send whatever was asked)
is read too.

What is sent: each text cut to its first ``max_chars`` characters (8000 by
default, about 2000 tokens, well inside the 8191-token input limit of OpenAI's
models; the rest of a longer text does not count in its vector, so the caller
should embed chunks of about that size or less), an empty text as one space
(OpenAI refuses empty strings). ``batch`` texts per request (OpenAI takes up
to 2048), one request at a time, so a call's cost grows with its texts and
never bursts past the provider's rate limit.

Failures: 429, 5xx, no answer within ``timeout_s`` and connections that fail are
tried again, at most ``max_attempts`` times in all, after an exponential backoff
with jitter, or after the answer's ``Retry-After`` (seconds, or OpenAI's
``retry-after-ms``) up to 30 s. Anything else (401/403: the key; other 4xx;
a redirect, which is never followed; an answer over 64 MiB or of the wrong shape
or vector length; a refusal of the outbound guard) fails at once. Every failure
is an ``Upstream`` whose detail names the status or cause, never the key nor a
text; each failed attempt is one WARNING line.

Through the outbound guard's client, like the other third-party APIs: the URL is
checked before each call (``https://`` only, no private host) and every
connection's resolved address when it is made, so a local embeddings server needs
``AGENTSVC_ALLOW_PRIVATE_NETWORK=true``. One connection pool for the adapter's
life: ``aclose()`` at shutdown.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import random
import struct
from collections.abc import Awaitable, Callable, Sequence

import httpx
import msgspec

from agentsvc_adapters.outbound import OutboundGuard, failure, note_refusal, refusal_of
from agentsvc_core.errors import Upstream
from agentsvc_core.ports.embeddings import Embedder

__all__ = ["OpenAIEmbedder"]

log = logging.getLogger("agentsvc.embeddings")

MAX_BYTES = 64 * 1024 * 1024  # one answer: 2048 vectors of 3072 floats fit
MAX_RETRY_AFTER_S = 30.0  # a longer Retry-After is cut to this
_BACKOFF_CAP_S = 20.0
_WHO = "the embeddings API"


class _Item(msgspec.Struct):
    index: int
    embedding: list[float] | str  # floats, or base64 of little-endian float32


class _Answer(msgspec.Struct):
    data: list[_Item]


_decoder = msgspec.json.Decoder(_Answer)


class _Again(Exception):
    """An attempt failed in a way that another attempt may not."""

    def __init__(self, detail: str, retry_after: float | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.retry_after = retry_after


def _retry_after(headers: httpx.Headers) -> float | None:
    """The wait the server asks for, in seconds (``retry-after-ms`` first, then
    ``Retry-After`` as seconds; an HTTP date is ignored), at most 30 s."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            seconds = float(raw) * scale
        except ValueError:
            continue
        if seconds >= 0:  # NaN and negatives are not waits
            return min(seconds, MAX_RETRY_AFTER_S)
    return None


def _size(n: int) -> str:
    return f"{n / 1048576:g} MiB" if n >= 1048576 else f"{n} bytes"


def _vector(embedding: list[float] | str) -> list[float]:
    if isinstance(embedding, list):
        return embedding
    try:
        raw = base64.b64decode(embedding, validate=True)
    except ValueError:
        raise Upstream(f"{_WHO} answered an embedding that is not base64") from None
    if len(raw) % 4:
        raise Upstream(f"{_WHO} answered a base64 embedding that is not float32")
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


class OpenAIEmbedder(Embedder):
    """``Embedder`` over an OpenAI-compatible ``/embeddings`` endpoint (module
    docstring). ``sleep`` waits between attempts (a test seam)."""

    def __init__(
        self,
        url: str,
        api_key: str | None,
        model: str,
        dimensions: int,
        guard: OutboundGuard,
        *,
        batch: int = 64,
        timeout_s: float = 30.0,
        max_attempts: int = 3,
        max_chars: int = 8000,
        send_dimensions: bool = False,
        backoff_s: float = 0.5,
        max_answer_bytes: int = MAX_BYTES,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if dimensions < 1 or batch < 1 or max_attempts < 1 or max_chars < 1:
            raise ValueError("dimensions, batch, max_attempts and max_chars must be positive")
        self.model = model
        self.dimensions = dimensions
        self._url = url.rstrip("/") + "/embeddings"
        self._key = api_key
        self._guard = guard
        self._batch = batch
        self._timeout_s = timeout_s
        self._max_attempts = max_attempts
        self._max_chars = max_chars
        self._send_dimensions = send_dimensions
        self._backoff_s = backoff_s
        self._max_bytes = max_answer_bytes
        self._sleep = sleep
        self._http = guard.http_client(timeout=timeout_s)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        if (refused := self._guard.refusal(self._url)) is not None:
            note_refusal(refused)
            raise Upstream(f"{_WHO}: refused by the outbound guard: {refused}")
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch):
            chunk = [t[: self._max_chars] or " " for t in texts[start : start + self._batch]]
            vectors.extend(await self._call(chunk))
        return vectors

    async def _call(self, inputs: list[str]) -> list[list[float]]:
        payload: dict[str, object] = {
            "model": self.model,
            "input": inputs,
            "encoding_format": "float",
        }
        if self._send_dimensions:
            payload["dimensions"] = self.dimensions
        body = msgspec.json.encode(payload)
        for attempt in range(1, self._max_attempts + 1):
            try:
                raw = await self._attempt(body)
            except _Again as again:
                if attempt == self._max_attempts:
                    log.warning("%s: %s; gave up after %d attempts", _WHO, again.detail, attempt)
                    raise Upstream(f"{_WHO}: {again.detail} (after {attempt} attempts)") from None
                delay = self._delay(attempt, again.retry_after)
                log.warning(
                    "%s: %s; attempt %d of %d, the next in %.2f s",
                    _WHO,
                    again.detail,
                    attempt,
                    self._max_attempts,
                    delay,
                )
                await self._sleep(delay)
            else:
                return self._vectors(raw, len(inputs))
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """The server's wait if it named one, else exponential backoff with jitter
        (between half and all of ``backoff_s * 2**(attempt-1)``, at most 20 s)."""
        if retry_after is not None:
            return retry_after
        ceiling = min(self._backoff_s * 2 ** (attempt - 1), _BACKOFF_CAP_S)
        return random.uniform(ceiling / 2, ceiling)  # noqa: S311 - jitter, not a secret

    async def _attempt(self, body: bytes) -> bytes:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        try:
            async with (
                asyncio.timeout(self._timeout_s),
                self._http.stream("POST", self._url, content=body, headers=headers) as resp,
            ):
                if resp.status_code != 200:
                    raise self._status(resp.status_code, resp.headers)
                raw = bytearray()
                async for chunk in resp.aiter_bytes():
                    raw += chunk
                    if len(raw) > self._max_bytes:
                        raise Upstream(f"{_WHO} answered more than {_size(self._max_bytes)}")
                return bytes(raw)
        except (TimeoutError, httpx.TimeoutException):
            raise _Again(f"no answer within {self._timeout_s:g} s") from None
        except httpx.InvalidURL:
            raise Upstream(f"{_WHO}: AGENTSVC_EMBEDDINGS_URL is not a valid URL") from None
        except httpx.HTTPError as exc:
            if refusal_of(exc) is not None:  # policy: another attempt is refused too
                raise Upstream(f"{_WHO}: {failure(exc, self._url)}") from None
            raise _Again(failure(exc, self._url)) from None

    @staticmethod
    def _status(status: int, headers: httpx.Headers) -> Exception:
        """The error of a non-200 answer (its body is not read: it may echo the input)."""
        if status == 429 or status >= 500:
            return _Again(f"HTTP {status}", _retry_after(headers))
        log.warning("%s answered HTTP %s", _WHO, status)
        if status in (401, 403):
            return Upstream(
                f"{_WHO} refused the key (HTTP {status}): check AGENTSVC_EMBEDDINGS_API_KEY"
            )
        if 300 <= status < 400:
            return Upstream(f"{_WHO} answered a redirect (HTTP {status}), which is not followed")
        return Upstream(
            f"{_WHO} answered HTTP {status}: check AGENTSVC_EMBEDDINGS_URL, "
            "AGENTSVC_EMBEDDINGS_MODEL and AGENTSVC_EMBEDDINGS_DIMENSIONS"
        )

    def _vectors(self, raw: bytes, expected: int) -> list[list[float]]:
        try:
            answer = _decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise Upstream(f"{_WHO} answered something that is not embeddings") from None
        items = sorted(answer.data, key=lambda item: item.index)
        if [item.index for item in items] != list(range(expected)):
            raise Upstream(
                f"{_WHO} answered {len(items)} embeddings for {expected} texts "
                "(or their indexes are not 0 to n-1)"
            )
        vectors = [_vector(item.embedding) for item in items]
        for vector in vectors:
            if len(vector) != self.dimensions:
                raise Upstream(
                    f"{_WHO} answered vectors of {len(vector)} dimensions where "
                    f"{self.dimensions} were expected: check AGENTSVC_EMBEDDINGS_DIMENSIONS "
                    "and AGENTSVC_EMBEDDINGS_MODEL"
                )
        return vectors
