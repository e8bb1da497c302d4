"""Deleting threads, erasing and exporting what is stored about a user, and the
threads' retention (docs/privacy.md).

A thread is deleted in three steps: its running reply is stopped, in whichever
process runs it, and awaited (a bounded wait: a reply that does not end in time
refuses the deletion with ``THREAD_BUSY``, and nothing is deleted); storage removes
the thread with everything that holds its text and scrubs the text out of what
stays (``ErasureStore.erase_thread``, which refuses while a reply a send began
since runs: then the reply is stopped again, a few times at most); then each
``ThreadDataHolder`` outside storage deletes its part. Stopping first matters: a
reply's final write would otherwise store its events and trace after the deletion.

Who may: deleting a thread, its owner (the user who opened it) or an admin (API
keys are admins); a participant of a multiplayer thread may not. Erasing and
exporting a user: admins only.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Literal, Protocol
from uuid import UUID

import msgspec

from agentsvc_core.entities import Message, Principal, Thread
from agentsvc_core.entities.memory import Memory
from agentsvc_core.entities.published_chat import VisitorThread
from agentsvc_core.errors import Conflict, NotFound, PermissionDenied, ThreadBusy
from agentsvc_core.ports import Clock, ConversationStore, SecretStore, ThreadRepository
from agentsvc_core.ports.erasure import ErasureStore, ThreadDataHolder
from agentsvc_core.ports.publishing import PublishingStore
from agentsvc_core.rules import MAX_USER_ID, check_text
from agentsvc_core.use_cases.threads import Threads

log = logging.getLogger("agentsvc.erasure")

GRANT_KIND = "oauth_token"  # the sealed records of OAuth grants (mcp_oauth.py)
HISTORY_PAGE = 200  # messages read per page for an export
SWEEP_BATCH = 100  # threads the retention sweep deletes per call
SWEEP_EVERY = timedelta(hours=1)  # between two retention sweeps that found less than a batch
ERASE_TRIES = 3  # stops of a thread's replies before a deletion gives up (sends racing it)


class ReplyStopper(Protocol):
    """Stops a thread's running reply and waits for its end (``Conversation.halting``)."""

    async def halt(self, org_id: str, thread_id: UUID, wait_s: float) -> bool: ...


class UserErasure(msgspec.Struct, frozen=True, kw_only=True):
    """What erasing a user removed, by kind (zeros when there was nothing left)."""

    user_id: str
    threads: int  # threads the user opened, or opened as a visitor
    visitor_sessions: int  # of those, the ones opened through a published chat
    memories: int  # user-scoped memories, of every agent
    oauth_grants: int  # OAuth grants of MCP servers (tokens), managed ones too
    participations: int  # places in other people's multiplayer threads


class ThreadExport(msgspec.Struct, frozen=True, kw_only=True):
    thread: Thread
    messages: list[Message]


class GrantExport(msgspec.Struct, frozen=True, kw_only=True):
    """An OAuth grant, named; its tokens are sealed and never exported."""

    kind: Literal["mcp", "managed"]
    mcp_id: str | None = None
    provider: str | None = None
    expires_at: datetime | None = None


class UserExport(msgspec.Struct, frozen=True, kw_only=True):
    user_id: str
    exported_at: datetime
    threads: list[ThreadExport]
    memories: list[Memory]
    oauth_grants: list[GrantExport]
    visitor_sessions: list[VisitorThread]


def grant_owner(key: str) -> tuple[str, str] | None:
    """(the grant's place, its user) of an ``oauth_token`` record's key: a user's
    grant is ``{mcp id}:user:{id}`` or ``managed:{provider}:user:{id}``; None for
    the organization's (``...:org``)."""
    place, sep, user = key.partition(":user:")
    return (place, user) if sep and user else None


def _grant(place: str, expires_at: datetime | None) -> GrantExport:
    if place.startswith("managed:"):
        return GrantExport(kind="managed", provider=place[len("managed:") :], expires_at=expires_at)
    return GrantExport(kind="mcp", mcp_id=place, expires_at=expires_at)


class Erasure:
    def __init__(
        self,
        threads: Threads,
        store: ErasureStore,
        *,
        thread_repo: ThreadRepository,
        conversations: ConversationStore,
        secrets: SecretStore,
        publishing: PublishingStore,
        replies: ReplyStopper,
        clock: Clock,
        holders: Sequence[ThreadDataHolder] = (),
        stop_wait_s: float = 10.0,
        stale_after_s: float = 45.0,
    ) -> None:
        """``holders``: what keeps a thread's text outside storage (each deletes its
        part after storage did); ``stop_wait_s``: how long a deletion waits for the
        thread's stopped reply to end; ``stale_after_s``: a running reply whose
        heartbeat is older is taken for dead (``Conversation``'s setting)."""
        self._stale_after = timedelta(seconds=stale_after_s)
        self._next_sweep: datetime | None = None  # no retention sweep before then
        self._threads = threads
        self._store = store
        self._thread_repo = thread_repo
        self._conversations = conversations
        self._secrets = secrets
        self._publishing = publishing
        self._replies = replies
        self._clock = clock
        self._holders = tuple(holders)
        self._stop_wait_s = stop_wait_s

    # --- threads ----------------------------------------------------------------

    async def delete_thread(self, who: Principal, thread_id: UUID) -> None:
        """Delete the thread (``NotFound`` when there is none, ``PermissionDenied``
        unless ``who`` opened it or is an admin)."""
        thread = await self._threads.visible(who, thread_id)
        if not who.is_admin and thread.created_by != who.user_id:
            raise PermissionDenied("only the thread's owner or an admin deletes it")
        if not await self.erase(who.org_id, thread_id):
            raise NotFound("thread not found")

    async def erase(self, org_id: str, thread_id: UUID) -> bool:
        """Stop the thread's reply, then delete the thread and what holds its text;
        False when the thread was gone already (the holders are asked anyway)."""
        for _ in range(ERASE_TRIES):
            if not await self._replies.halt(org_id, thread_id, self._stop_wait_s):
                break
            busy_after = self._clock.now() - self._stale_after
            try:
                erased = await self._store.erase_thread(org_id, thread_id, busy_after)
            except ThreadBusy:
                continue  # a send began a reply since: stop that one too
            for holder in self._holders:
                await holder.delete_for_thread(org_id, thread_id)
            return erased
        raise Conflict(
            "the thread's reply did not stop in time; nothing was deleted: try again",
            code="THREAD_BUSY",
        )

    async def sweep(self) -> int:
        """Delete up to ``SWEEP_BATCH`` threads untouched for longer than their
        organization's retention (the maintenance sweep); how many. A thread whose
        reply does not stop in time is left for the next sweep. The search for such
        threads reads every thread older than a retention, so after one that found
        less than a batch the next waits ``SWEEP_EVERY``; after a full batch, the
        next sweep goes on at once."""
        now = self._clock.now()
        if self._next_sweep is not None and now < self._next_sweep:
            return 0
        stale = await self._store.stale_threads(now, SWEEP_BATCH)
        self._next_sweep = None if len(stale) >= SWEEP_BATCH else now + SWEEP_EVERY
        deleted = 0
        for found in stale:
            try:
                deleted += await self.erase(found.org_id, found.thread_id)
            except Conflict:
                log.info("thread %s is busy: a later sweep deletes it", found.thread_id)
        return deleted

    # --- users ------------------------------------------------------------------

    @staticmethod
    def _admin(who: Principal, user_id: str) -> None:
        if not who.is_admin:
            raise PermissionDenied("a user's data is erased and exported by an admin")
        check_text("user_id", user_id, max_len=MAX_USER_ID, required=True)

    async def _grants(self, org_id: str, user_id: str) -> list[tuple[str, str, datetime | None]]:
        """(key, place, expiry) of the user's OAuth grant records."""
        found = []
        for _, kind, key, record in await self._secrets.every(org_id):
            owner = grant_owner(key) if kind == GRANT_KIND else None
            if owner is not None and owner[1] == user_id:
                found.append((key, owner[0], record.expires_at))
        return sorted(found)

    async def erase_user(self, who: Principal, user_id: str) -> UserErasure:
        """Remove every thread the user owns, their user-scoped memories, OAuth
        grants and places in others' threads; safe to repeat (then all zeros)."""
        self._admin(who, user_id)
        org = who.org_id
        threads = visitor = 0
        for owned in await self._store.user_threads(org, user_id):
            if await self.erase(org, owned.thread_id):
                threads += 1
                visitor += owned.visitor
        grants = 0
        for key, _, _ in await self._grants(org, user_id):
            grants += await self._secrets.take(org, GRANT_KIND, key) is not None
        return UserErasure(
            user_id=user_id,
            threads=threads,
            visitor_sessions=visitor,
            memories=await self._store.delete_user_memories(org, user_id),
            oauth_grants=grants,
            participations=await self._store.leave_threads(org, user_id),
        )

    async def _messages(self, org_id: str, thread_id: UUID) -> list[Message]:
        found: list[Message] = []
        while True:
            page, total = await self._conversations.history(
                org_id, thread_id, offset=len(found), limit=HISTORY_PAGE
            )
            found += page
            if not page or len(found) >= total:
                return found

    async def export_user(self, who: Principal, user_id: str) -> UserExport:
        """Everything stored about the user, in one document (no secret)."""
        self._admin(who, user_id)
        org = who.org_id
        threads: list[ThreadExport] = []
        sessions: list[VisitorThread] = []
        for owned in await self._store.user_threads(org, user_id):
            try:
                thread = await self._thread_repo.get(org, owned.thread_id)
            except NotFound:
                continue  # deleted meanwhile
            messages = await self._messages(org, owned.thread_id)
            threads.append(ThreadExport(thread=thread, messages=messages))
            if owned.visitor:
                session = await self._publishing.visitor_thread(org, owned.thread_id)
                if session is not None:
                    sessions.append(session)
        return UserExport(
            user_id=user_id,
            exported_at=self._clock.now(),
            threads=threads,
            memories=await self._store.user_memories(org, user_id),
            oauth_grants=[_grant(place, exp) for _, place, exp in await self._grants(org, user_id)],
            visitor_sessions=sessions,
        )
