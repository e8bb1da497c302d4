"""The one ``ServerTools`` the turn sees: the union of the tool sources (MCP servers,
webhook tools, database integrations, web, plans), each call routed to the source
that owns its name (ports/tools.py says how names keep apart)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from agentsvc_core.entities import Agent, Principal
from agentsvc_core.errors import DomainError
from agentsvc_core.ports import ServerTools, ToolCallContext, ToolSetup, ToolSpec

log = logging.getLogger("agentsvc.tools")

__all__ = ["ToolHub"]


class ToolHub(ServerTools):
    def __init__(self, sources: Sequence[ServerTools]) -> None:
        self._sources = tuple(sources)
        self.kinds = tuple(dict.fromkeys(k for s in self._sources for k in s.kinds))

    def _source(self, name: str) -> ServerTools | None:
        return next((s for s in self._sources if s.owns(name)), None)

    def owns(self, name: str) -> bool:
        return self._source(name) is not None

    def is_extension(self, name: str) -> bool:
        source = self._source(name)
        return source is not None and source.is_extension(name)

    async def list_tools(
        self, who: Principal, agent: Agent, setup: ToolSetup | None = None
    ) -> list[ToolSpec]:
        """The sources' tools, in the sources' order whichever answers first: they
        are listed concurrently, so a slow one (an MCP server, a storage read) does
        not hold up the others. A source that cannot list (its storage or server
        failing) is left out of this turn and logged: the others still serve. Any
        other exception propagates (``gather`` lets the other listings finish)."""
        listed = await asyncio.gather(*(_listed(s, who, agent, setup) for s in self._sources))
        return [tool for tools in listed for tool in tools]

    async def call(
        self,
        who: Principal,
        agent: Agent,
        name: str,
        arguments: dict[str, Any],
        ctx: ToolCallContext,
    ) -> str:
        source = self._source(name)
        if source is None:
            return f"error: no server-side tool named {name!r}"
        try:
            return await source.call(who, agent, name, arguments, ctx)
        except DomainError:
            raise  # the reply makes a result of it (or an auth challenge)
        except Exception:
            # a source's bug must not break the reply: the model reads a failure
            log.exception("the tool %s failed unexpectedly", name)
            return f"error: the tool {name!r} failed unexpectedly"


async def _listed(
    source: ServerTools, who: Principal, agent: Agent, setup: ToolSetup | None
) -> list[ToolSpec]:
    """One source's tools, or none when it cannot list them now."""
    try:
        return await source.list_tools(who, agent, setup)
    except DomainError as exc:
        log.warning(
            "tools of %s left out of a turn of agent %s: %s",
            type(source).__name__,
            agent.id,
            exc.detail,
        )
        return []
