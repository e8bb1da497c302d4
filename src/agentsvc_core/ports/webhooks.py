"""Webhook tools: where their definitions are kept, and the signed call that runs one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol
from uuid import UUID

import msgspec

from agentsvc_core.entities import WebhookTool

__all__ = ["WebhookAnswer", "WebhookCall", "WebhookCaller", "WebhookOutcome", "WebhookToolStore"]


class WebhookToolStore(Protocol):
    async def add(self, tool: WebhookTool) -> None:
        """Raises ``Conflict`` (code ``TOOL_NAME_TAKEN``) when the organization has a
        tool of that name."""
        ...

    async def get(self, org_id: str, tool_id: UUID) -> WebhookTool:
        """Raises ``NotFound``."""
        ...

    async def by_name(self, org_id: str, name: str) -> WebhookTool | None: ...

    async def by_ids(self, org_id: str, ids: Sequence[UUID]) -> list[WebhookTool]:
        """The organization's tools among ``ids`` (unknown ids left out), by name."""
        ...

    async def list_all(self, org_id: str) -> list[WebhookTool]:
        """By name."""
        ...

    async def replace(self, tool: WebhookTool, previous: WebhookTool) -> bool:
        """Store the changed tool if the stored one is still ``previous`` (its
        ``updated_at`` and sealed headers): False when it changed meanwhile. Raises
        ``NotFound``, or ``Conflict`` on a taken name."""
        ...

    async def delete(self, org_id: str, tool_id: UUID) -> None:
        """Raises ``NotFound``."""
        ...

    async def sealed_headers(self, org_id: str | None) -> list[tuple[str, UUID, str]]:
        """(org, id, sealed headers) of every tool with headers (all organizations
        when ``org_id`` is None: the key-rotation command)."""
        ...

    async def reseal(self, org_id: str, tool_id: UUID, old: str, new: str) -> bool:
        """Replace the sealed headers if they are still ``old``."""
        ...


class WebhookCall(msgspec.Struct, frozen=True, kw_only=True):
    url: str
    method: str
    headers: dict[str, str]  # the tool's own (opened), sent as configured
    body: bytes  # the JSON the service signs and sends
    secrets: list[str]  # the organization's signing secrets, newest first
    timeout_ms: int
    max_bytes: int
    idempotency_key: str | None = None


# ok: a 2xx answer within the limits; status: another status; the rest: no usable answer
WebhookOutcome = Literal["ok", "status", "timeout", "too_large", "refused", "unreachable"]


class WebhookAnswer(msgspec.Struct, frozen=True, kw_only=True):
    outcome: WebhookOutcome
    status_code: int | None = None
    body: str = ""  # the answer's text (UTF-8, invalid bytes replaced)
    content_type: str = ""
    reason: str = ""  # why there is no usable answer, readable, no secret
    duration_ms: int = 0


class WebhookCaller(Protocol):
    async def call(self, request: WebhookCall) -> WebhookAnswer:
        """Sign and send (``X-Service-*`` as the credential resolver), through the
        outbound guard, no redirects, bounded in time and size. Never raises for a
        failure of the call: the answer says what happened."""
        ...
