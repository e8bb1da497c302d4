"""Storage of channels, their contacts, which thread each external chat is, and the
inbound events they received (``Storage.channels``; docs/channels.md).

Everything is scoped by organization but ``find``, the public inbound endpoint's
one read (the channel id in its path names the channel, whatever the
organization). A channel goes with its agent; its contacts, chats and events go
with it; a chat's thread mapping goes with its thread.

Three writes are race-free by a unique key rather than a check-then-insert:

- ``add``: at most one ``whatsapp_web`` channel per agent (``Conflict`` with code
  ``CHANNEL_TYPE_TAKEN``), since its QR route is keyed by type;
- ``claim_chat``: one thread per (channel, external chat): the first thread
  claimed wins and every caller gets it;
- ``record_event``: one event per (channel, platform event id): a redelivered
  event inserts nothing (insert-or-nothing, not check-then-insert).

Adapters raise what storage raises (``NotFound``, ``StorageError``, ``Unavailable``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol
from uuid import UUID

from agentsvc_core.entities.channel import Channel, ChannelEvent, Contact, EventState

__all__ = ["ChannelStore"]


class ChannelStore(Protocol):
    # --- channels ---------------------------------------------------------------

    async def add(self, channel: Channel) -> Channel:
        """Store a new channel. Raises ``NotFound`` when the agent is gone,
        ``Conflict`` (``CHANNEL_TYPE_TAKEN``) for a second ``whatsapp_web`` of an agent."""
        ...

    async def get(self, org_id: str, channel_id: UUID) -> Channel:
        """Raises ``NotFound`` (also for another organization's channel)."""
        ...

    async def find(self, channel_id: UUID) -> Channel | None:
        """The channel of that id, whatever its organization (the public inbound
        endpoint's lookup), or None."""
        ...

    async def of_agent(self, org_id: str, agent_id: UUID) -> list[Channel]:
        """The agent's channels, oldest first."""
        ...

    async def modify(
        self, org_id: str, channel_id: UUID, change: Callable[[Channel], Channel]
    ) -> Channel:
        """Atomic read-change-write (concurrent changes are serialised: none is
        lost). Raises ``NotFound``."""
        ...

    async def delete(self, org_id: str, channel_id: UUID) -> bool:
        """Delete the channel with its contacts, chats and events (the threads
        stay); False when there was none."""
        ...

    # --- contacts ---------------------------------------------------------------

    async def upsert_contact(self, contact: Contact) -> tuple[Contact, bool]:
        """Store ``contact`` unless the channel has one with its ``external_id``;
        then update that one's ``last_message_at`` and, where ``contact`` carries
        them, its display name, username and thread (status, code and
        ``first_seen_at`` stay). The stored contact, and True when it is new. One
        statement: two first messages of a sender racing make one contact."""
        ...

    async def contact(self, org_id: str, channel_id: UUID, contact_id: UUID) -> Contact:
        """Raises ``NotFound``."""
        ...

    async def contacts(
        self,
        org_id: str,
        channel_id: UUID,
        *,
        before: tuple[datetime, UUID] | None,
        limit: int,
    ) -> list[Contact]:
        """The channel's contacts, newest first (by ``first_seen_at``, then id),
        those before ``before``."""
        ...

    async def modify_contact(
        self, org_id: str, channel_id: UUID, contact_id: UUID, change: Callable[[Contact], Contact]
    ) -> Contact:
        """Atomic read-change-write. Raises ``NotFound``."""
        ...

    # --- chats: one thread per (channel, external chat) ----------------------------

    async def chat_thread(self, org_id: str, channel_id: UUID, chat_id: str) -> UUID | None:
        """The chat's thread, or None (none yet, or its thread was deleted)."""
        ...

    async def claim_chat(
        self, org_id: str, channel_id: UUID, chat_id: str, thread_id: UUID
    ) -> UUID:
        """Make ``thread_id`` the chat's thread unless it has one: the chat's
        thread, which is another when a concurrent caller claimed first (the
        caller's thread is then its to delete). Raises ``NotFound`` when the
        channel or the thread is gone."""
        ...

    # --- inbound events -------------------------------------------------------------

    async def record_event(self, event: ChannelEvent) -> bool:
        """Store an inbound event unless the channel has one with its ``event_id``:
        True when stored, False (nothing written) for a redelivery. Raises
        ``NotFound`` when the channel is gone."""
        ...

    async def event(self, org_id: str, channel_id: UUID, event_id: str) -> ChannelEvent | None: ...

    async def events(
        self,
        org_id: str,
        channel_id: UUID,
        *,
        before: tuple[datetime, str] | None,
        limit: int,
        state: EventState | None = None,
    ) -> list[ChannelEvent]:
        """The channel's inbound messages, newest first (by ``created_at``, then
        ``event_id``), those before ``before``; only those in ``state`` if given."""
        ...

    async def save_event(self, event: ChannelEvent) -> None:
        """Overwrite the stored event's progress (state, contact, thread, run,
        reply, parts sent, attempts, error). One job at a time works on an event
        (the job queue's key is the event's), so a plain write loses nothing.
        Nothing happens when the event is gone (its channel was deleted)."""
        ...
