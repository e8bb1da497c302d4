"""A server span per HTTP request (OpenTelemetry HTTP semantic conventions).

The outermost of the app's middleware, so it runs after routing: the span is
named ``{method} {route template}`` (``POST /api/threads/{thread_id}/messages``)
and carries ``http.request.method``, ``http.route`` and
``http.response.status_code``; a 5xx answer, or an exception, marks it failed.
An error a middleware raises (401, 429, 408) is answered inside this span, by the
app's error table, so the span has the status the client got.
It is the current span while the handler runs, so the reply a send starts
(``invoke_agent``) is its child; a send's span lasts until its stream ends. An
incoming W3C ``traceparent`` header makes it a child of the caller's span.
A request no route matches (404 before routing) has no span.
"""

from __future__ import annotations

from litestar._asgi.utils import wrap_in_exception_handler
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from agentsvc_core.ports.telemetry import CURRENT, Tracer
from agentsvc_core.telemetry import parse_traceparent

__all__ = ["RequestSpans"]


class RequestSpans:
    def __init__(self, app: ASGIApp, tracer: Tracer) -> None:
        # An error raised by a middleware inside this one (401 from the bearer auth,
        # 429, 408) is answered here, by the app's own error table, as Litestar does
        # between a handler and its middleware: so the span sees the status it sent.
        # (``wrap_in_exception_handler`` is Litestar's, private: pinned by litestar<3.)
        self.app = wrap_in_exception_handler(app)
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
