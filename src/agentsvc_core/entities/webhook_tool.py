"""A webhook tool: an organization's own HTTP endpoint offered to its agents' models."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import msgspec

WebhookMethod = Literal["POST", "PUT", "PATCH"]
# "always": each call the model makes waits for a person's approval (docs/tools.md)
WebhookApproval = Literal["never", "always"]


class WebhookTool(msgspec.Struct, frozen=True, kw_only=True):
    """``headers`` is sealed (SecretBox): the JSON of ``{name: value}``, never stored
    in clear; ``parameters`` is the JSON Schema (object root) of the arguments."""

    id: UUID
    org_id: str
    name: str
    description: str
    parameters: dict[str, Any]
    url: str
    method: WebhookMethod
    headers: str | None
    timeout_ms: int
    max_result_bytes: int
    created_at: datetime
    updated_at: datetime
    approval: WebhookApproval = "never"

    @property
    def has_headers(self) -> bool:
        return self.headers is not None
