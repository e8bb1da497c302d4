"""Webhook tool definitions in memory."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

import msgspec

from agentsvc_core.entities import WebhookTool
from agentsvc_core.errors import Conflict, NotFound
from agentsvc_core.ports import WebhookToolStore

TAKEN = "TOOL_NAME_TAKEN"


class MemoryWebhookTools(WebhookToolStore):
    def __init__(self) -> None:
        self._tools: dict[tuple[str, UUID], WebhookTool] = {}

    def _taken(self, tool: WebhookTool) -> bool:
        return any(
            t.name == tool.name and t.id != tool.id
            for (o, _), t in self._tools.items()
            if o == tool.org_id
        )

    async def add(self, tool: WebhookTool) -> None:
        if self._taken(tool):
            raise Conflict(f"a tool named {tool.name!r} exists", code=TAKEN)
        self._tools[(tool.org_id, tool.id)] = tool

    async def get(self, org_id: str, tool_id: UUID) -> WebhookTool:
        try:
            return self._tools[(org_id, tool_id)]
        except KeyError:
            raise NotFound("tool not found") from None

    async def by_name(self, org_id: str, name: str) -> WebhookTool | None:
        return next(
            (t for (o, _), t in self._tools.items() if o == org_id and t.name == name), None
        )

    async def by_ids(self, org_id: str, ids: Sequence[UUID]) -> list[WebhookTool]:
        found = [self._tools[(org_id, i)] for i in set(ids) if (org_id, i) in self._tools]
        return sorted(found, key=lambda t: t.name)

    async def list_all(self, org_id: str) -> list[WebhookTool]:
        return sorted((t for (o, _), t in self._tools.items() if o == org_id), key=lambda t: t.name)

    async def replace(self, tool: WebhookTool, previous: WebhookTool) -> bool:
        stored = await self.get(tool.org_id, tool.id)
        if (stored.updated_at, stored.headers) != (previous.updated_at, previous.headers):
            return False
        if self._taken(tool):
            raise Conflict(f"a tool named {tool.name!r} exists", code=TAKEN)
        self._tools[(tool.org_id, tool.id)] = tool
        return True

    async def delete(self, org_id: str, tool_id: UUID) -> None:
        await self.get(org_id, tool_id)
        del self._tools[(org_id, tool_id)]

    async def sealed_headers(self, org_id: str | None) -> list[tuple[str, UUID, str]]:
        return [
            (o, i, t.headers)
            for (o, i), t in self._tools.items()
            if t.headers is not None and (org_id is None or o == org_id)
        ]

    async def reseal(self, org_id: str, tool_id: UUID, old: str, new: str) -> bool:
        tool = self._tools.get((org_id, tool_id))
        if tool is None or tool.headers != old:
            return False
        self._tools[(org_id, tool_id)] = msgspec.structs.replace(tool, headers=new)
        return True
