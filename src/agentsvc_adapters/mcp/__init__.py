"""MCP servers behind the core's ``McpClient`` port (the official MCP SDK), and the
outbound address guard that the web layer also uses to validate server URLs."""

from agentsvc_adapters.mcp.client import SdkMcpClient
from agentsvc_adapters.mcp.guard import check_url

__all__ = ["SdkMcpClient", "check_url"]
