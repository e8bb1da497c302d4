"""The MCP client port: reach a tool server, list its tools, call one."""

from __future__ import annotations

from typing import Any, Literal, Protocol

import msgspec

Transport = Literal["streamable_http", "sse", "stdio"]


class McpEndpoint(msgspec.Struct, frozen=True, kw_only=True):
    """How to reach one MCP server, secrets included (decrypted for this call only)."""

    # Identifies a reusable session: the same key means the same server with the
    # same settings (the caller puts the server id and its last change time in it).
    key: str
    transport: Transport
    url: str | None = None
    command: str | None = None
    args: tuple[str, ...] = ()
    headers: dict[str, str] = {}
    env: dict[str, str] = {}


class McpTool(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    description: str = ""
    input_schema: dict[str, Any] = msgspec.field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )


class McpCallResult(msgspec.Struct, frozen=True, kw_only=True):
    text: str
    is_error: bool = False


class McpClient(Protocol):
    """Talks to MCP servers. Errors are ``Upstream`` with code ``MCP_UNAVAILABLE``
    (cannot connect: refused, DNS, TLS, a refused address, a timeout connecting),
    ``MCP_TIMEOUT`` (listing or a call took too long) or ``MCP_ERROR`` (the server
    answered with a protocol error); ``McpAuthRequired`` when the server answers
    401 (OAuth needed). Details are readable and never contain a header or env
    value."""

    async def list_tools(self, endpoint: McpEndpoint) -> list[McpTool]: ...

    async def call_tool(
        self, endpoint: McpEndpoint, name: str, arguments: dict[str, Any]
    ) -> McpCallResult:
        """A tool that runs and fails is ``is_error=True`` with its text, not an error."""
        ...

    async def aclose(self) -> None:
        """Close every open session (and stop stdio servers)."""
        ...


class UrlPolicy(Protocol):
    def refusal(self, url: str) -> str | None:
        """Why ``url`` may not be used for outbound calls (scheme, a refused
        address...), or None when it may. The MCP client checks again at connect
        time, on the resolved address."""
        ...
