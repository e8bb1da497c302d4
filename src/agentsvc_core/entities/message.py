from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import msgspec

Role = Literal["user", "assistant", "tool"]
# How an assistant message ended: complete, stopped by the user, or cut short by
# a provider failure or a crash. The history shows all of them as they were seen.
MessageStatus = Literal["complete", "stopped", "failed", "interrupted"]


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    name: str
    arguments: dict[str, Any]


class Message(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of a thread's history. ``tool`` messages (results of tool calls)
    and the ``tool_calls`` of assistant messages are kept for the model's context;
    the history endpoint shows only user and assistant messages."""

    id: UUID
    org_id: str
    thread_id: UUID
    role: Role
    content: str
    created_at: datetime
    sender_name: str | None = None
    sender_id: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    status: MessageStatus = "complete"
    run_id: UUID | None = None
    # Provider blocks to send back verbatim (a native compaction block); the model
    # is not sent what came before the latest message carrying one.
    provider_blocks: tuple[dict[str, Any], ...] = ()
