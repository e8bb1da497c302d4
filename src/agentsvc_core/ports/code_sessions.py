"""Storage of code agents, code sessions and the sessions' timelines
(``Storage.code_sessions``; docs/code-agents.md).

Everything is scoped by organization. A session's timeline is append-only: its
events are numbered 1, 2, ... per session, and ``change`` writes a session's new
state and the events that say what happened in one atomic step (the session's
``last_event_seq`` is the last event's ``seq``), so a follower that read up to an
event never misses one written before it, and two writers (the job and a
``cancel``) are serialised: none is lost. A code agent's deletion leaves its
sessions (they carry what they need of it).

Adapters raise what storage raises (``NotFound``, ``StorageError``, ``Unavailable``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

import msgspec

from agentsvc_core.entities.code_session import CodeAgent, CodeSession, EventType, SessionEvent

__all__ = ["Change", "CodeSessionStore", "NewEvent"]


class NewEvent(msgspec.Struct, frozen=True):
    """An event to append (the store numbers it)."""

    type: EventType
    data: dict[str, Any]


# what a change makes of the session as stored: the new session and the events
# to append, or None (nothing to write)
Change = Callable[[CodeSession], tuple[CodeSession, Sequence[NewEvent]] | None]


class CodeSessionStore(Protocol):
    # --- code agents ------------------------------------------------------------

    async def add_agent(self, agent: CodeAgent) -> CodeAgent: ...

    async def get_agent(self, org_id: str, agent_id: UUID) -> CodeAgent:
        """Raises ``NotFound`` (also for another organization's)."""
        ...

    async def agents(self, org_id: str) -> list[CodeAgent]:
        """The organization's code agents, oldest first."""
        ...

    async def modify_agent(
        self, org_id: str, agent_id: UUID, change: Callable[[CodeAgent], CodeAgent]
    ) -> CodeAgent:
        """Atomic read-change-write. Raises ``NotFound``."""
        ...

    async def delete_agent(self, org_id: str, agent_id: UUID) -> bool:
        """False when there was none; its sessions stay."""
        ...

    # --- sessions ---------------------------------------------------------------

    async def add_session(
        self, session: CodeSession, events: Sequence[NewEvent]
    ) -> tuple[CodeSession, list[SessionEvent]]:
        """Store a new session with its first events (``last_event_seq`` set)."""
        ...

    async def get_session(self, org_id: str, session_id: UUID) -> CodeSession:
        """Raises ``NotFound``."""
        ...

    async def sessions(
        self,
        org_id: str,
        *,
        before: tuple[datetime, UUID] | None,
        limit: int,
        code_agent_id: UUID | None = None,
    ) -> list[CodeSession]:
        """Newest first (``created_at``, then id), those before ``before``."""
        ...

    async def change(
        self, org_id: str, session_id: UUID, change: Change
    ) -> tuple[CodeSession, list[SessionEvent]]:
        """Apply ``change`` to the stored session and append its events, atomically
        (the session locked meanwhile): the session as stored after, and the events
        appended (none when ``change`` answered None). Raises ``NotFound``."""
        ...

    async def events(
        self, org_id: str, session_id: UUID, *, after: int, limit: int
    ) -> list[SessionEvent]:
        """The session's events with ``seq > after``, oldest first, at most ``limit``
        (the session's existence is the caller's to check)."""
        ...
