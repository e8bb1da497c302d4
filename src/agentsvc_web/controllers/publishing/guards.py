"""The guards of a published chat's public routes, in front of the use case:

- ``allowed_origin``: the browser's ``Origin`` must be one of the chat's sites
  (its ``allowed_domains``, else the organization's embed domains, matched as
  ``embed_domains.embedder_allowed`` does) or the service's own origin (the
  hosted page, ``/c/{slug}``); anything else is 403. A request without
  ``Origin`` (not a browser's cross-site call: curl, a server) passes: the
  header only tells an honest browser's page apart, which is what it guards.
- ``cors_headers``: CORS for that origin only (never ``*``), on the answers and
  on the preflight (``preflight``, called by ``options.answer_options``).
- ``ChatLimits``: request budgets per client address, per visitor and per chat
  (token buckets in this process, as ``limits.TokenBuckets``): the chat's
  ``rate_limit_per_min`` for an address and for a visitor, ten times that for
  the whole chat. A refusal is 429 ``RATE_LIMITED`` with ``Retry-After``.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from litestar import Request

from agentsvc_core.entities.published_chat import PublishedChat
from agentsvc_core.errors import PermissionDenied
from agentsvc_web.embed_domains import embedder_allowed
from agentsvc_web.limits import TokenBuckets, client_address

__all__ = ["SLUG_TIMES", "ChatLimits", "allowed_origin", "cors_headers", "own_origin"]

Req = Request[Any, Any, Any]
SLUG_TIMES = 10  # a chat's whole budget: this many visitors' worth
METHODS = "GET, POST"
HEADERS = "Authorization, Content-Type"
MAX_AGE_S = 600


def own_origin(request: Req) -> str:
    """The service's origin as this request reached it (the hosted page's)."""
    return f"{request.url.scheme}://{request.url.netloc}"


def allowed_origin(request: Req, domains: tuple[str, ...]) -> str | None:
    """The cross-site origin to answer with CORS, None for a request that needs
    none (no ``Origin``, or the service's own); 403 for any other site."""
    origin = request.headers.get("origin")
    if origin is None or origin == own_origin(request):
        return None
    if not embedder_allowed(origin=origin, referer=None, domains=domains):
        raise PermissionDenied("this site may not use this chat")
    return origin


def cors_headers(origin: str | None) -> dict[str, str]:
    if origin is None:
        return {}
    return {
        "Access-Control-Allow-Origin": origin,
        "Access-Control-Expose-Headers": "Retry-After, X-Request-Id",
        "Vary": "Origin",
    }


def preflight_headers(origin: str) -> dict[str, str]:
    return {
        "Access-Control-Allow-Origin": origin,
        "Access-Control-Allow-Methods": METHODS,
        "Access-Control-Allow-Headers": HEADERS,
        "Access-Control-Max-Age": str(MAX_AGE_S),
        "Vary": "Origin",
    }


class ChatLimits:
    """The budgets of every chat, by its ``rate_limit_per_min`` (one set of token
    buckets per distinct rate, at most ``MAX_RATE`` of them)."""

    def __init__(self, max_keys: int = 50_000) -> None:
        self._max_keys = max_keys
        self._buckets: dict[int, TokenBuckets] = {}

    def _of(self, per_min: int) -> TokenBuckets:
        found = self._buckets.get(per_min)
        if found is None:
            found = self._buckets[per_min] = TokenBuckets(per_min, max_keys=self._max_keys)
        return found

    def _take(self, per_min: int, key: Hashable, what: str) -> None:
        self._of(per_min).spend(key, what)

    def address(self, request: Req, chat: PublishedChat) -> None:
        self._take(
            chat.rate_limit_per_min,
            ("address", chat.slug, client_address(request.scope)),
            "from this address",
        )

    def visitor(self, chat: PublishedChat, visitor: Hashable) -> None:
        self._take(chat.rate_limit_per_min, ("visitor", chat.slug, visitor), "from this visitor")
        self._take(chat.rate_limit_per_min * SLUG_TIMES, ("chat", chat.slug), "to this chat")
