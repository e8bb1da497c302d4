from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

import msgspec

from agentsvc_core.entities.message import ToolCall

RunStatus = Literal["running", "completed", "stopped", "failed", "interrupted", "requires_action"]


class Run(msgspec.Struct, frozen=True, kw_only=True):
    """One reply of the agent on a thread. At most one per thread is ``running``;
    the running process refreshes ``heartbeat_at`` so that a reply whose process
    died can be told from one that is merely slow (and marked ``interrupted``)."""

    id: UUID
    org_id: str
    thread_id: UUID
    status: RunStatus
    started_at: datetime
    heartbeat_at: datetime
    finished_at: datetime | None = None
    # Client-side tool calls the next send must answer (status requires_action).
    pending_tool_calls: tuple[ToolCall, ...] = ()
