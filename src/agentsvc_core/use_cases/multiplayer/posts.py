"""What a send to a multiplayer thread does besides the turn (``Conversation``
calls it only for multiplayer threads, so a single thread's send costs nothing
more): the agent's configuration decides whether the message calls the agent
(``config.calls_agent``); one that does not is stored on its own, even while a
reply runs, and its stream is a single ``done`` with ``replied: false``. Each
message stored, reply begun and reply stored is news for the thread's followers
(``ThreadNews``: every process)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from uuid import UUID

from agentsvc_core.entities import Agent, Message, Principal, Thread
from agentsvc_core.errors import DomainError
from agentsvc_core.ports import Clock, ConversationStore, ThreadNews
from agentsvc_core.ports.event_webhooks import EventPublisher, NoEvents
from agentsvc_core.use_cases.event_webhooks.payloads import messages_stored
from agentsvc_core.use_cases.multiplayer.config import MultiplayerSettings, calls_agent
from agentsvc_core.use_cases.turn.events import Done, EventData, EventSource

__all__ = ["NOT_CALLED", "MultiplayerPosts", "Unanswered"]

log = logging.getLogger("agentsvc.multiplayer")

# the one event of a message that did not call the agent
NOT_CALLED = Done(ok=True, content="", replied=False)


class Unanswered(EventSource):
    """The stream of a message that did not call the agent: ``done`` and the end."""

    async def read(self, start: int, wait_s: float) -> list[EventData] | None:
        return [NOT_CALLED] if start == 0 else []


class MultiplayerPosts:
    def __init__(
        self,
        settings: MultiplayerSettings,
        store: ConversationStore,
        news: ThreadNews,
        clock: Clock,
        events: EventPublisher | None = None,
    ) -> None:
        """``events``: told of a message stored without a reply (event webhooks)."""
        self._events = events or NoEvents()
        self._settings = settings
        self._store = store
        self._news = news
        self._clock = clock
        self._telling: set[asyncio.Task[None]] = set()

    async def unanswered(
        self,
        who: Principal,
        thread: Thread,
        agent: Agent,
        sender: tuple[str | None, str | None, str | None],
        content: str,
    ) -> EventSource | None:
        """None when the message calls the agent (the turn goes on); otherwise the
        message is stored now and its stream returned. ``sender``: the sender's id,
        name and role in the thread."""
        config = await self._settings.of(who.org_id, agent.id)
        sender_id, sender_name, role = sender
        if calls_agent(config, agent.name, role, content):
            return None
        message = Message(
            id=uuid.uuid4(),
            org_id=who.org_id,
            thread_id=thread.id,
            role="user",
            content=content,
            created_at=self._clock.now(),
            sender_name=sender_name,
            sender_id=sender_id,
        )
        await self._store.add_message(message)
        await messages_stored(self._events, [message])
        await self.tell(thread.id)
        return Unanswered()

    async def tell(self, thread_id: UUID) -> None:
        """News for the thread's followers; a failure is logged (they read again
        now and then), never the sender's."""
        try:
            await self._news.publish_news(thread_id)
        except DomainError as exc:
            log.warning("thread %s news not sent: %s", thread_id, exc.detail)

    def tell_when_done(self, thread_id: UUID, reply: asyncio.Task[None]) -> None:
        """News once ``reply`` (its task) has stored the reply and ended."""

        def ended(_: asyncio.Task[None]) -> None:
            task = asyncio.get_running_loop().create_task(self.tell(thread_id))
            self._telling.add(task)
            task.add_done_callback(self._telling.discard)

        reply.add_done_callback(ended)
