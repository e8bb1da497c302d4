"""The request layer: a request id on every answer and log line, and the HTTP metrics.

``Observed`` is a plain ASGI layer (not a Litestar middleware class: it costs a
function call and a closure per request, a few microseconds in all) around the
whole app: ``outermost`` puts it in place of the app's ``asgi_handler``, outside
Litestar's exception handling and routing, so it sees every answer, the
framework's 404 and 405 included, and still runs inside the app's ``before_send``
hooks (the hardening headers).

- **Request id**: the client's ``X-Request-Id`` if it is 1-128 characters of
  ``[A-Za-z0-9._:-]``, else a new random one (24 hex digits); it is set in
  ``logs.REQUEST_ID`` while the request is served (tasks it starts copy it) and
  sent back as ``X-Request-Id`` on the answer.
- **Metrics** (``HttpMetrics``): once the answer has ended, the request is counted
  by its route template (set by Litestar's router in ``scope["path_template"]``;
  ``unmatched`` when no route matched), method and status, and its duration is
  observed.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable

from litestar import Litestar
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from agentsvc_web.cors import Cors
from agentsvc_web.logs import REQUEST_ID
from agentsvc_web.metrics import UNMATCHED, HttpMetrics

__all__ = ["Observed", "outermost", "request_id_of"]

_VALID_ID = re.compile(rb"[A-Za-z0-9._:-]{1,128}")


def request_id_of(headers: Iterable[tuple[bytes, bytes]]) -> str:
    """The client's ``X-Request-Id`` when it is acceptable, else a new one."""
    for name, value in headers:
        if name == b"x-request-id":
            if _VALID_ID.fullmatch(value):
                return value.decode()
            break
    return os.urandom(12).hex()


class Observed:
    def __init__(self, app: ASGIApp, metrics: HttpMetrics) -> None:
        self.app = app
        self._observe = metrics.observe

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        rid = request_id_of(scope["headers"])
        header = (b"x-request-id", rid.encode())
        status = 500  # if the app ends without answering

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), header]
            await send(message)

        token = REQUEST_ID.set(rid)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            REQUEST_ID.reset(token)
            self._observe(
                scope.get("path_template", UNMATCHED),
                scope["method"],
                status,
                time.perf_counter() - started,
            )


def outermost(app: Litestar, metrics: HttpMetrics, cors_origins: tuple[str, ...]) -> None:
    """Wrap ``app``'s handler of every HTTP request: ``Observed`` outside, then
    ``Cors`` when origins are configured (so a preflight carries a request id
    and is counted), then what Litestar built. Litestar calls ``asgi_handler``
    with the ``send`` its ``before_send`` hooks wrap."""
    inner: ASGIApp = app.asgi_handler
    if cors_origins:
        inner = Cors(inner, cors_origins)
    app.asgi_handler = Observed(inner, metrics)
