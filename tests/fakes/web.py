"""Loopback fakes of the web tools' far ends: a small web site (ASGI) and the Brave
Search API speaking its real wire format. Serve them with ``tests.web.live.serve``."""

from __future__ import annotations

import json
import zlib
from typing import Any
from urllib.parse import parse_qs

PAGE = b"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Brewing Green Tea - The Tea Journal</title>
<style>body{font-family:sans-serif}</style>
<script>window.tracker = function(){ return "tracking-script-body"; };</script>
</head><body>
<header><nav><a href="/">Home</a> | <a href="/shop">Shop</a> |
<a href="/login">Log in</a></nav></header>
<aside><h3>Popular posts</h3><ul><li><a href="/a">Ten teapots you need</a></li></ul></aside>
<main><article>
<h1>How to brew green tea</h1>
<p>Green tea is delicate. Water that is too hot draws out bitter catechins, and steeping
too long makes the cup astringent. A few simple rules give a sweet, grassy cup.</p>
<h2>Water temperature</h2>
<p>Use water between 70 and 80 degrees. Without a thermometer, let boiled water stand
for about three minutes before pouring it over the leaves.</p>
<ol><li>Warm the pot.</li><li>Add 3 g of leaves per 200 ml.</li><li>Steep for one minute.</li></ol>
</article></main>
<footer><p>Copyright 2024 The Tea Journal. All rights reserved.</p></footer>
</body></html>"""

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


class FakeSite:
    """Routes: ``/`` and ``/brew`` (an article page), ``/big?n=`` (``n`` bytes of text),
    ``/redirect?to=`` (302), ``/loop`` (redirects to itself), ``/image`` (PNG),
    ``/json``, ``/notes.md``, ``/untyped`` (HTML without a content type),
    ``/missing`` (404), ``/cookie`` (sets one), ``/echo-cookie`` (answers the
    Cookie header it got). ``paths``: every request's path, in order."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        self.paths.append(path)
        query = {k: v[0] for k, v in parse_qs(scope["query_string"].decode()).items()}
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        status, extra, body = self._answer(path, query, headers)
        await send({"type": "http.response.start", "status": status, "headers": extra})
        await send({"type": "http.response.body", "body": body})

    def _answer(
        self, path: str, query: dict[str, str], headers: dict[str, str]
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        html = [(b"content-type", b"text/html; charset=utf-8")]
        text = [(b"content-type", b"text/plain; charset=utf-8")]
        match path:
            case "/" | "/brew":
                return 200, html, PAGE
            case "/big":
                n = int(query.get("n", "100000"))
                line = b"0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstu\n"
                return 200, text, (line * (n // len(line) + 1))[:n]
            case "/gzip" | "/deflate" | "/brotli":
                return _encoded(path, query, text)
            case "/redirect":
                return 302, [(b"location", query["to"].encode())], b""
            case "/loop":
                return 302, [(b"location", b"/loop")], b""
            case "/image":
                return 200, [(b"content-type", b"image/png")], PNG
            case "/json":
                return 200, [(b"content-type", b"application/json")], b'{"tea": "sencha"}'
            case "/notes.md":
                return 200, [(b"content-type", b"text/markdown")], b"# Notes\n\nSteep *briefly*.\n"
            case "/untyped":
                return 200, [], PAGE
            case "/cookie":
                return 200, [*text, (b"set-cookie", b"session=abc123; Path=/")], b"cookie set"
            case "/echo-cookie":
                return 200, text, headers.get("cookie", "(no cookie)").encode()
            case _:
                return 404, text, b"not found"


def _encoded(
    path: str, query: dict[str, str], text: list[tuple[bytes, bytes]]
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Bodies with a Content-Encoding: /gzip (n bytes of text: 64 MiB is about
    64 KiB of gzip), /deflate, /brotli (an encoding web_fetch does not read)."""
    if path == "/gzip":
        return (
            200,
            [*text, (b"content-encoding", b"gzip")],
            _zeros_gzip(int(query.get("n", "1000"))),
        )
    if path == "/deflate":
        body = zlib.compress(b"deflated tea " * 10)
        return 200, [*text, (b"content-encoding", b"deflate")], body
    return 200, [*text, (b"content-encoding", b"br")], b"\x0b\x02\x80tea\x03"


def _zeros_gzip(n: int) -> bytes:
    """``n`` bytes of "0" gzip-compressed (a gzip bomb when ``n`` is large)."""
    out = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b"0" * 1_048_576
    parts = [out.compress(block) for _ in range(n // len(block))]
    parts.append(out.compress(b"0" * (n % len(block))))
    return b"".join([*parts, out.flush()])


BRAVE_KEY = "brave-test-subscription-token-0123456789"


def _result(title: str, url: str, description: str) -> dict[str, Any]:
    """One of Brave's ``web.results`` (the fields its API documents, with extras)."""
    host = url.split("/")[2]
    return {
        "title": title,
        "url": url,
        "is_source_local": False,
        "is_source_both": False,
        "description": description,
        "profile": {"name": host, "url": url, "long_name": host, "img": ""},
        "language": "en",
        "family_friendly": True,
        "type": "search_result",
        "subtype": "generic",
        "meta_url": {"scheme": "https", "netloc": host, "hostname": host, "path": ""},
    }


RESULTS = [
    _result(
        "How to brew <strong>green tea</strong>",
        "https://tea.example/brew",
        "Use water between 70 and 80 &deg;C for <strong>green tea</strong> &amp; sencha.",
    ),
    _result("Sencha - Wikipedia", "https://en.wikipedia.example/wiki/Sencha", "A Japanese tea."),
    _result("Tea shop", "https://shop.blocked.example/tea", "Buy tea."),
]


class FakeBrave:
    """``GET /res/v1/web/search?q=&count=`` with ``X-Subscription-Token``, as the
    Brave Search API: 401 with its error body for another token; a query
    ``nothing`` finds nothing (no ``web`` key, as Brave answers). ``queries``:
    each request's (q, count, token)."""

    def __init__(self, key: str = BRAVE_KEY) -> None:
        self.key = key
        self.queries: list[tuple[str, str, str | None]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        query = {k: v[0] for k, v in parse_qs(scope["query_string"].decode()).items()}
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        token = headers.get("x-subscription-token")
        self.queries.append((query.get("q", ""), query.get("count", ""), token))
        status, body = self._answer(scope["path"], query, token)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": json.dumps(body).encode()})

    def _answer(
        self, path: str, query: dict[str, str], token: str | None
    ) -> tuple[int, dict[str, Any]]:
        if path != "/res/v1/web/search":
            return 404, {"type": "ErrorResponse", "error": {"status": 404, "code": "NOT_FOUND"}}
        if token != self.key:
            return 401, {
                "type": "ErrorResponse",
                "error": {
                    "id": "e0b0f6c5",
                    "status": 401,
                    "code": "SUBSCRIPTION_TOKEN_INVALID",
                    "detail": "The provided subscription token is invalid.",
                    "meta": {"component": "authentication"},
                },
                "time": 1700000000,
            }
        q = query.get("q", "")
        answer: dict[str, Any] = {
            "type": "search",
            "query": {"original": q, "show_strict_warning": False, "is_navigational": False},
            "mixed": {"type": "mixed", "main": [], "top": [], "side": []},
        }
        if q != "nothing":
            count = int(query.get("count", "20"))
            answer["web"] = {
                "type": "search",
                "results": RESULTS[:count],
                "family_friendly": True,
            }
        return 200, answer
