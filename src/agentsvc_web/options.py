"""``OPTIONS`` answers that list the methods a path really has.

Litestar adds an ``OPTIONS`` handler to each path, but when a path's handlers come
from several route decorators (``GET`` and ``POST`` of one controller path), the
handler it keeps remembers the methods of the first one only. This
``before_request`` hook answers ``OPTIONS`` from the finished route table
instead. An unknown path is 404 before any handler runs.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, Response
from litestar.routes import HTTPRoute
from litestar.status_codes import HTTP_204_NO_CONTENT

from agentsvc_web.controllers.publishing.public import CHAT_PATH, preflight

__all__ = ["answer_options"]


async def answer_options(request: Request[Any, Any, Any]) -> Response[None] | None:
    if request.method != "OPTIONS":
        return None
    (path,) = request.route_handler.paths
    methods = next(
        r.methods for r in request.app.routes if isinstance(r, HTTPRoute) and r.path == path
    )
    headers = {"Allow": ", ".join(sorted(methods))}
    if request.url.path.startswith(CHAT_PATH):
        # a published chat's preflight: CORS for the chat's own sites only
        headers.update(await preflight(request))
    return Response(None, status_code=HTTP_204_NO_CONTENT, headers=headers)
