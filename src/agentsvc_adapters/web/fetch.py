"""``web_fetch``'s HTTP client: one GET, through the outbound guard.

- The URL: ``http://`` or ``https://`` only. The guard's rules apply to its host
  (no loopback, private, link-local, metadata... address, named or literal,
  unless ``AGENTSVC_ALLOW_PRIVATE_NETWORK=true``), and the guarded client checks
  every address it connects to; plain ``http://`` is allowed for reading public
  pages (the guard's https-only rule is for endpoints that receive our secrets).
  Then the agent's domain lists (``FetchLimits``).
- Redirects (301, 302, 303, 307, 308) are followed here, at most 5, each new URL
  checked as the first was; the client itself follows none.
- One deadline for the whole exchange, redirects included (``asyncio.timeout``).
- The body is read up to ``max_bytes`` after decompression, which is done here,
  bounded (``Accept-Encoding: gzip, deflate``; a small gzip cannot grow into
  gigabytes), then cut; what was read is used. Other encodings are refused.
- Content types: HTML becomes readable text (``html.py``, in a worker thread);
  plain text, Markdown and JSON come as they are; others are refused before their
  body is read. No content type: HTML if it looks like it, else text if it is UTF-8.
- No cookies are kept: the client is shared by every agent of every organization.

Errors name the host, never the URL (its query may hold a token).
"""

from __future__ import annotations

import asyncio
import codecs
import http.cookiejar
import zlib
from email.message import Message
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx

from agentsvc_adapters.html import html_to_text
from agentsvc_adapters.outbound import OutboundGuard, failure, normalise_host, note_refusal
from agentsvc_core.ports.web import FetchLimits, WebFetcher, WebFetchFailed, WebPage, domain_refusal

__all__ = ["MAX_REDIRECTS", "HttpWebFetcher"]

MAX_REDIRECTS = 5
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_HTML = frozenset({"text/html", "application/xhtml+xml"})
_AS_IS = frozenset(
    {"text/plain", "text/markdown", "text/x-markdown", "application/json", "text/json"}
)
_HEADERS = {
    "User-Agent": "Mozilla/5.0 (compatible; agentsvc-web-fetch/1.0)",
    "Accept": (
        "text/html,application/xhtml+xml;q=0.9,text/markdown;q=0.8,text/plain;q=0.8,"
        "application/json;q=0.8,*/*;q=0.1"
    ),
    # the encodings _read decompresses itself, bounded (not httpx's: unbounded)
    "Accept-Encoding": "gzip, deflate",
}


class _NoCookies(http.cookiejar.DefaultCookiePolicy):
    """Neither keep nor send a cookie."""

    def set_ok(self, cookie: http.cookiejar.Cookie, request: object) -> bool:
        return False

    def return_ok(self, cookie: http.cookiejar.Cookie, request: object) -> bool:
        return False


def _kind(content_type: str) -> str | None:
    if content_type in _HTML:
        return "html"
    if content_type in _AS_IS or content_type.endswith("+json"):
        return "text"
    return None


def _parse_type(header: str | None) -> tuple[str, str | None]:
    """(media type, charset) of a Content-Type header."""
    if not header:
        return "", None
    message = Message()
    message["content-type"] = header
    charset = message.get_param("charset")
    return message.get_content_type().lower(), charset if isinstance(charset, str) else None


def _sniff(body: bytes) -> str | None:
    """The kind of a body that came without a content type: HTML if it starts like
    a page, text if it is UTF-8 (a character cut at the size cap is fine)."""
    head = body[:1024].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if head.startswith((b"<!doctype html", b"<html", b"<head", b"<body")):
        return "html"
    if b"\x00" in head:
        return None
    try:
        codecs.getincrementaldecoder("utf-8")().decode(body, final=False)
    except UnicodeDecodeError:
        return None
    return "text"


def _decode(body: bytes, charset: str | None) -> str:
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        return body.decode("utf-8", errors="replace")


def _markdown_title(text: str) -> str | None:
    for line in text.splitlines()[:50]:
        if line.startswith("# "):
            return line[2:].strip() or None
    return None


def _page(
    url: str, kind: str, content_type: str, charset: str | None, body: bytes, cut: bool
) -> WebPage:
    """The page as the model reads it (CPU-bound: run in a thread)."""
    if kind == "html":
        # without a charset in the header, lxml finds the page's <meta charset>
        title, text = html_to_text(_decode(body, charset) if charset else body, url)
    else:
        text = _decode(body, charset)
        title = _markdown_title(text) if "markdown" in content_type else None
    return WebPage(url=url, title=title, text=text, content_type=content_type or kind, cut=cut)


class HttpWebFetcher(WebFetcher):
    """The ``WebFetcher`` over one pooled guarded client (``aclose`` at shutdown).
    ``client``: a guarded client to use instead of the guard's own (tests route
    one host to loopback through it)."""

    def __init__(self, guard: OutboundGuard, client: httpx.AsyncClient | None = None) -> None:
        self._guard = guard
        # the per-request timeout is the fetch's deadline (see fetch)
        self._http = client or guard.http_client(timeout=10.0)
        # (a CookieJar, not httpx.Cookies: httpx copies those into a default jar)
        self._http.cookies = http.cookiejar.CookieJar(policy=_NoCookies())

    async def aclose(self) -> None:
        await self._http.aclose()

    def _refusal(self, url: str, limits: FetchLimits) -> str | None:
        """Why ``url`` may not be fetched, before any connection."""
        try:
            parts = urlsplit(url)
            host = parts.hostname
        except ValueError:
            return "not a valid URL"
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            return "only http:// and https:// URLs can be fetched"
        # the guard's address rules; the scheme rule is ours (see the module docstring)
        why = self._guard.refusal("https" + url[len(parts.scheme) :])
        if why:
            note_refusal(f"web fetch: {why}")
            return f"refused by the outbound guard: {why}"
        try:
            name = normalise_host(host or "")
        except ValueError:
            return "not a valid host"
        return domain_refusal(name, limits.allowed_domains, limits.blocked_domains)

    async def fetch(self, url: str, limits: FetchLimits) -> WebPage:
        deadline = limits.timeout_ms / 1000
        try:
            async with asyncio.timeout(deadline):
                final, kind, content_type, charset, body, cut = await self._download(
                    url, limits, deadline
                )
        except (TimeoutError, httpx.TimeoutException):
            raise WebFetchFailed(
                f"{_host(url)} did not answer within {limits.timeout_ms} ms"
            ) from None
        return await asyncio.to_thread(_page, final, kind, content_type, charset, body, cut)

    async def _download(
        self, url: str, limits: FetchLimits, deadline: float
    ) -> tuple[str, str, str, str | None, bytes, bool]:
        for _ in range(MAX_REDIRECTS + 1):
            why = self._refusal(url, limits)
            if why:
                raise WebFetchFailed(why)
            try:
                async with self._http.stream(
                    "GET", url, headers=_HEADERS, timeout=deadline
                ) as resp:
                    if resp.status_code in _REDIRECTS:
                        location = resp.headers.get("location")
                        if not location:
                            raise WebFetchFailed(
                                f"{_host(url)} answered a redirect without a Location"
                            )
                        url = urljoin(url, location.strip())
                        continue
                    if not 200 <= resp.status_code < 300:
                        raise WebFetchFailed(f"{_host(url)} answered HTTP {resp.status_code}")
                    content_type, charset = _parse_type(resp.headers.get("content-type"))
                    kind = _kind(content_type) if content_type else None
                    if content_type and kind is None:
                        raise WebFetchFailed(
                            f"{_host(url)} answered {content_type}, which web_fetch does not "
                            "read (it reads HTML, plain text, Markdown and JSON)"
                        )
                    body, cut = await _read(resp, limits.max_bytes)
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                if isinstance(exc, httpx.TimeoutException):
                    raise
                raise WebFetchFailed(failure(exc, url)) from None
            if kind is None:
                kind = _sniff(body)
                if kind is None:
                    raise WebFetchFailed(
                        f"{_host(url)} answered no content type and no text, which "
                        "web_fetch does not read"
                    )
            return url, kind, content_type, charset, body, cut
        raise WebFetchFailed(f"more than {MAX_REDIRECTS} redirects")


def _decompressor(resp: httpx.Response) -> Any:
    """A zlib decompressor for the answer's ``Content-Encoding`` (None: identity)."""
    encoding = resp.headers.get("content-encoding", "").strip().lower()
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj()
    raise WebFetchFailed(
        f"{_host(str(resp.url))} answered in {encoding!r}, which web_fetch does not read"
    )


async def _read(resp: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """At most ``limit`` bytes of the decompressed body, and whether there was more.
    The raw bytes are decompressed here, never more than ``limit + 1`` at a time
    (``max_length``): httpx's own decoders decompress a whole chunk at once, and 64
    KiB of gzip can be gigabytes."""
    decoder = _decompressor(resp)
    body = bytearray()
    try:
        async for chunk in resp.aiter_raw():
            data = chunk
            while data:
                if decoder is None:
                    body += data
                    data = b""
                else:
                    body += decoder.decompress(data, limit + 1 - len(body))
                    data = decoder.unconsumed_tail
                if len(body) > limit:
                    return bytes(body[:limit]), True
        if decoder is not None:
            body += decoder.flush()
    except zlib.error:
        raise WebFetchFailed(
            f"{_host(str(resp.url))} answered a body that does not decompress"
        ) from None
    if len(body) > limit:
        return bytes(body[:limit]), True
    return bytes(body), False


def _host(url: str) -> str:
    try:
        return urlsplit(url).hostname or "the server"
    except ValueError:
        return "the server"
