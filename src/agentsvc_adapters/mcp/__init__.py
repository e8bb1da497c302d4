"""MCP servers behind the core's ``McpClient`` port (the official MCP SDK). Their
HTTP transports connect through the outbound guard (``agentsvc_adapters.outbound``),
whose ``check_url`` is re-exported here for the callers that validate server URLs.

``SdkMcpClient`` is ``client.py``'s, made on first use: the SDK and its types cost
about half a second of CPU to import, which every process (the service, each
command of the CLI) would pay at start, used or not."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentsvc_adapters.outbound import check_url
from agentsvc_core.ports.mcp import McpCallResult, McpEndpoint, McpTool

if TYPE_CHECKING:
    from agentsvc_adapters.mcp.client import SdkMcpClient as _Client

__all__ = ["SdkMcpClient", "check_url"]


class SdkMcpClient:
    """``client.SdkMcpClient``, with the same arguments, built (and the SDK imported)
    at the first call."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._client: _Client | None = None

    def _made(self) -> _Client:
        if self._client is None:
            from agentsvc_adapters.mcp.client import SdkMcpClient as Client  # noqa: PLC0415

            self._client = Client(**self._options)
        return self._client

    async def list_tools(self, endpoint: McpEndpoint) -> list[McpTool]:
        return await self._made().list_tools(endpoint)

    async def call_tool(
        self, endpoint: McpEndpoint, name: str, arguments: dict[str, Any]
    ) -> McpCallResult:
        return await self._made().call_tool(endpoint, name, arguments)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
