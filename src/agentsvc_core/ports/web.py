"""The web: reading a page (``WebFetcher``) and asking a search engine
(``WebSearch``), for the ``web_fetch`` and ``web_search`` tools
(``use_cases/web.py``). Adapters: ``agentsvc_adapters/web``."""

from __future__ import annotations

import ipaddress
from typing import Protocol

import msgspec

from agentsvc_core.errors import DomainError

__all__ = [
    "FetchLimits",
    "SearchHit",
    "WebFetchFailed",
    "WebFetcher",
    "WebPage",
    "WebSearch",
    "domain_refusal",
    "host_in",
]


class WebFetchFailed(DomainError):
    """A page could not be read; ``detail`` says why in words the model can use
    (refused by the outbound guard or the agent's domains, no answer in time, an
    HTTP status, a content type that is not text). Never the page's query string."""


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def host_in(host: str, domains: tuple[str, ...]) -> bool:
    """Whether ``host`` is one of ``domains`` or below one (``example.com`` covers
    ``www.example.com``; an IP address matches only itself). Both sides lowercase
    ASCII (IDNA), no trailing dot."""
    below = not _is_address(host)
    return any(host == d or (below and host.endswith("." + d)) for d in domains)


def domain_refusal(host: str, allowed: tuple[str, ...], blocked: tuple[str, ...]) -> str | None:
    """Why the agent's domain lists refuse ``host`` (normalised), or None."""
    if host_in(host, blocked):
        return f"{host} is in this agent's blocked domains"
    if allowed and not host_in(host, allowed):
        return f"{host} is not in this agent's allowed domains"
    return None


class FetchLimits(msgspec.Struct, frozen=True, kw_only=True):
    """What one fetch may do: read at most ``max_bytes`` of the body (decoded),
    take at most ``timeout_ms`` for the whole exchange (redirects included), and
    contact only hosts the domain lists let through (each redirect hop too)."""

    max_bytes: int
    timeout_ms: int
    allowed_domains: tuple[str, ...] = ()
    blocked_domains: tuple[str, ...] = ()


class WebPage(msgspec.Struct, frozen=True, kw_only=True):
    url: str  # where the text came from, after redirects
    title: str | None
    text: str  # readable text: HTML reduced, other text types as they came
    content_type: str
    cut: bool = False  # the body was longer than ``FetchLimits.max_bytes``


class SearchHit(msgspec.Struct, frozen=True, kw_only=True):
    title: str
    url: str
    snippet: str


class WebFetcher(Protocol):
    async def fetch(self, url: str, limits: FetchLimits) -> WebPage:
        """GET ``url`` (http or https) through the outbound guard, following at
        most 5 redirects, each hop checked again; HTML comes back as readable
        text, plain text, Markdown and JSON as they are. Raises ``WebFetchFailed``."""
        ...


class WebSearch(Protocol):
    """A search engine's API (configured by the operator)."""

    provider: str  # its name, as AGENTSVC_WEB_SEARCH_PROVIDER gives it

    async def search(self, query: str, count: int) -> list[SearchHit]:
        """At most ``count`` results, best first. Raises ``Upstream`` (the engine
        failed, refused the key, timed out); the message never holds the key."""
        ...
