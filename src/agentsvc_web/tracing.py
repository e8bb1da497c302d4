"""A server span per HTTP request (OpenTelemetry HTTP semantic conventions).

The outermost of the app's middleware, so it runs after routing: the span is
named ``{method} {route template}`` (``POST /api/threads/{thread_id}/messages``)
and carries ``http.request.method``, ``http.route`` and
``http.response.status_code``; a 5xx answer, or an exception, marks it failed.
It is the current span while the handler runs, so the reply a send starts
(``invoke_agent``) is its child; a send's span lasts until its stream ends. An
incoming W3C ``traceparent`` header makes it a child of the caller's span.
A request no route matches (404 before routing) has no span.
"""

from __future__ import annotations

from litestar.enums import ScopeType
from litestar.exceptions import HTTPException
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from agentsvc_core.ports.telemetry import CURRENT, Tracer
from agentsvc_core.telemetry import parse_traceparent

__all__ = ["RequestSpans"]


class RequestSpans:
    def __init__(self, app: ASGIApp, tracer: Tracer) -> None:
        self.app = app
        self._tracer = tracer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        parent = None
        for name, value in scope["headers"]:
            if name == b"traceparent":
                parent = parse_traceparent(value.decode("latin-1"))
                break
        method: str = scope["method"]
        route = scope.get("path_template") or scope["path"]
        span = self._tracer.start(
            f"{method} {route}",
            "server",
            {"http.request.method": method, "http.route": route},
            parent=parent,
        )
        status = 0

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        token = CURRENT.set(span.context)
        try:
            await self.app(scope, receive, send_status)
        except HTTPException as exc:  # raised by a middleware (401, 429...), answered further out
            status = exc.status_code
            raise
        except BaseException as exc:
            span.fail(type(exc).__name__)
            raise
        finally:
            CURRENT.reset(token)
            if status:
                span.set("http.response.status_code", status)
                if status >= 500:
                    span.fail(str(status))
            span.end()
