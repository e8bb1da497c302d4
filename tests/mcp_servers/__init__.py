"""Test MCP servers for the MCP client adapter."""
