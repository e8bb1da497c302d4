"""Storage of deletion and erasure (``Storage.erasure``; docs/privacy.md).

``erase_thread`` removes a thread and everything that holds its text, in one
step per storage (one transaction in PostgreSQL): its messages, runs, stored
stream events, participants, thread-scoped memories and knowledge, plans,
channel chat mappings, visitor record and the idempotency keys of its sends; it
scrubs the text out of what stays (its traces' span payloads, its runner runs'
outputs, its channels' inbound messages); usage records (tokens and costs, no
text) stay, so analytics still adds up.

What lives outside storage and holds a thread's text (another service's events,
say) is a ``ThreadDataHolder``: the erasure use case calls each one it is given.

Every call is scoped by organization. Adapters raise what storage raises
(``StorageError``, ``Unavailable``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol
from uuid import UUID

import msgspec

from agentsvc_core.entities.memory import Memory

__all__ = ["ErasureStore", "StaleThread", "ThreadDataHolder", "UserThread"]


class UserThread(msgspec.Struct, frozen=True, kw_only=True):
    """A thread a user owns: one they opened, or one they opened as the visitor of
    a published chat (``visitor``: True)."""

    thread_id: UUID
    visitor: bool


class StaleThread(msgspec.Struct, frozen=True, kw_only=True):
    org_id: str
    thread_id: UUID


class ThreadDataHolder(Protocol):
    """Something besides storage that keeps a thread's text."""

    async def delete_for_thread(self, org_id: str, thread_id: UUID) -> int:
        """Delete (or scrub) what it keeps of the thread; how many items. Safe to
        repeat: a second call answers 0."""
        ...


class ErasureStore(Protocol):
    async def erase_thread(self, org_id: str, thread_id: UUID, busy_after: datetime) -> bool:
        """Remove the thread and what holds its text, scrub what stays (the
        module's docstring), all at once; False when there was no such thread
        (nothing changed). Refused with ``ThreadBusy`` (nothing changed) while the
        thread has a running reply whose heartbeat is at or after ``busy_after``
        (one a send began after the caller stopped the last); a send that begins
        while the erasure runs finds no thread."""
        ...

    async def user_threads(self, org_id: str, user_id: str) -> list[UserThread]:
        """The threads the user opened (``created_by``) and those a published
        chat's visitor of that id opened, oldest first."""
        ...

    async def user_memories(self, org_id: str, user_id: str) -> list[Memory]:
        """Every memory of the user scope for ``user_id`` (any agent, any status),
        oldest first."""
        ...

    async def delete_user_memories(self, org_id: str, user_id: str) -> int:
        """Delete them; how many."""
        ...

    async def leave_threads(self, org_id: str, user_id: str) -> int:
        """Remove the user from the participants of every thread; how many rows."""
        ...

    async def retention_days(self, org_id: str) -> int | None:
        """The organization's thread retention (None: threads are kept)."""
        ...

    async def set_retention_days(self, org_id: str, days: int | None) -> None: ...

    async def stale_threads(self, now: datetime, limit: int) -> list[StaleThread]:
        """Threads of every organization with a retention whose last change, last
        message and last reply are all older than that many days before ``now``
        (oldest first, at most ``limit``)."""
        ...
