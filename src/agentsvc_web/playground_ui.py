"""The playground at ``/playground``: a page to try the API in a browser.

Static files shipped in the package (``agentsvc_web/playground/``: an HTML page,
plain JavaScript modules and a style sheet; no build step, nothing from a CDN).
The route is public, like ``/schema``: the files hold no data, and every call the
page makes to ``/api/`` carries the API key the user typed (kept in the tab's
``sessionStorage``). It is left out of the OpenAPI document, as the viewers'
assets are: it is not part of the API.

Its answers carry a strict Content-Security-Policy (``PLAYGROUND_CSP``, set by
``agentsvc_web.headers`` where every answer passes, so an unknown file's 404 has
it too): scripts and styles from this origin only, no inline script or style, no
``eval``, connections to this origin only, no framing. Whatever an API answer
holds is shown as text, never parsed as HTML, so a stored message cannot run
script on the page; the policy is the second line of that defence.
"""

from __future__ import annotations

from pathlib import Path

from litestar import Router
from litestar.datastructures import CacheControlHeader
from litestar.static_files import create_static_files_router

__all__ = ["MARKDOWN_FILES", "PLAYGROUND_CSP", "PLAYGROUND_PATH", "playground_router"]

PLAYGROUND_PATH = "/playground"
FILES = Path(__file__).parent / "playground"
# the Markdown renderer (markdown.js, highlight.js) the console shares with the
# public chat page: each serves the folder's files beside its own
MARKDOWN_FILES = Path(__file__).parent / "markdown_files"

PLAYGROUND_CSP = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)


def playground_router() -> Router:
    """``/playground`` (its ``index.html``) and ``/playground/<file>``, the
    Markdown renderer's files among them."""
    return create_static_files_router(
        path=PLAYGROUND_PATH,
        directories=[FILES, MARKDOWN_FILES],
        html_mode=True,
        name="playground",
        include_in_schema=False,
        # revalidated on each load: a new version of the service serves its own page
        cache_control=CacheControlHeader(no_cache=True),
    )
