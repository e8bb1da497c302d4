"""The web tools' adapters: the page fetcher (``fetch``), HTML to text (``html``)
and the search engines (``brave``), each over the outbound guard's clients."""

from agentsvc_adapters.html import html_to_text
from agentsvc_adapters.web.brave import BraveSearch
from agentsvc_adapters.web.fetch import HttpWebFetcher

__all__ = ["BraveSearch", "HttpWebFetcher", "html_to_text"]
