"""Channels, contacts, chats and inbound events in memory: the agent's and the
thread's existence and the unique keys are checked as PostgreSQL's foreign keys
and unique indexes do (migration 0022). Every method runs without an ``await``
between its read and its write, so on one event loop each is atomic."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from uuid import UUID

import msgspec

from agentsvc_core.entities.channel import Channel, ChannelEvent, Contact, EventState
from agentsvc_core.entities.erasure import event_without_text
from agentsvc_core.errors import Conflict, NotFound
from agentsvc_core.ports.channels import ChannelStore

Exists = Callable[[str, UUID], bool]


class MemoryChannels(ChannelStore):
    def __init__(self, agent_exists: Exists, thread_exists: Exists) -> None:
        self._agent_exists = agent_exists
        self._thread_exists = thread_exists
        self._channels: dict[UUID, Channel] = {}
        self._contacts: dict[UUID, Contact] = {}
        self._chats: dict[tuple[UUID, str], UUID] = {}
        self._events: dict[tuple[UUID, str], ChannelEvent] = {}

    def drop_agent(self, org_id: str, agent_id: UUID) -> None:
        owner = (org_id, agent_id)
        for c in [c for c in self._channels.values() if (c.org_id, c.agent_id) == owner]:
            self._drop(c.id)

    def drop_thread(self, org_id: str, thread_id: UUID) -> None:
        """A thread's chat mappings go with it; its contacts forget it; its inbound
        messages keep their place without their text."""
        for key in [k for k, t in self._chats.items() if t == thread_id]:
            c = self._channels.get(key[0])
            if c is None or c.org_id == org_id:
                del self._chats[key]
        for cid, contact in list(self._contacts.items()):
            if contact.org_id == org_id and contact.thread_id == thread_id:
                self._contacts[cid] = msgspec.structs.replace(contact, thread_id=None)
        for key, event in list(self._events.items()):
            if event.org_id == org_id and event.thread_id == thread_id:
                self._events[key] = event_without_text(event)

    def _drop(self, channel_id: UUID) -> None:
        self._channels.pop(channel_id, None)
        for cid in [k for k, c in self._contacts.items() if c.channel_id == channel_id]:
            del self._contacts[cid]
        for key in [k for k in self._chats if k[0] == channel_id]:
            del self._chats[key]
        for key in [k for k in self._events if k[0] == channel_id]:
            del self._events[key]

    def _mine(self, org_id: str, channel_id: UUID) -> Channel:
        found = self._channels.get(channel_id)
        if found is None or found.org_id != org_id:
            raise NotFound("channel not found")
        return found

    async def add(self, channel: Channel) -> Channel:
        if not self._agent_exists(channel.org_id, channel.agent_id):
            raise NotFound("agent not found")
        owner = (channel.org_id, channel.agent_id)
        if channel.type == "whatsapp_web" and any(
            c.type == "whatsapp_web" and (c.org_id, c.agent_id) == owner
            for c in self._channels.values()
        ):
            raise Conflict("the agent has a whatsapp_web channel", code="CHANNEL_TYPE_TAKEN")
        self._channels[channel.id] = channel
        return channel

    async def get(self, org_id: str, channel_id: UUID) -> Channel:
        return self._mine(org_id, channel_id)

    async def find(self, channel_id: UUID) -> Channel | None:
        return self._channels.get(channel_id)

    async def of_agent(self, org_id: str, agent_id: UUID) -> list[Channel]:
        mine = [c for c in self._channels.values() if (c.org_id, c.agent_id) == (org_id, agent_id)]
        return sorted(mine, key=lambda c: (c.created_at, c.id))

    async def modify(
        self, org_id: str, channel_id: UUID, change: Callable[[Channel], Channel]
    ) -> Channel:
        changed = change(self._mine(org_id, channel_id))
        self._channels[channel_id] = changed
        return changed

    async def delete(self, org_id: str, channel_id: UUID) -> bool:
        found = self._channels.get(channel_id)
        if found is None or found.org_id != org_id:
            return False
        self._drop(channel_id)
        return True

    async def upsert_contact(self, contact: Contact) -> tuple[Contact, bool]:
        self._mine(contact.org_id, contact.channel_id)
        stored = next(
            (
                c
                for c in self._contacts.values()
                if c.channel_id == contact.channel_id and c.external_id == contact.external_id
            ),
            None,
        )
        if stored is None:
            self._contacts[contact.id] = contact
            return contact, True
        updated = msgspec.structs.replace(
            stored,
            display_name=contact.display_name or stored.display_name,
            username=contact.username or stored.username,
            thread_id=contact.thread_id or stored.thread_id,
            last_message_at=contact.last_message_at or stored.last_message_at,
        )
        self._contacts[stored.id] = updated
        return updated, False

    def _contact(self, org_id: str, channel_id: UUID, contact_id: UUID) -> Contact:
        found = self._contacts.get(contact_id)
        if found is None or found.org_id != org_id or found.channel_id != channel_id:
            raise NotFound("contact not found")
        return found

    async def contact(self, org_id: str, channel_id: UUID, contact_id: UUID) -> Contact:
        return self._contact(org_id, channel_id, contact_id)

    async def contacts(
        self,
        org_id: str,
        channel_id: UUID,
        *,
        before: tuple[datetime, UUID] | None,
        limit: int,
    ) -> list[Contact]:
        mine = [
            c
            for c in self._contacts.values()
            if c.org_id == org_id
            and c.channel_id == channel_id
            and (before is None or (c.first_seen_at, c.id) < before)
        ]
        mine.sort(key=lambda c: (c.first_seen_at, c.id), reverse=True)
        return mine[:limit]

    async def modify_contact(
        self, org_id: str, channel_id: UUID, contact_id: UUID, change: Callable[[Contact], Contact]
    ) -> Contact:
        changed = change(self._contact(org_id, channel_id, contact_id))
        self._contacts[contact_id] = changed
        return changed

    async def chat_thread(self, org_id: str, channel_id: UUID, chat_id: str) -> UUID | None:
        found = self._channels.get(channel_id)
        if found is None or found.org_id != org_id:
            return None
        thread = self._chats.get((channel_id, chat_id))
        if thread is None or not self._thread_exists(org_id, thread):
            return None  # as the row goes with its thread
        return thread

    async def claim_chat(
        self, org_id: str, channel_id: UUID, chat_id: str, thread_id: UUID
    ) -> UUID:
        self._mine(org_id, channel_id)
        if not self._thread_exists(org_id, thread_id):
            raise NotFound("thread not found")
        held = self._chats.get((channel_id, chat_id))
        if held is not None and self._thread_exists(org_id, held):
            return held
        self._chats[(channel_id, chat_id)] = thread_id
        return thread_id

    async def record_event(self, event: ChannelEvent) -> bool:
        self._mine(event.org_id, event.channel_id)
        key = (event.channel_id, event.event_id)
        if key in self._events:
            return False
        self._events[key] = event
        return True

    async def event(self, org_id: str, channel_id: UUID, event_id: str) -> ChannelEvent | None:
        found = self._events.get((channel_id, event_id))
        return found if found is not None and found.org_id == org_id else None

    async def events(
        self,
        org_id: str,
        channel_id: UUID,
        *,
        before: tuple[datetime, str] | None,
        limit: int,
        state: EventState | None = None,
    ) -> list[ChannelEvent]:
        mine = [
            e
            for (cid, _), e in self._events.items()
            if cid == channel_id
            and e.org_id == org_id
            and (state is None or e.state == state)
            and (before is None or (e.created_at, e.event_id) < before)
        ]
        mine.sort(key=lambda e: (e.created_at, e.event_id), reverse=True)
        return mine[:limit]

    async def save_event(self, event: ChannelEvent) -> None:
        key = (event.channel_id, event.event_id)
        stored = self._events.get(key)
        if stored is not None and stored.org_id == event.org_id:
            self._events[key] = event
