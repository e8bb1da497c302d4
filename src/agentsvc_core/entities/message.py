from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import msgspec

Role = Literal["user", "assistant", "tool"]
# How an assistant message ended: complete, stopped by the user, or cut short by
# a provider failure or a crash. The history shows all of them as they were seen.
MessageStatus = Literal["complete", "stopped", "failed", "interrupted"]


class ToolCall(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A call the model made. ``approval``: set only on the calls a run waits for
    (``Run.pending_tool_calls``) that wait for a person's approval rather than for
    the client's result (docs/tools.md, "Approval before a call")."""

    id: str
    name: str
    arguments: dict[str, Any]
    approval: bool = False


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
    # The message this one follows on its branch; None: the one stored before it
    # (every message of a thread that never branched, use_cases/branches.py).
    parent_id: UUID | None = None


def visible_in_history(m: Message) -> bool:
    """Whether the history endpoint shows ``m`` (``ConversationStore.history``):
    user and assistant messages, except assistant steps that only called tools or
    only carried a provider block (a paused native compaction). A rule of the
    domain, so every storage adapter applies the same one (PostgreSQL stores it as
    the message's ``visible`` column; the memory adapter filters by it)."""
    if m.role == "user":
        return True
    return m.role == "assistant" and (bool(m.content) or not (m.tool_calls or m.provider_blocks))
