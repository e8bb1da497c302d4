from __future__ import annotations

from agentsvc_core.entities import Principal
from agentsvc_core.ports.registry import McpRegistry, RegistryEntry
from agentsvc_core.rules import check_text

MAX_QUERY = 200


class RegistrySearch:
    """Find MCP servers to register, in the configured MCP registry."""

    def __init__(self, registry: McpRegistry) -> None:
        self._registry = registry

    async def search(self, who: Principal, query: str, limit: int) -> list[RegistryEntry]:
        check_text("q", query, max_len=MAX_QUERY)
        return await self._registry.search(query.strip(), limit)
