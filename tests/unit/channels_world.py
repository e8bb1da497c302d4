"""A channels world for the unit tests of use_cases/channels: the turn's world
(tests/unit/turn_world.py: memory storage, a scripted model, the test's clock), a
recording double platform (``Recorder``: it reads a plain JSON body proved by a
token header, renders by a fixed part length, and sends what a test scripts),
the channels' use cases over them, and the answering job run in the test's task."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_core.entities.channel import Channel, ChannelEvent, ChannelType
from agentsvc_core.ports.channel_platforms import (
    ChannelPlatform,
    Connected,
    DeliveryFailed,
    Inbound,
    InboundAnswer,
    InboundMessage,
    InboundRefused,
    InboundRequest,
    InboundStatus,
    Outgoing,
    PairingState,
    PlatformBusy,
    Sent,
)
from agentsvc_core.ports.channels import ChannelStore
from agentsvc_core.ports.jobs import Again
from agentsvc_core.use_cases.channels import (
    ChannelAnswers,
    ChannelDraft,
    ChannelInbound,
    Channels,
)
from agentsvc_core.use_cases.channels.inbound import AnswerJob
from agentsvc_core.use_cases.threads import Threads
from tests.unit.published import Published
from tests.unit.runner_world import Jobs
from tests.unit.turn_world import BOX, WHO, Script, World, says, world

BASE = "https://agents.example.com"


class KeyedJobs(Jobs):
    """The queue's key as the real one keeps it: a job whose key waits is not
    queued twice (the test runs the queued jobs itself)."""

    async def enqueue(
        self, kind: str, payload: bytes, *, key: str | None = None, delay_s: float = 0.0
    ) -> bool:
        if key is not None and any(k == key for _, _, k in self.queued):
            return False
        return await super().enqueue(kind, payload, key=key, delay_s=delay_s)


class Recorder(ChannelPlatform):
    """A platform double. Inbound: a JSON ``InboundMessage`` (or ``{"status": ...}``,
    or ``{"challenge": ...}``) with header ``x-token`` equal to the credential
    ``token``. Outbound: records each part sent; ``outcomes`` is what the next
    sends raise or answer, in order (then success)."""

    credential_fields: tuple[str, ...] = ("token",)
    config_fields: tuple[str, ...] = ()

    def __init__(self, kind: ChannelType = "telegram", part_len: int = 1000) -> None:
        self.type = kind
        self.part_len = part_len
        self.sent: list[Outgoing] = []
        self.outcomes: list[Exception | None] = []
        self.connects: list[tuple[dict[str, str], str]] = []
        self.disconnects = 0
        # what the use cases handed over: (credentials, config) of each call
        self.seen: list[tuple[str, dict[str, str], dict[str, str | int | bool]]] = []
        self.disconnect_error: Exception | None = None
        self.read_at: list[datetime] = []
        self.connected = Connected(status="connected", config={"bot": "@agent_bot"})
        self.pair_state = PairingState(status="connecting")

    def read_inbound(
        self,
        request: InboundRequest,
        credentials: Mapping[str, str],
        config: Mapping[str, str | int | bool],
        now: datetime,
    ) -> Inbound | InboundAnswer | InboundRefused:
        self.seen.append(("read", dict(credentials), dict(config)))
        self.read_at.append(now)
        if request.headers.get("x-token") != credentials.get("token"):
            return InboundRefused(status=401, detail="wrong token")
        raw = msgspec.json.decode(request.body)
        if "challenge" in raw:
            return InboundAnswer(
                status=200, body=raw["challenge"].encode(), content_type="text/plain"
            )
        if "status" in raw:
            return Inbound(status=InboundStatus(status=raw["status"], reason=raw.get("reason")))
        return Inbound(messages=(msgspec.convert(raw, InboundMessage),), ack=b"ok")

    async def connect(
        self,
        credentials: Mapping[str, str],
        config: Mapping[str, str | int | bool],
        inbound_url: str,
    ) -> Connected:
        self.connects.append((dict(credentials), inbound_url))
        return self.connected

    async def disconnect(
        self, credentials: Mapping[str, str], config: Mapping[str, str | int | bool]
    ) -> None:
        self.disconnects += 1
        self.seen.append(("disconnect", dict(credentials), dict(config)))
        if self.disconnect_error is not None:
            raise self.disconnect_error

    def render(self, markdown: str) -> tuple[str, ...]:
        n = self.part_len
        return tuple(markdown[i : i + n] for i in range(0, len(markdown), n)) or ("",)

    async def send(
        self,
        credentials: Mapping[str, str],
        config: Mapping[str, str | int | bool],
        message: Outgoing,
    ) -> Sent:
        if credentials.get("token") is None:
            raise DeliveryFailed("no token", permanent=True)
        self.seen.append(("send", dict(credentials), dict(config)))
        outcome = self.outcomes.pop(0) if self.outcomes else None
        if outcome is not None:
            raise outcome
        self.sent.append(message)
        return Sent(message_id=str(len(self.sent)))

    async def pairing(
        self, credentials: Mapping[str, str], config: Mapping[str, str | int | bool]
    ) -> PairingState:
        self.seen.append(("pairing", dict(credentials), dict(config)))
        return self.pair_state


def busy(after_s: float) -> PlatformBusy:
    return PlatformBusy("slow down", after_s)


@dataclass
class ChannelWorld:
    turn: World
    platform: Recorder
    channels: Channels
    inbound: ChannelInbound
    answers: ChannelAnswers
    jobs: Jobs
    events: Published

    @property
    def store(self) -> ChannelStore:
        return self.turn.storage.channels

    async def channel(self, **draft: Any) -> Channel:
        made = await self.channels.create(
            WHO,
            self.turn.agent.id,
            ChannelDraft(type="telegram", credentials={"token": "t0k"}, **draft),
        )
        return made.channel

    async def post(self, channel: Channel, token: str = "t0k", **body: Any) -> Any:  # noqa: S107  # noqa: S107
        request = InboundRequest(
            method="POST",
            headers={"x-token": token},
            query={},
            body=msgspec.json.encode(body),
        )
        found = await self.inbound.channel(channel.id)
        return await self.inbound.receive(found, request)

    async def message(self, channel: Channel, event_id: str, text: str = "hi", **more: Any) -> Any:
        body = {"event_id": event_id, "chat_id": "chat-1", "sender_id": "u1", "text": text}
        return await self.post(channel, **{**body, **more})

    async def run_jobs(self) -> list[Again | None]:
        """Run every queued job once, in order (the queue's record is emptied)."""
        queued, self.jobs.queued = self.jobs.queued, []
        return [await self.answers.answer(payload) for _, payload, _ in queued]

    async def run_event(self, channel: Channel, event_id: str) -> Again | None:
        payload = msgspec.json.encode(AnswerJob(channel.org_id, channel.id, event_id))
        return await self.answers.answer(payload)

    async def event(self, channel: Channel, event_id: str) -> ChannelEvent:
        found = await self.store.event(channel.org_id, channel.id, event_id)
        assert found is not None
        return found

    async def fresh(self, channel: Channel) -> Channel:
        return await self.store.get(channel.org_id, channel.id)

    async def thread_of(self, channel: Channel, chat: str = "chat-1") -> UUID:
        found = await self.store.chat_thread(channel.org_id, channel.id, chat)
        assert found is not None
        return found


async def channel_world(*calls: list[Any], kind: ChannelType = "telegram") -> ChannelWorld:
    w = await world(Script(*calls) if calls else Script(says("hello there")))
    s, clock = w.storage, w.clock
    platform = Recorder(kind)
    platforms = {kind: platform}
    jobs = KeyedJobs()
    threads = Threads(s.threads, s.agents, s.conversations, clock)
    events = Published()
    return ChannelWorld(
        turn=w,
        platform=platform,
        channels=Channels(s.channels, s.agents, platforms, BOX, clock, BASE, events),
        inbound=ChannelInbound(s.channels, platforms, BOX, jobs, clock, events),
        answers=ChannelAnswers(
            s.channels, platforms, BOX, threads, w.conversation, s.conversations, clock, events
        ),
        jobs=jobs,
        events=events,
    )
