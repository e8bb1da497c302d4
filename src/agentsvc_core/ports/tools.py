"""Server-side tools: executed by the service inside the turn (MCP, webhooks...)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from agentsvc_core.entities import Agent, McpAttachment, McpServer, Principal
from agentsvc_core.errors import DomainError
from agentsvc_core.ports.llm import ToolSpec


class ToolAuthRequired(DomainError):
    """The tool needs the user to complete an OAuth flow first (``auth_challenge``)."""

    def __init__(self, provider: str, redirect_url: str, description: str | None = None) -> None:
        super().__init__(f"authorization with {provider} is required")
        self.provider = provider
        self.redirect_url = redirect_url
        self.description = description


Attached = Sequence[tuple[McpAttachment, McpServer]]


class ServerTools(Protocol):
    async def list_tools(
        self, who: Principal, agent: Agent, attached: Attached | None = None
    ) -> list[ToolSpec]:
        """Every server-side tool the agent may use, before profile gating.
        ``attached``: the agent's MCP servers when the caller has read them
        already (the turn reads them with the thread)."""
        ...

    async def call(self, who: Principal, agent: Agent, name: str, arguments: dict[str, Any]) -> str:
        """Run one tool and return its result as text for the model. A tool that
        fails returns a readable error text (the model sees it, the stream goes
        on); raises ``ToolAuthRequired`` when the user must authorize first."""
        ...


class NoServerTools(ServerTools):
    """No server-side tools configured (before MCP and webhook tools exist)."""

    async def list_tools(
        self, who: Principal, agent: Agent, attached: Attached | None = None
    ) -> list[ToolSpec]:
        return []

    async def call(self, who: Principal, agent: Agent, name: str, arguments: dict[str, Any]) -> str:
        return f"error: no server-side tool named {name!r}"
