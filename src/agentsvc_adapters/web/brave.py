"""The Brave Search API (``AGENTSVC_WEB_SEARCH_PROVIDER=brave``), for ``web_search``.

Its web search: ``GET {base}/res/v1/web/search?q=&count=`` with the key in the
``X-Subscription-Token`` header (``Accept: application/json``); the answer's
``web.results`` are ``{title, url, description, ...}`` (``web`` is absent when
nothing was found), titles and descriptions holding ``<strong>`` highlights and
HTML entities, which are removed. ``count`` is at most 20. A 401 or 403 means a
wrong key or plan, 429 the plan's rate limit.

Through the outbound guard's client (the base URL is the operator's, the real
one by default); answers over 1 MiB are refused; 10 s for the whole call. The key
is never logged nor put in an error.
"""

from __future__ import annotations

import asyncio
import html
import logging
import re

import httpx
import msgspec

from agentsvc_adapters.outbound import OutboundGuard, failure
from agentsvc_core.errors import Upstream
from agentsvc_core.ports.web import SearchHit, WebSearch

__all__ = ["BRAVE_URL", "BraveSearch"]

log = logging.getLogger("agentsvc.web")
BRAVE_URL = "https://api.search.brave.com"
MAX_COUNT = 20
_MAX_BYTES = 1024 * 1024
_TIMEOUT_S = 10.0
_TAGS = re.compile(r"<[^>]{0,200}>")


class _Result(msgspec.Struct):
    url: str
    title: str = ""
    description: str = ""


class _Web(msgspec.Struct):
    results: list[_Result] = []


class _Answer(msgspec.Struct):
    web: _Web | None = None


_decoder = msgspec.json.Decoder(_Answer)


def _plain(text: str) -> str:
    return html.unescape(_TAGS.sub("", text)).strip()


class BraveSearch(WebSearch):
    provider = "brave"

    def __init__(self, guard: OutboundGuard, api_key: str, base_url: str = BRAVE_URL) -> None:
        self._key = api_key
        self._url = base_url.rstrip("/") + "/res/v1/web/search"
        self._http = guard.http_client(timeout=_TIMEOUT_S)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def search(self, query: str, count: int) -> list[SearchHit]:
        headers = {"Accept": "application/json", "X-Subscription-Token": self._key}
        params = {"q": query, "count": str(max(1, min(count, MAX_COUNT)))}
        try:
            async with (
                asyncio.timeout(_TIMEOUT_S),
                self._http.stream("GET", self._url, params=params, headers=headers) as resp,
            ):
                status = resp.status_code
                if status != 200:
                    raise self._status(status)
                raw = bytearray()
                async for chunk in resp.aiter_bytes():
                    raw += chunk
                    if len(raw) > _MAX_BYTES:
                        raise Upstream("the brave search API answered more than 1 MiB")
        except (TimeoutError, httpx.TimeoutException):
            raise Upstream(f"the brave search API did not answer within {_TIMEOUT_S:g} s") from None
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise Upstream(f"the brave search API: {failure(exc, self._url)}") from None
        try:
            answer = _decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise Upstream("the brave search API answered something that is not results") from None
        results = answer.web.results if answer.web is not None else []
        return [
            SearchHit(title=_plain(r.title), url=r.url, snippet=_plain(r.description))
            for r in results[:count]
            if r.url.startswith(("https://", "http://"))
        ]

    @staticmethod
    def _status(status: int) -> Upstream:
        log.warning("the brave search API answered HTTP %s", status)
        if status in (401, 403):
            return Upstream(
                f"the brave search API refused the key (HTTP {status}): "
                "check AGENTSVC_WEB_SEARCH_API_KEY"
            )
        if status == 429:
            return Upstream("the brave search API's rate limit was reached (HTTP 429)")
        return Upstream(f"the brave search API answered HTTP {status}")
