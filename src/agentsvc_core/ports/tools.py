"""Server-side tools: executed by the service inside the turn (MCP servers, webhook
tools, database integrations, web, plans...).

Every kind of server-side tool is a ``ServerTools`` of its own (a *source*); the
turn sees one, ``use_cases/server_tools.ToolHub``, which offers the union and routes
each call to the source that ``owns`` its name. Names never collide across sources:

- MCP tools are ``<server slug>__<tool>`` (slugs are ``[a-z0-9-]``);
- database integration tools are ``db_<integration slug>__<tool>`` (an underscore
  no MCP slug has);
- built-in tools (``web_fetch``, ``plan_create``...) and webhook tools have no
  ``__``; webhook tool names may not take a built-in name or prefix
  (``RESERVED_TOOL_PREFIXES``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol
from uuid import UUID

import msgspec

from agentsvc_core.entities import Agent, McpAttachment, McpServer, Principal
from agentsvc_core.entities.skill import SkillBinding
from agentsvc_core.errors import DomainError
from agentsvc_core.ports.llm import ToolSpec
from agentsvc_core.ports.sealed import SealedRecord

__all__ = [
    "RESERVED_TOOL_PREFIXES",
    "TOOL_SEPARATOR",
    "Attached",
    "NoServerTools",
    "ServerTools",
    "ToolAuthRequired",
    "ToolCallContext",
    "ToolSetup",
]

TOOL_SEPARATOR = "__"
# names (and prefixes) of the built-in tools: a webhook tool cannot take them
RESERVED_TOOL_PREFIXES = (
    "plan_",
    "todo_",
    "web_",
    "knowledge_",
    "memory_",
    "skill_",
    "computer_",
    "propose_",
    "db_",
    "load_skill",
)


class ToolAuthRequired(DomainError):
    """The tool needs the user to complete an OAuth flow first (``auth_challenge``)."""

    def __init__(self, provider: str, redirect_url: str, description: str | None = None) -> None:
        super().__init__(f"authorization with {provider} is required")
        self.provider = provider
        self.redirect_url = redirect_url
        self.description = description


Attached = Sequence[tuple[McpAttachment, McpServer]]


class ToolSetup(msgspec.Struct, frozen=True, kw_only=True):
    """What the turn read with the thread about the agent's tools: its MCP servers
    and its sealed configuration records by kind (the kinds the sources ask for in
    ``ServerTools.kinds``; a kind never stored is absent: its defaults apply)."""

    mcp: Attached = ()
    records: dict[str, SealedRecord] = {}
    thread_id: UUID | None = None  # the turn's thread
    skills: tuple[SkillBinding, ...] = ()  # a runner's skills, besides the agent's


class ToolCallContext(msgspec.Struct, frozen=True, kw_only=True):
    """Where a tool call happens. ``setup`` is the turn's read (``None`` outside a
    turn, as in ``POST /api/tools/execute``: a source then reads what it needs)."""

    tool_call_id: str
    thread_id: UUID | None = None
    user_id: str | None = None  # who sent the message the reply answers
    setup: ToolSetup | None = None


class ServerTools(Protocol):
    """A source of server-side tools. Each source says which names it owns and
    whether they are extensions: the port claims nothing for it (a source that
    claimed every name would take the calls of the sources after it), so mypy
    refuses a source that leaves them out. The one default, ``kinds``, reads no
    record."""

    # the agent's sealed record kinds this source reads with the turn (``ToolSetup``)
    kinds: tuple[str, ...] = ()

    def owns(self, name: str) -> bool:
        """Whether a tool of this name would be this source's (by its shape alone:
        the naming rule above keeps two sources from owning one name)."""
        ...

    def is_extension(self, name: str) -> bool:
        """Whether the tool runs on somebody else's server speaking a tool protocol
        (MCP): traced as ``mcp``, else ``tool``."""
        ...

    async def list_tools(
        self, who: Principal, agent: Agent, setup: ToolSetup | None = None
    ) -> list[ToolSpec]:
        """Every tool of this source the agent may use, before profile gating.
        ``setup``: what the turn has read already (``None``: read it). The turn
        lists every source at once: a source shares no state with another."""
        ...

    async def call(
        self,
        who: Principal,
        agent: Agent,
        name: str,
        arguments: dict[str, Any],
        ctx: ToolCallContext,
    ) -> str:
        """Run one tool and return its result as text for the model. A tool that
        fails returns a readable error text starting ``error:`` (the model sees it,
        the stream goes on); raises ``ToolAuthRequired`` when the user must
        authorize first."""
        ...


class NoServerTools(ServerTools):
    """No server-side tools configured."""

    kinds: tuple[str, ...] = ()

    def owns(self, name: str) -> bool:
        return False

    def is_extension(self, name: str) -> bool:
        return False

    async def list_tools(
        self, who: Principal, agent: Agent, setup: ToolSetup | None = None
    ) -> list[ToolSpec]:
        return []

    async def call(
        self,
        who: Principal,
        agent: Agent,
        name: str,
        arguments: dict[str, Any],
        ctx: ToolCallContext,
    ) -> str:
        return f"error: no server-side tool named {name!r}"
