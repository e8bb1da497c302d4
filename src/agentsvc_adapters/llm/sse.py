"""Server-sent events over httpx for the provider adapters: a lean parser, plus the
HTTP plumbing both adapters share (one pooled client, retries, error mapping).

The parser follows the WHATWG "event stream interpretation" rules
(https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):
lines end with LF, CRLF or a lone CR; a blank line dispatches the event; ``:`` starts a
comment; ``data`` lines join with LF; one space after the colon is dropped; an event
with no ``data`` line is not dispatched; ``event`` resets to ``message`` after each
dispatch; ``id`` and ``retry`` are ignored (nothing here reconnects). It works on bytes
and splits only on CR/LF, which never occur inside a multi-byte UTF-8 sequence, so a
chunk boundary anywhere (even mid-character) is harmless and ``data`` is handed over
as bytes, straight to ``msgspec``'s decoder, without a UTF-8 decode of its own.

Retries happen only in :meth:`ProviderHttp.open`, i.e. before a response body is read
and so before the adapter has yielded anything; a failure once streaming started is
raised, never retried (the caller may already have shown tokens).
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Mapping
from typing import TypedDict

import anyio
import httpx
import msgspec

from agentsvc_core.errors import Upstream

__all__ = ["ProviderHttp", "SSEParser", "scrub", "short"]

log = logging.getLogger("agentsvc.llm")

MAX_PENDING_BYTES = 16 * 1024 * 1024  # a line this long is not an SSE stream we can use
_NAMES: dict[bytes, str] = {}  # event names seen, decoded once


class SSEParser:
    """Incremental SSE parser: ``feed(chunk)`` returns the ``(event, data)`` pairs the
    chunk completed (``data`` as bytes). An unterminated event at the end is dropped."""

    __slots__ = ("_buf", "_cr", "_data", "_event")

    def __init__(self) -> None:
        self._buf = b""
        self._cr = False  # the previous chunk ended with CR: maybe the half of a CRLF
        self._event = "message"
        self._data: bytes | None = None

    def feed(self, chunk: bytes) -> list[tuple[str, bytes]]:  # noqa: PLR0912 - one inlined hot loop
        if not chunk:
            return []
        if self._cr:  # the last chunk ended with CR, taken as a line end: skip its LF
            self._cr = False
            if chunk[0] == 0x0A:
                chunk = chunk[1:]
                if not chunk:
                    return []
        if b"\r" in chunk:  # CRLF and lone CR -> LF
            if chunk[-1] == 0x0D:
                self._cr = True
                chunk = chunk[:-1].replace(b"\r\n", b"\n").replace(b"\r", b"\n") + b"\n"
            else:
                chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = (self._buf + chunk if self._buf else chunk).split(b"\n")
        self._buf = lines.pop()
        if len(self._buf) > MAX_PENDING_BYTES:
            raise ValueError("an SSE line exceeds the size limit")
        out: list[tuple[str, bytes]] = []
        event, data = self._event, self._data
        for line in lines:
            if not line:
                if data is not None:
                    out.append((event, data))
                event, data = "message", None
            elif line.startswith(b"data:"):
                value = line[6:] if line[5:6] == b" " else line[5:]
                data = value if data is None else data + b"\n" + value
            elif line.startswith(b"event:"):
                value = line[7:] if line[6:7] == b" " else line[6:]
                name = _NAMES.get(value)
                if name is None:
                    name = value.decode("utf-8", "replace")
                    if len(_NAMES) < 256:
                        _NAMES[value] = name
                event = name or "message"
            elif line[0] != 0x3A:  # not a comment: a field without a colon, or another field
                field, _, value = line.partition(b":")
                value = value.removeprefix(b" ")
                if field == b"data":
                    data = value if data is None else data + b"\n" + value
                elif field == b"event":
                    event = value.decode("utf-8", "replace") or "message"
        self._event, self._data = event, data
        return out


# OpenAI-style keys (also echoed masked: "sk-proj-****abcd") and bearer tokens.
_KEYLIKE = re.compile(r"\bsk-[A-Za-z0-9._*\-]{8,}|(?i:\bbearer\s+)[A-Za-z0-9._~+/\-]{8,}=*")


def scrub(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` without the given secrets nor anything shaped like an API key."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    return _KEYLIKE.sub("[redacted]", text)


def short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _error_message(raw: bytes) -> str:
    """The message of an error body: ``{"error": {"message"}}`` (both APIs),
    ``{"error": "..."}``, ``{"message"}`` / ``{"detail"}`` (compatible servers), or text."""
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return raw.decode("utf-8", "replace")
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, str):
            return error
        if isinstance(error, dict):
            for key in ("message", "detail"):
                message = error.get(key)
                if isinstance(message, str):
                    kind = error.get("type")
                    prefix = f"{kind}: " if isinstance(kind, str) and kind != "error" else ""
                    return prefix + message
    return raw.decode("utf-8", "replace")


def _status_code(status: int) -> tuple[str, bool]:
    """(error code, retryable) for an HTTP error status."""
    if status in (401, 403):
        return "PROVIDER_AUTH", False
    if status == 429:
        return "PROVIDER_RATE_LIMITED", True
    if status == 408:
        return "PROVIDER_TIMEOUT", True
    if status >= 500:  # 529 is Anthropic's "overloaded"
        return "PROVIDER_UNAVAILABLE", True
    return "PROVIDER_BAD_REQUEST", False


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (delta-seconds form only)."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                continue
    return None


class TransportOptions(TypedDict, total=False):
    """Timeouts, pool size and retry policy of a provider's HTTP client."""

    connect_timeout_s: float
    read_timeout_s: float
    max_connections: int
    max_attempts: int
    backoff_s: float
    max_retry_after_s: float


class ProviderHttp:
    """One provider's pooled HTTP client, retry policy and error mapping."""

    def __init__(
        self,
        provider: str,
        *,
        http: httpx.AsyncClient | None = None,
        connect_timeout_s: float = 10.0,
        read_timeout_s: float = 120.0,
        max_connections: int = 1000,
        max_attempts: int = 3,
        backoff_s: float = 0.5,
        max_retry_after_s: float = 4.0,
    ) -> None:
        self.provider = provider
        # Applied per request, so an injected client gets the same timeouts.
        self.timeout = httpx.Timeout(
            connect=connect_timeout_s, read=read_timeout_s, write=30.0, pool=10.0
        )
        self._owns_http = http is None
        self.http = http or httpx.AsyncClient(
            timeout=self.timeout,
            limits=httpx.Limits(
                max_connections=max_connections,
                max_keepalive_connections=min(max_connections, 256),
                keepalive_expiry=30.0,
            ),
        )
        self.max_attempts = max(1, max_attempts)
        self.backoff_s = backoff_s
        self.max_retry_after_s = max_retry_after_s

    async def aclose(self) -> None:
        if self._owns_http:
            await self.http.aclose()

    def error(self, what: str, secrets: tuple[str, ...], code: str = "PROVIDER_ERROR") -> Upstream:
        """``Upstream("the <provider> provider <what>")``; ``what`` is scrubbed of secrets."""
        return Upstream(f"the {self.provider} provider {scrub(what, secrets)}", code)

    def broken(self, exc: Exception, secrets: tuple[str, ...]) -> Upstream:
        """The Upstream for an exception raised while reading a streamed body."""
        if isinstance(exc, httpx.TimeoutException):
            return self.error(
                "stopped sending mid-stream (read timeout)", secrets, "PROVIDER_TIMEOUT"
            )
        if isinstance(exc, httpx.TransportError):
            what = f"dropped the stream: {type(exc).__name__}: {short(scrub(str(exc), secrets))}"
            return self.error(what, secrets)
        return self.error(f"sent a malformed stream: {short(scrub(str(exc), secrets))}", secrets)

    async def open(
        self, url: str, headers: dict[str, str], body: bytes, secrets: tuple[str, ...]
    ) -> httpx.Response:
        """POST and return the open 2xx streaming response (the caller closes it).

        Connection errors, 408, 429 and 5xx are retried with exponential backoff and
        jitter, honouring a ``Retry-After`` up to ``max_retry_after_s`` (a longer one
        fails at once: the user would rather see the error than wait)."""
        attempt = 0
        while True:
            attempt += 1
            retry_after: float | None = None
            request = self.http.build_request(
                "POST", url, content=body, headers=headers, timeout=self.timeout
            )
            try:
                response = await self.http.send(request, stream=True)
            except httpx.ConnectTimeout:
                err = self.error("timed out connecting", secrets, "PROVIDER_TIMEOUT")
                retryable = True
            except httpx.PoolTimeout:
                what = "was not called: no free connection in the pool"
                raise self.error(what, secrets, "PROVIDER_TIMEOUT") from None
            except httpx.TimeoutException:
                raise self.error("did not answer in time", secrets, "PROVIDER_TIMEOUT") from None
            except httpx.TransportError as exc:
                what = f"could not be reached: {type(exc).__name__}: {short(str(exc))}"
                err, retryable = self.error(what, secrets, "PROVIDER_UNAVAILABLE"), True
            else:
                if response.is_success:
                    return response
                try:
                    err, retryable, retry_after = await self._status_error(response, secrets)
                finally:
                    await response.aclose()
            if not retryable or attempt >= self.max_attempts:
                raise err
            if retry_after is not None and retry_after > self.max_retry_after_s:
                raise err
            delay = retry_after
            if delay is None:  # "equal jitter": half fixed, half random
                backoff = self.backoff_s * 2 ** (attempt - 1)
                delay = backoff * (0.5 + 0.5 * random.random())  # noqa: S311 - jitter, not crypto
            log.warning(
                "%s provider: %s; retry %d/%d in %.2fs",
                self.provider,
                err.code,
                attempt,
                self.max_attempts - 1,
                delay,
            )
            await anyio.sleep(delay)

    async def _status_error(
        self, response: httpx.Response, secrets: tuple[str, ...]
    ) -> tuple[Upstream, bool, float | None]:
        raw = b""
        try:
            async for chunk in response.aiter_bytes():
                raw += chunk
                if len(raw) > 16384:
                    break
        except httpx.HTTPError:
            pass
        status = response.status_code
        code, retryable = _status_code(status)
        message = _error_message(raw) if raw else response.reason_phrase
        err = self.error(f"answered {status}: {short(scrub(message, secrets))}", secrets, code)
        return err, retryable, _retry_after(response.headers)
