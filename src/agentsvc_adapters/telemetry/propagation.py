"""``traceparent`` on outbound HTTP calls (W3C Trace Context).

An httpx (and httpx2: the MCP SDK's) request event hook that names the current
span (``agentsvc_core.ports.telemetry.CURRENT``) in a ``traceparent`` header. The
composition root installs it, only when tracing export is on, on the clients of
the outbound guard (credential resolver, webhooks) and of the MCP client. The MCP
SDK sends each request from a task that runs in the caller's context, so the
header names the ``execute_tool`` span that made the call.
"""

from __future__ import annotations

from typing import Any

from agentsvc_core.ports.telemetry import CURRENT

__all__ = ["add_traceparent"]


async def add_traceparent(request: Any) -> None:
    """Set ``traceparent`` from the current span (nothing outside a span)."""
    current = CURRENT.get()
    if current is not None:
        request.headers["traceparent"] = current.traceparent()
