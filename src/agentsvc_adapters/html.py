"""HTML to readable text, for ``web_fetch`` (``web/fetch.py``) and HTML knowledge
documents (``documents.py``): a shared module that imports no other adapter.

trafilatura finds the page's main text (navigation, sidebars, footers, scripts
and styles dropped) and writes it as Markdown: headings, lists and tables keep
their shape. It gives up on some pages (a fragment, a page that is nothing but a
short list); then the whole page's text is taken with lxml, scripts and styles
left out. The title is the page's ``<title>``, else the one trafilatura finds in
its metadata (``og:title``, the first heading...).

CPU-bound (about 1.5 ms for a 5 KB page, half a second for a megabyte): the
fetcher runs it in a worker thread, never on the event loop. trafilatura is
imported on the first call (it brings about 20 MB of modules a service that
never fetches a page need not hold).
"""

from __future__ import annotations

import logging
import re

import lxml.etree
import lxml.html

__all__ = ["html_to_text"]

_BLANKS = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")
_SPACES = re.compile(r"[ \t\r\f\v]+")
_INVISIBLE = ("script", "style", "noscript", "template", "head", "svg", "iframe")


def _whole_text(html: str | bytes) -> str:
    """Every visible text of the page, a line per block (the fallback)."""
    try:
        doc = lxml.html.document_fromstring(html)
    except (lxml.etree.ParserError, ValueError):
        return ""
    for element in doc.iter(*_INVISIBLE):
        element.drop_tree()
    for br in doc.iter("br", "p", "div", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6"):
        br.tail = "\n" + (br.tail or "")
    text = doc.text_content()
    lines = (_SPACES.sub(" ", line).strip() for line in text.splitlines())
    return _BLANKS.sub("\n\n", "\n".join(lines)).strip()


def _html_title(html: str | bytes) -> str | None:
    try:
        found = lxml.html.document_fromstring(html).findtext(".//title")
    except (lxml.etree.ParserError, ValueError):
        return None
    title = _SPACES.sub(" ", found or "").strip()
    return title or None


def html_to_text(html: str | bytes, url: str | None = None) -> tuple[str | None, str]:
    """(title, text) of an HTML page. ``bytes``: its encoding is detected (the
    ``<meta charset>``, else a guess); ``url`` helps trafilatura with relative
    links and its metadata."""
    import trafilatura  # noqa: PLC0415 - heavy, needed only once a page is fetched

    # its own warnings are about the page (a fallback extractor that found nothing),
    # one or more per page fetched: not the operator's business
    logging.getLogger("trafilatura").setLevel(logging.ERROR)

    if not html.strip():
        return None, ""
    text = trafilatura.extract(
        html,
        url=url,
        output_format="markdown",
        include_tables=True,
        include_links=False,
        include_images=False,
        include_comments=False,
        with_metadata=False,
        deduplicate=False,
    )
    if not text or not text.strip():
        text = _whole_text(html)
    title = _html_title(html)
    if title is None:  # no <title>: the metadata's (og:title, the first heading...)
        metadata = trafilatura.extract_metadata(html, default_url=url)
        title = (getattr(metadata, "title", None) or "").strip() or None
    return title, text.strip()
