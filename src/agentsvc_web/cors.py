"""CORS for browser clients (``AGENTSVC_CORS_ORIGINS``; none by default: no CORS).

An ASGI layer in front of the app (``agentsvc_web.observe.outermost``), so it sees
every answer, the streamed ones and the framework's errors included, and answers a
preflight before routing, authentication and the rate limits (a browser sends a
preflight without credentials).

- A request whose ``Origin`` is allowed gets ``Access-Control-Allow-Origin`` (its
  own origin, never ``*``: no credentials are involved, the API takes bearer
  tokens, not cookies), ``Access-Control-Expose-Headers: X-Request-Id, Idempotent-Replayed`` and
  ``Vary: Origin``.
- A preflight (``OPTIONS`` with ``Origin`` and ``Access-Control-Request-Method``)
  from an allowed origin is answered 204 with the methods and request headers the
  API uses, and ``Access-Control-Max-Age``.
- A disallowed origin gets no ``Access-Control-*`` header at all (its preflight
  reaches the app, whose ``OPTIONS`` answer lists the path's methods), so the
  browser refuses to hand the answer to the page.

Why not Litestar's ``CORSConfig``: its middleware answers every ``OPTIONS`` that has
an ``Origin`` as a preflight (our ``OPTIONS`` answers would lose their ``Allow``),
answers a disallowed origin's preflight with a text/plain 400 (not the one error
body), and puts ``Access-Control-Allow-Methods``/``-Headers`` on answers to
disallowed origins too.
"""

from __future__ import annotations

from collections.abc import Iterable

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["ALLOWED_HEADERS", "ALLOWED_METHODS", "PREFLIGHT_ROUTE", "Cors"]

ALLOWED_METHODS = "DELETE, GET, PATCH, POST, PUT"
ALLOWED_HEADERS = "Authorization, Content-Type, Idempotency-Key, Last-Event-ID, X-Request-Id"
MAX_AGE_S = 600
PREFLIGHT_ROUTE = "(CORS preflight)"  # the route label of an answered preflight (metrics)
_VARY = (b"vary", b"Origin")
_EXPOSE = (b"access-control-expose-headers", b"X-Request-Id, Idempotent-Replayed")


class Cors:
    def __init__(self, app: ASGIApp, origins: Iterable[str]) -> None:
        self.app = app
        allowed = frozenset(origins)
        self._any = "*" in allowed
        self._origins = frozenset(o.encode() for o in allowed)

    def _allowed(self, origin: bytes) -> bool:
        return self._any or origin in self._origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        origin = None
        preflight = False
        for name, value in scope["headers"]:
            if name == b"origin":
                origin = value
            elif name == b"access-control-request-method":
                preflight = True
        if origin is None or not self._allowed(origin):
            await self.app(scope, receive, send)
            return
        allow = (b"access-control-allow-origin", origin)
        if preflight and scope["method"] == "OPTIONS":
            scope["path_template"] = PREFLIGHT_ROUTE
            await send(
                {
                    "type": "http.response.start",
                    "status": 204,
                    "headers": [
                        allow,
                        (b"access-control-allow-methods", ALLOWED_METHODS.encode()),
                        (b"access-control-allow-headers", ALLOWED_HEADERS.encode()),
                        (b"access-control-max-age", str(MAX_AGE_S).encode()),
                        _VARY,
                    ],
                }
            )
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return

        async def send_allowed(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), allow, _EXPOSE, _VARY]
            await send(message)

        await self.app(scope, receive, send_allowed)
