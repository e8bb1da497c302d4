from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import msgspec

ThreadKind = Literal["single", "multiplayer"]
ParticipantRole = Literal["owner", "member"]


class Thread(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    org_id: str
    agent_id: UUID
    title: str | None
    kind: ThreadKind
    status: str
    active_profile: str | None
    # Already joined (arrays are joined with a blank line on the way in).
    system_prompt_overlay: str | None
    metadata: dict[str, str]
    resource_bindings: list[dict[str, Any]]
    # The JWT user who opened it (None for API-key callers): a JWT caller sees only
    # the single threads it opened.
    created_by: str | None
    created_at: datetime
    updated_at: datetime
    # The current branch's last message, once the thread has branches (an edit, a
    # regenerate): None while its history is one line, the messages in the order
    # stored (use_cases/branches.py).
    head_id: UUID | None = None
    # The reply running now (None when idle): read with the thread for its callers,
    # never stored with it.
    active_run_id: UUID | None = None


class Participant(msgspec.Struct, frozen=True, kw_only=True):
    org_id: str
    thread_id: UUID
    user_id: str
    display_name: str | None
    role: ParticipantRole
    added_at: datetime
