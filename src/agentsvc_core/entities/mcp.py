from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import msgspec

McpTransport = Literal["streamable_http", "sse", "stdio"]


class CachedTool(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    description: str = ""
    input_schema: dict[str, Any] = msgspec.field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )


class McpServer(msgspec.Struct, frozen=True, kw_only=True):
    """A tool server of an organization. ``credentials`` is sealed (SecretBox):
    the JSON of ``{"headers": {...}, "env": {...}}``, never stored in clear."""

    id: UUID
    org_id: str
    name: str
    slug: str
    transport: McpTransport
    url: str | None
    command: str | None
    args: tuple[str, ...]
    credentials: str | None
    allowed_tools: tuple[str, ...] | None
    status: str
    tools_cache: tuple[CachedTool, ...]
    created_at: datetime
    updated_at: datetime
    # the managed OAuth provider (``ports.managed_oauth``) this server is the
    # organization's connection to (one per organization and provider); None: a
    # server registered by hand
    managed_provider: str | None = None

    @property
    def has_credentials(self) -> bool:
        return self.credentials is not None


class McpAttachment(msgspec.Struct, frozen=True, kw_only=True):
    """An MCP server attached to an agent or to a runner (``owner_kind``)."""

    org_id: str
    owner_kind: Literal["agent", "runner"]
    owner_id: UUID
    mcp_id: UUID
    allowed_tools: tuple[str, ...] | None
    created_at: datetime
    # a managed provider's services turned on for this owner; None: all of them
    services: tuple[str, ...] | None = None
    # the server's tools (their names on the server) whose every call waits for a
    # person's approval (docs/tools.md, "Approval before a call")
    require_approval: tuple[str, ...] | None = None
