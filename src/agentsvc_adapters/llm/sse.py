"""Server-sent events over HTTP for the provider adapters: a lean parser, plus the
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

import base64
import contextlib
import logging
import random
import re
import ssl
import urllib.request
from collections.abc import AsyncIterator, Mapping
from typing import Protocol, TypedDict

import aiohttp
import anyio
import certifi
import httpx
import msgspec
import yarl

from agentsvc_core.errors import Upstream
from agentsvc_core.ports.telemetry import ACTIVE

__all__ = [
    "TRANSPORT_ERRORS",
    "ProviderHttp",
    "ProviderResponse",
    "ProviderStatusError",
    "SSEParser",
    "scrub",
    "short",
]

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

    def feed(self, chunk: bytes) -> list[tuple[str, bytes]]:  # noqa: C901, PLR0912 - one inlined hot loop
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


def _json_error_message(raw: bytes) -> str | None:
    """The message of a JSON body that is an error (``{"error": ...}``), else None."""
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    if isinstance(body, dict) and ("error" in body or body.get("type") == "error"):
        return _error_message(raw)
    return None


def _is_json(headers: Mapping[str, str]) -> bool:
    """The answer is declared JSON (``application/json``, ``application/*+json``)."""
    media = headers.get("content-type", "").partition(";")[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


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


class ProviderResponse(Protocol):
    """An open 2xx streaming response: its headers, its body in chunks as they
    arrive (decoded if a proxy compressed it), and ``aclose``, which closes the
    connection unless the body was read to the end (then it goes back to the pool)."""

    headers: Mapping[str, str]

    def chunks(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


class _AiohttpResponse:
    __slots__ = ("_response", "headers")

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.headers: Mapping[str, str] = response.headers

    def chunks(self) -> AsyncIterator[bytes]:
        return self._response.content.iter_any()

    async def aclose(self) -> None:
        if self._response.content.at_eof():
            self._response.release()  # read to the end: the connection is reusable
        else:
            self._response.close()  # mid-body (stop, error): drop the connection


class _HttpxResponse:
    __slots__ = ("_response", "headers")

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self.headers: Mapping[str, str] = response.headers

    def chunks(self) -> AsyncIterator[bytes]:
        plain = "content-encoding" not in self._response.headers
        return self._response.aiter_raw() if plain else self._response.aiter_bytes()

    async def aclose(self) -> None:
        await self._response.aclose()


# What reading a streamed body can raise, from either client.
TRANSPORT_ERRORS = (httpx.HTTPError, aiohttp.ClientError, TimeoutError)


class NotAStream(Upstream):
    """A provider answered 2xx in JSON where an event stream was asked for."""


class ProviderStatusError(Upstream):
    """A provider answered an HTTP error status (``status``) instead of a stream."""

    def __init__(self, detail: str, code: str, status: int) -> None:
        super().__init__(detail, code)
        self.status = status


class ProviderHttp:
    """One provider's pooled HTTP client, retry policy and error mapping.

    The client is aiohttp (its HTTP parser is C: reading a 50-token stream costs
    about a third of the CPU of httpx + httpcore + h11, measured with
    ``bench/provider_parse.py``), one ``ClientSession`` per provider and process,
    created on first use (it belongs to the running event loop). An injected
    ``httpx.AsyncClient`` is used instead when given (tests drive wire corner cases
    through ``httpx.MockTransport``); an injected ``aiohttp.ClientSession`` is used
    as it is (its own timeouts and pool, which the caller closes)."""

    def __init__(
        self,
        provider: str,
        *,
        http: httpx.AsyncClient | aiohttp.ClientSession | None = None,
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
        # total=None: a reply may stream for as long as the model writes; connect
        # covers waiting for a pooled connection plus connecting.
        self._aio_timeout = aiohttp.ClientTimeout(
            total=None,
            connect=connect_timeout_s + 10.0,
            sock_connect=connect_timeout_s,
            sock_read=read_timeout_s,
        )
        self._max_connections = max_connections
        self._proxies: dict[str, tuple[str | None, dict[str, str] | None]] = {}
        self._owns_http = http is None
        self._httpx = http if isinstance(http, httpx.AsyncClient) else None
        self._session = http if isinstance(http, aiohttp.ClientSession) else None
        self.max_attempts = max(1, max_attempts)
        self.backoff_s = backoff_s
        self.max_retry_after_s = max_retry_after_s

    def _aiohttp(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=self._max_connections,
                    limit_per_host=0,
                    keepalive_timeout=30.0,
                    ssl=ssl.create_default_context(cafile=certifi.where()),
                ),
                timeout=self._aio_timeout,
                # proxies from the environment are resolved once per URL (_proxy):
                # trust_env would re-read them in a worker thread on every request
                trust_env=False,
                auto_decompress=True,  # identity is asked for; decode if a proxy compressed
                skip_auto_headers=("User-Agent",),
                # No cookies: a provider's (a load balancer's) would otherwise be kept
                # and sent back on every tenant's requests; and the jar costs CPU on
                # every request and response.
                cookie_jar=aiohttp.DummyCookieJar(),
            )
        return self._session

    def _proxy(self, url: str) -> tuple[str | None, dict[str, str] | None]:
        """The proxy for ``url`` from HTTP(S)_PROXY / NO_PROXY (as httpx honours them),
        looked up once per URL: a provider has one or two."""
        found = self._proxies.get(url)
        if found is None:
            target = yarl.URL(url)
            proxy = urllib.request.getproxies_environment().get(target.scheme)
            if proxy and urllib.request.proxy_bypass(target.host or ""):
                proxy = None
            auth = None
            if proxy:
                parsed = yarl.URL(proxy)
                if parsed.user:  # credentials go in a header, not in the proxy URL
                    pair = f"{parsed.user}:{parsed.password or ''}".encode()
                    auth = {"Proxy-Authorization": "Basic " + base64.b64encode(pair).decode()}
                    proxy = str(parsed.with_user(None))
            found = self._proxies[url] = (proxy or None, auth)
        return found

    async def aclose(self) -> None:
        if self._owns_http and self._session is not None:
            await self._session.close()

    def error(self, what: str, secrets: tuple[str, ...], code: str = "PROVIDER_ERROR") -> Upstream:
        """``Upstream("the <provider> provider <what>")``; ``what`` is scrubbed of secrets."""
        return Upstream(f"the {self.provider} provider {scrub(what, secrets)}", code)

    def failed(self, err: Upstream, how: str | None = None) -> Upstream:
        """Log the failure that ends a provider call, once, at WARNING, and return
        it (to raise): the provider, the error code, the HTTP status or ``how`` it
        broke. Never the provider's message or body, which may quote a key."""
        status = err.status if isinstance(err, ProviderStatusError) else None
        where = f"HTTP {status}" if status is not None else how
        log.warning(
            "%s provider call failed: %s%s", self.provider, err.code, f" ({where})" if where else ""
        )
        return err

    def broken(self, exc: Exception, secrets: tuple[str, ...]) -> Upstream:
        """The Upstream for an exception raised while reading a streamed body."""
        if isinstance(exc, httpx.TimeoutException | TimeoutError):
            # aiohttp's read timeout (SocketTimeoutError) is a TimeoutError too
            return self.error(
                "stopped sending mid-stream (read timeout)", secrets, "PROVIDER_TIMEOUT"
            )
        if isinstance(exc, httpx.TransportError | aiohttp.ClientError):
            what = f"dropped the stream: {type(exc).__name__}: {short(scrub(str(exc), secrets))}"
            return self.error(what, secrets)
        return self.error(f"sent a malformed stream: {short(scrub(str(exc), secrets))}", secrets)

    async def open(
        self, url: str, headers: dict[str, str], body: bytes, secrets: tuple[str, ...]
    ) -> ProviderResponse:
        """POST and return the open 2xx streaming response (the caller closes it).

        Connection errors, 408, 429 and 5xx are retried with exponential backoff and
        jitter, honouring a ``Retry-After`` up to ``max_retry_after_s`` (a longer one
        fails at once: the user would rather see the error than wait). The failure
        that ends the call is logged once (``failed``); a retry logs its own line."""
        try:
            return await self._open(url, headers, body, secrets)
        except NotAStream as err:
            raise self.failed(err, "200 with JSON instead of an event stream") from None
        except Upstream as err:
            raise self.failed(err) from None

    async def _open(
        self, url: str, headers: dict[str, str], body: bytes, secrets: tuple[str, ...]
    ) -> ProviderResponse:
        attempt = 0
        while True:
            attempt += 1
            if self._httpx is not None:
                opened = await self._open_httpx(self._httpx, url, headers, body, secrets)
            else:
                opened = await self._open_aiohttp(url, headers, body, secrets)
            if not isinstance(opened, tuple):
                if _is_json(opened.headers):
                    raise await self._not_a_stream(opened, secrets)
                return opened
            err, retryable, retry_after = opened
            if not retryable or attempt >= self.max_attempts:
                raise err
            if retry_after is not None and retry_after > self.max_retry_after_s:
                raise err
            delay = retry_after
            if delay is None:  # "equal jitter": half fixed, half random
                backoff = self.backoff_s * 2 ** (attempt - 1)
                delay = backoff * (0.5 + 0.5 * random.random())  # noqa: S311 - jitter, not crypto
            span = ACTIVE.get()  # the model call's span: its evaluation names the retries
            if span is not None:
                span.set("agentsvc.provider.retries", attempt)
            log.warning(
                "%s provider: %s; retry %d/%d in %.2fs",
                self.provider,
                err.code,
                attempt,
                self.max_attempts - 1,
                delay,
            )
            await anyio.sleep(delay)

    async def _not_a_stream(
        self, response: ProviderResponse, secrets: tuple[str, ...]
    ) -> NotAStream:
        """The error for a 2xx answer in JSON where an event stream was asked for:
        a provider (or a proxy before it) that ignores ``stream: true`` (``open``
        logs it once, saying so: a configuration problem an operator has to see).
        The body's own error message is quoted; a whole reply is not (it is a
        user's conversation)."""
        raw = b""
        try:
            with contextlib.suppress(*TRANSPORT_ERRORS):
                async for chunk in response.chunks():
                    raw += chunk
                    if len(raw) > 16384:
                        break
        finally:
            await response.aclose()
        what = (
            "answered 200 with JSON instead of an event stream (text/event-stream): it, "
            "or a proxy before it, does not stream; check the base URL"
        )
        message = _json_error_message(raw)
        if message:
            what += f"; it said: {short(scrub(message, secrets))}"
        return NotAStream(self.error(what, secrets).detail, "PROVIDER_ERROR")

    async def _open_aiohttp(
        self, url: str, headers: dict[str, str], body: bytes, secrets: tuple[str, ...]
    ) -> ProviderResponse | tuple[Upstream, bool, float | None]:
        """The open response, or (error, retryable, retry-after) to retry or raise."""
        proxy, proxy_headers = self._proxy(url)
        try:
            response = await self._aiohttp().post(
                url,
                data=body,
                headers=headers,
                allow_redirects=False,
                proxy=proxy,
                proxy_headers=proxy_headers,
            )
        except aiohttp.ConnectionTimeoutError:  # connecting, or waiting for a pooled connection
            return self.error("timed out connecting", secrets, "PROVIDER_TIMEOUT"), True, None
        except TimeoutError:  # connected, but no response head within the read timeout
            raise self.error("did not answer in time", secrets, "PROVIDER_TIMEOUT") from None
        except aiohttp.ClientError as exc:
            what = f"could not be reached: {type(exc).__name__}: {short(scrub(str(exc), secrets))}"
            return self.error(what, secrets, "PROVIDER_UNAVAILABLE"), True, None
        if 200 <= response.status < 300:
            return _AiohttpResponse(response)
        try:
            raw = b""
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                raw = await response.content.read(16385)
            return self._status_error(
                response.status, response.reason or "", raw, response.headers, secrets
            )
        finally:
            response.close()

    async def _open_httpx(
        self,
        http: httpx.AsyncClient,
        url: str,
        headers: dict[str, str],
        body: bytes,
        secrets: tuple[str, ...],
    ) -> ProviderResponse | tuple[Upstream, bool, float | None]:
        request = http.build_request(
            "POST", url, content=body, headers=headers, timeout=self.timeout
        )
        try:
            response = await http.send(request, stream=True)
        except httpx.ConnectTimeout:
            return self.error("timed out connecting", secrets, "PROVIDER_TIMEOUT"), True, None
        except httpx.PoolTimeout:
            what = "was not called: no free connection in the pool"
            raise self.error(what, secrets, "PROVIDER_TIMEOUT") from None
        except httpx.TimeoutException:
            raise self.error("did not answer in time", secrets, "PROVIDER_TIMEOUT") from None
        except httpx.TransportError as exc:
            what = f"could not be reached: {type(exc).__name__}: {short(str(exc))}"
            return self.error(what, secrets, "PROVIDER_UNAVAILABLE"), True, None
        if response.is_success:
            return _HttpxResponse(response)
        try:
            raw = b""
            with contextlib.suppress(httpx.HTTPError):
                async for chunk in response.aiter_bytes():
                    raw += chunk
                    if len(raw) > 16384:
                        break
            return self._status_error(
                response.status_code, response.reason_phrase, raw, response.headers, secrets
            )
        finally:
            await response.aclose()

    def _status_error(
        self,
        status: int,
        reason: str,
        raw: bytes,
        headers: Mapping[str, str],
        secrets: tuple[str, ...],
    ) -> tuple[Upstream, bool, float | None]:
        code, retryable = _status_code(status)
        message = _error_message(raw) if raw else reason
        what = f"answered {status}: {short(scrub(message, secrets))}"
        err = ProviderStatusError(
            f"the {self.provider} provider {scrub(what, secrets)}", code, status
        )
        return err, retryable, _retry_after(headers)
