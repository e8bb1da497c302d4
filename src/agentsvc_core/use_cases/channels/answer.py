"""The job that answers one inbound message (``ANSWER_JOB``), step by step, each
step's outcome stored on the event before the next begins, so a job run twice
(the queue runs jobs at least once) picks up where the first stopped:

1. ``received`` -> admitted: the contact is stored or updated, the chat's thread
   found or made (one per (channel, chat)), and the policies decide: ``answer``;
   ``pair`` (the contact's one-time code is the reply); ``store`` (the message is
   kept in the thread, nothing answered: a blocked or waiting contact, a disabled
   policy, a group message that does not mention the bot);
2. admitted -> ``answering``: the turn runs on the chat's thread (the same path as
   a runner's agent step: ``Conversation.send`` without HTTP), its run id stored;
   its usage and trace carry ``channel_id``, ``channel_type`` (the thread's
   metadata) and ``contact_id`` (the message's);
3. ``answering`` -> ``replied``: the reply is stored on the event (a job run again
   after a crash reads it from the thread rather than running the turn again);
4. ``replied`` -> ``done``: the platform renders it in parts and each part is sent
   once: ``parts_sent`` is stored after each, so a part sent is never sent again.
   A busy platform or a transient failure answers the queue ``Again`` (the
   platform's wait, or a backoff), up to ``MAX_ATTEMPTS``; a permanent failure,
   or attempts spent, is recorded (``failed``, ``error``) and sets the channel's
   status to ``error`` with the reason."""

from __future__ import annotations

import secrets
import uuid
from uuid import UUID

import msgspec

from agentsvc_core.entities import Message, Principal
from agentsvc_core.entities.channel import Channel, ChannelEvent, Contact
from agentsvc_core.errors import Conflict, DomainError
from agentsvc_core.ports import Clock, ConversationStore, SecretBox
from agentsvc_core.ports.channel_platforms import (
    ChannelPlatform,
    ChannelPlatforms,
    DeliveryFailed,
    Outgoing,
    PlatformBusy,
)
from agentsvc_core.ports.channels import ChannelStore
from agentsvc_core.ports.event_webhooks import EventPublisher, NoEvents
from agentsvc_core.ports.jobs import Again
from agentsvc_core.rules import MAX_TITLE, MAX_USER_ID
from agentsvc_core.use_cases.channels.inbound import AnswerJob
from agentsvc_core.use_cases.channels.manage import open_credentials
from agentsvc_core.use_cases.channels.transitions import (
    after_failure,
    decide,
    delivery_failed,
)
from agentsvc_core.use_cases.event_webhooks.payloads import status_changed
from agentsvc_core.use_cases.threads import ThreadDraft, Threads
from agentsvc_core.use_cases.turn.conversation import Conversation
from agentsvc_core.use_cases.turn.events import Done, last_event
from agentsvc_core.use_cases.turn.send_input import SendInput

__all__ = ["BUSY_WAIT_S", "ChannelAnswers", "pairing_text"]

BUSY_WAIT_S = 2.0  # the chat's thread is answering an earlier message: try then
_FINAL = frozenset({"done", "skipped", "failed"})
_job = msgspec.json.Decoder(AnswerJob)


def pairing_text(code: str) -> str:
    return (
        "Hello! Before I can answer, my owner has to approve this chat. "
        f"Your pairing code is {code}: send it to them."
    )


class ChannelAnswers:
    def __init__(
        self,
        store: ChannelStore,
        platforms: ChannelPlatforms,
        box: SecretBox,
        threads: Threads,
        conversation: Conversation,
        turns: ConversationStore,
        clock: Clock,
        events: EventPublisher | None = None,
    ) -> None:
        """``events``: told when a channel's status changes (event webhooks)."""
        self._events = events or NoEvents()
        self._store = store
        self._platforms = platforms
        self._box = box
        self._threads = threads
        self._conversation = conversation
        self._turns = turns
        self._clock = clock

    async def answer(self, payload: bytes) -> Again | None:
        """The job handler: take the event as far as it goes now."""
        job = _job.decode(payload)
        event = await self._store.event(job.org_id, job.channel_id, job.event_id)
        channel = await self._store.find(job.channel_id)
        if event is None or event.state in _FINAL or channel is None:
            return None  # answered already, or the channel went
        platform = self._platforms.get(channel.type)
        if platform is None:
            await self._fail(channel, event, f"this deployment has no {channel.type} channels")
            return None
        if event.state == "received":
            event = await self._admit(channel, event)
        if event.state == "admitted":
            started = await self._start_turn(channel, event)
            if isinstance(started, Again):
                return started
            event = started
        if event.state == "answering":
            event = await self._reply_of(event)
        if event.state == "replied":
            return await self._deliver(channel, platform, event)
        return None

    # --- 1. admit -------------------------------------------------------------

    async def _save(self, event: ChannelEvent, **changes: object) -> ChannelEvent:
        changed = msgspec.structs.replace(event, **changes, updated_at=self._clock.now())
        await self._store.save_event(changed)
        return changed

    async def _admit(self, channel: Channel, event: ChannelEvent) -> ChannelEvent:
        thread_id = await self._chat_thread(channel, event)
        now = self._clock.now()
        waits = channel.dm_policy == "pairing" and not event.is_group
        code = f"{secrets.randbelow(10**6):06d}" if waits else None
        contact, created = await self._store.upsert_contact(
            Contact(
                id=uuid.uuid4(),
                org_id=channel.org_id,
                channel_id=channel.id,
                external_id=event.sender_id,
                display_name=event.sender_name,
                username=event.sender_username,
                thread_id=None if event.is_group else thread_id,
                status="pending" if waits else "approved",
                pairing_code=code,
                first_seen_at=now,
                last_message_at=now,
            )
        )
        decision = decide(channel, contact, created, event)
        ids = {"contact_id": contact.id, "thread_id": thread_id}
        if decision == "answer":
            return await self._save(event, state="admitted", **ids)
        await self._store_message(channel, event, thread_id)
        if decision == "pair" and contact.pairing_code is not None:
            text = pairing_text(contact.pairing_code)
            return await self._save(event, state="replied", reply_text=text, **ids)
        return await self._save(event, state="skipped", **ids)

    async def _chat_thread(self, channel: Channel, event: ChannelEvent) -> UUID:
        """The chat's thread: the one claimed, or a new one (two first messages of
        a chat racing: the first claim wins, the other's new thread stays empty)."""
        found = await self._store.chat_thread(channel.org_id, channel.id, event.chat_id)
        if found is not None:
            return found
        title = f"{channel.name} · {event.sender_name or event.chat_id}"[:MAX_TITLE]
        thread = await self._threads.create(
            Principal.organization(channel.org_id),
            ThreadDraft(
                agent_id=channel.agent_id,
                title=title,
                metadata={
                    "channel_id": str(channel.id),
                    "channel_type": channel.type,
                    "channel_chat_id": event.chat_id,  # bounded when stored
                },
            ),
        )
        return await self._store.claim_chat(channel.org_id, channel.id, event.chat_id, thread.id)

    def _sender(self, channel: Channel, event: ChannelEvent) -> tuple[str, str | None]:
        sender_id = f"{channel.type}:{event.sender_id}"[:MAX_USER_ID]
        name = event.sender_name or event.sender_username
        return sender_id, None if name is None else name[:MAX_TITLE]

    async def _store_message(self, channel: Channel, event: ChannelEvent, thread_id: UUID) -> None:
        """Keep a message that is not answered in its chat's thread."""
        sender_id, name = self._sender(channel, event)
        await self._turns.add_message(
            Message(
                id=uuid.uuid4(),
                org_id=channel.org_id,
                thread_id=thread_id,
                role="user",
                content=event.text,
                created_at=self._clock.now(),
                sender_id=sender_id,
                sender_name=name,
            )
        )

    # --- 2, 3. the turn ----------------------------------------------------------

    async def _start_turn(self, channel: Channel, event: ChannelEvent) -> ChannelEvent | Again:
        assert event.thread_id is not None
        assert event.contact_id is not None
        sender_id, name = self._sender(channel, event)
        message = SendInput(
            content=event.text,
            sender_id=sender_id,
            sender_name=name,
            metadata={"contact_id": str(event.contact_id)},
        )
        who = Principal.organization(channel.org_id)
        try:
            turn = await self._conversation.send(who, event.thread_id, message)
        except DomainError as exc:
            if isinstance(exc, Conflict) and exc.code == "THREAD_BUSY":
                return Again(BUSY_WAIT_S)  # the chat's earlier message is being answered
            return await self._save(event, state="failed", error=exc.detail)
        event = await self._save(event, state="answering", run_id=turn.run_id)
        final = await last_event(turn)
        if isinstance(final, Done) and not final.stopped:
            if not final.content.strip():
                return await self._save(event, state="done")
            return await self._save(
                event, state="replied", reply_text=final.content, reply_message_id=final.message_id
            )
        why = "the turn was stopped" if final is None or isinstance(final, Done) else final.code
        return await self._save(event, state="failed", error=f"no reply: {why}")

    async def _reply_of(self, event: ChannelEvent) -> ChannelEvent:
        """An event whose turn started in a job that did not finish: the turn's
        stored reply, never a second turn."""
        assert event.thread_id is not None
        assert event.run_id is not None
        messages = await self._turns.run_messages(event.org_id, event.thread_id, event.run_id)
        reply = next(
            (
                m
                for m in reversed(messages)
                if m.role == "assistant" and m.status == "complete" and m.content
            ),
            None,
        )
        if reply is None:
            return await self._save(event, state="failed", error="the turn ended without a reply")
        return await self._save(
            event, state="replied", reply_text=reply.content, reply_message_id=reply.id
        )

    # --- 4. delivery ---------------------------------------------------------------

    async def _deliver(
        self, channel: Channel, platform: ChannelPlatform, event: ChannelEvent
    ) -> Again | None:
        assert event.reply_text is not None  # stored with the ``replied`` state
        parts = platform.render(event.reply_text)
        credentials = open_credentials(self._box, channel)
        for index in range(event.parts_sent, len(parts)):
            outgoing = Outgoing(chat_id=event.chat_id, text=parts[index], reply_to=event.reply_to)
            try:
                await platform.send(credentials, channel.config, outgoing)
            except PlatformBusy as exc:
                return await self._retry(channel, event, exc.detail, exc.retry_after_s)
            except DeliveryFailed as exc:
                if exc.permanent:
                    await self._fail(channel, event, exc.detail)
                    return None
                return await self._retry(channel, event, exc.detail, None)
            event = await self._save(event, parts_sent=index + 1)
        if channel.status != "error":
            await self._save(event, state="done")
            return None
        # a reply got through again: so does the channel, before its message says
        # ``done`` (as ``_fail`` orders its two writes)
        changed = await self._store.modify(
            channel.org_id,
            channel.id,
            lambda c: (
                msgspec.structs.replace(
                    c, status="connected", status_reason=None, updated_at=self._clock.now()
                )
                if c.status == "error"
                else c
            ),
        )
        await self._save(event, state="done")
        await status_changed(self._events, channel, changed)
        return None

    async def _retry(
        self, channel: Channel, event: ChannelEvent, why: str, retry_after_s: float | None
    ) -> Again | None:
        counted, wait = after_failure(event, why, retry_after_s, self._clock.now())
        if wait is None:
            await self._fail(channel, counted, counted.error or why)
            return None
        await self._store.save_event(counted)
        return Again(wait)

    async def _fail(self, channel: Channel, event: ChannelEvent, why: str) -> None:
        """The channel says ``error`` before its message says ``failed``: whoever sees
        the failed message then sees the channel's status too (the other order showed
        a failed message beside a channel still ``connected``). Stopped between the
        two, the job runs again and the delivery fails (or gets through) again."""
        now = self._clock.now()
        reason = f"a reply could not be delivered: {why}"[:1000]
        changed = await self._store.modify(
            channel.org_id,
            channel.id,
            lambda c: msgspec.structs.replace(
                c, status="error", status_reason=reason, updated_at=now
            ),
        )
        await self._store.save_event(delivery_failed(event, why, now))
        await status_changed(self._events, channel, changed)
