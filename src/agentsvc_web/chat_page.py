"""A published chat in a browser: the hosted page ``/c/{slug}``, the widget's
script ``/c/{slug}/widget.js``, and the page's static files under ``/c/_/``
(docs/publishing.md).

- The page is a small HTML document; what it shows of the chat (title, welcome
  message, starter prompts) it reads from the public API, and every message is
  shown as DOM text or through the Markdown renderer it shares with the console,
  which builds elements and text nodes and never parses HTML
  (``markdown_files/markdown.js``, served here as ``/c/_/markdown.js``).
  Its CSP loads nothing but this origin's script and style sheet, talks to this
  origin only, and lets only the chat's sites frame it (``frame-ancestors``, from
  the chat's ``allowed_domains`` or the organization's embed domains).
- ``widget.js`` mounts a chat bubble on a customer's page; the bubble opens the
  hosted page in a frame. It is served only to the chat's sites (the request's
  ``Origin``/``Referer``, ``embed_domains.embedder_allowed``): a page elsewhere
  gets a 403, and could not frame the page anyway.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Annotated, Any

from litestar import Request, Response, Router, get
from litestar.datastructures import CacheControlHeader
from litestar.di import NamedDependency
from litestar.params import FromPath, QueryParameter
from litestar.static_files import create_static_files_router

from agentsvc_core.errors import PermissionDenied
from agentsvc_core.use_cases.publishing import PublicChats
from agentsvc_web.embed_domains import embedder_allowed, filled_script, frame_ancestors
from agentsvc_web.playground_ui import MARKDOWN_FILES

__all__ = ["ASSETS_CSP", "ASSETS_PATH", "chat_page_routes", "page_csp", "widget_script"]

FILES = Path(__file__).parent / "chat_page_files"
ASSETS_PATH = "/c/_"
_WIDGET_JS = (Path(__file__).parent / "chat_widget" / "widget.js").read_text(encoding="utf-8")
Req = Request[Any, Any, Any]

ASSETS_CSP = "default-src 'none'; frame-ancestors 'none'"


def page_csp(domains: tuple[str, ...]) -> str:
    return "; ".join(
        [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "connect-src 'self'",
            "img-src 'self' data:",
            "base-uri 'none'",
            "form-action 'none'",
            f"frame-ancestors {frame_ancestors(domains)}",
        ]
    )


def chat_page(*, slug: str, title: str, embed: bool) -> str:
    e = html.escape
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{e(title)}</title>
<link rel="stylesheet" href="{ASSETS_PATH}/page.css">
</head>
<body class="{"embedded" if embed else "hosted"}">
<main id="chat" data-slug="{e(slug)}">
<header><h1 id="chat-title">{e(title)}</h1><p id="chat-description"></p></header>
<ol id="messages" aria-live="polite"></ol>
<div id="starters"></div>
<p id="chat-error" role="alert" hidden></p>
<form id="composer" autocomplete="off">
<textarea id="chat-input" rows="2" placeholder="Type a message" aria-label="Message"></textarea>
<button id="chat-send" type="submit">Send</button>
<button id="chat-stop" type="button" hidden>Stop</button>
</form>
</main>
<script type="module" src="{ASSETS_PATH}/page.js"></script>
</body>
</html>
"""


def widget_script(*, page_url: str, title: str) -> str:
    """``widget.js`` with the page's URL and the chat's title in it, each a
    JavaScript string literal that cannot end the script or the string."""
    return filled_script(_WIDGET_JS, {"__PAGE_URL__": page_url, "__TITLE__": title})


@get(
    "/c/{slug:str}",
    include_in_schema=False,
    media_type="text/html",
    name="chat-page",
)
async def hosted_page(
    public_chats: NamedDependency[PublicChats],
    slug: FromPath[str],
    embed: Annotated[int, QueryParameter(name="embed", ge=0, le=1)] = 0,
) -> Response[str]:
    chat = await public_chats.chat(slug)
    domains = await public_chats.domains(chat)
    return Response(
        chat_page(slug=chat.slug, title=chat.title, embed=bool(embed)),
        media_type="text/html",
        headers={
            "Content-Security-Policy": page_csp(domains),
            "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-store",
        },
    )


@get(
    "/c/{slug:str}/widget.js",
    include_in_schema=False,
    media_type="text/javascript",
    name="chat-widget",
)
async def widget(
    request: Req, public_chats: NamedDependency[PublicChats], slug: FromPath[str]
) -> Response[str]:
    chat = await public_chats.chat(slug)
    domains = await public_chats.domains(chat)
    if not embedder_allowed(
        origin=request.headers.get("origin"),
        referer=request.headers.get("referer"),
        domains=domains,
    ):
        raise PermissionDenied("this site may not embed this chat")
    return Response(
        widget_script(page_url=f"/c/{chat.slug}", title=chat.title),
        media_type="text/javascript",
        headers={"Cross-Origin-Resource-Policy": "cross-origin", "Cache-Control": "no-store"},
    )


async def _with_policy(response: Response[Any]) -> Response[Any]:
    response.headers["Content-Security-Policy"] = ASSETS_CSP
    return response


def chat_page_routes() -> list[Any]:
    """The page, the widget's script and the page's static files (the Markdown
    renderer's among them)."""
    assets: Router = create_static_files_router(
        path=ASSETS_PATH,
        directories=[FILES, MARKDOWN_FILES],
        name="chat-assets",
        include_in_schema=False,
        cache_control=CacheControlHeader(no_cache=True),
    )
    # the files' policy: they load nothing (the page that uses them sets its own)
    assets_with_policy = Router(
        path="/", route_handlers=[assets], after_request=_with_policy, include_in_schema=False
    )
    return [hosted_page, widget, assets_with_policy]
