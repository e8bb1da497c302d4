"""MCP servers behind the core's ``McpClient`` port (the official MCP SDK). Their
HTTP transports connect through the outbound guard (``agentsvc_adapters.outbound``),
whose ``check_url`` is re-exported here for the callers that validate server URLs."""

from agentsvc_adapters.mcp.client import SdkMcpClient
from agentsvc_adapters.outbound import check_url

__all__ = ["SdkMcpClient", "check_url"]
