"""The events of a streamed reply (docs/client-guide.md) and the buffer a reply
writes them to.

The reply runs in a task of its own and appends events to a ``Turn``; any number
of readers (the SSE response of the send, and of each re-attach in this process)
follow it. A reader that goes away (the client disconnected) does not stop the
reply. Storage keeps the events too (``ports/streams.py``): ``Turn.batch`` is the
part not yet stored, ``encode_events``/``decode_events`` their stored form.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol
from uuid import UUID

import msgspec

from agentsvc_core.ports.sealed import SealedRecord
from agentsvc_core.ports.streams import EventBatch


class Meta(msgspec.Struct, rename="camel"):
    started_at: datetime
    run_id: UUID
    thread_id: UUID
    model: str
    # the reply's W3C trace id (32 lowercase hex), with or without tracing export
    trace_id: str = ""


class Token(msgspec.Struct):
    delta: str


class ToolCallOut(msgspec.Struct, omit_defaults=True):
    id: str
    name: str
    arguments: dict[str, Any]
    # "approval": a server-side call waiting for a person's approval (requires_action
    # only); absent on the client's own tool calls, as the spec shows them
    kind: str | None = None


class ToolCallEvent(msgspec.Struct):
    tool: ToolCallOut


class ToolExecuting(msgspec.Struct):
    tool_name: str
    tool_call_id: str


class ToolResult(msgspec.Struct):
    tool_name: str
    tool_call_id: str
    result: str


class Challenge(msgspec.Struct, rename="camel", omit_defaults=True):
    provider: str
    redirect_url: str
    description: str | None = None


class AuthChallenge(msgspec.Struct, rename="camel"):
    tool_name: str
    challenge: Challenge


class RequiresAction(msgspec.Struct, rename="camel"):
    tool_calls: list[ToolCallOut]


class ProfileSwitchProposal(msgspec.Struct):
    target: str
    reason: str


class UsageOut(msgspec.Struct, rename="camel", omit_defaults=True):
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cached_input_tokens: int | None = None


class Done(msgspec.Struct, rename="camel", omit_defaults=True):
    ok: bool
    content: str
    message_id: UUID | None = None
    usage: UsageOut | None = None
    stopped: bool | None = None
    # false: a message posted to a multiplayer thread that did not call the agent
    replied: bool | None = None


class ErrorEvent(msgspec.Struct, omit_defaults=True):
    code: str
    detail: str | None = None
    # what the reply's model calls used before it ended (BUDGET_EXCEEDED: a runner
    # counts it against its budget)
    usage: UsageOut | None = None


EventData = (
    Meta
    | Token
    | ToolCallEvent
    | ToolExecuting
    | ToolResult
    | AuthChallenge
    | RequiresAction
    | ProfileSwitchProposal
    | Done
    | ErrorEvent
)

EVENT_NAMES: dict[type[Any], str] = {
    Meta: "meta",
    Token: "token",
    ToolCallEvent: "tool_call",
    ToolExecuting: "tool_executing",
    ToolResult: "tool_result",
    AuthChallenge: "auth_challenge",
    RequiresAction: "requires_action",
    ProfileSwitchProposal: "profile_switch_proposal",
    Done: "done",
    ErrorEvent: "error",
}


TERMINAL = (Done, ErrorEvent)  # the last event of every reply is one of these
_TYPES: dict[str, type[Any]] = {name: cls for cls, name in EVENT_NAMES.items()}
_encoder = msgspec.json.Encoder()
_batch = msgspec.json.Decoder(list[tuple[str, msgspec.Raw]])
_decoders = {name: msgspec.json.Decoder(cls) for name, cls in _TYPES.items()}


def encode_events(events: list[EventData]) -> bytes:
    """The stored form of events: a JSON array of ``[name, data]``."""
    return _encoder.encode([(EVENT_NAMES[type(e)], e) for e in events])


def decode_events(data: bytes) -> list[EventData]:
    return [_decoders[name].decode(raw) for name, raw in _batch.decode(data)]


class EventSource(Protocol):
    """What an SSE response reads: a ``Turn`` of this process, or a reply another
    process runs or ran, read from storage (use_cases/turn/streams.py)."""

    async def read(self, start: int, wait_s: float) -> list[EventData] | None:
        """Events from index ``start`` on, waiting up to ``wait_s`` seconds for the
        first; ``[]`` when the reply is over and all were read; ``None`` on timeout."""
        ...


class Turn:
    """A running (or finished) reply: an append-only list of events.

    Each wait of a reader is a plain future that ``emit`` resolves, with a
    ``call_later`` timer for the keep-alive: on the per-token path this costs less
    than an ``asyncio.Event`` plus an ``asyncio.timeout`` per wait."""

    def __init__(self, run_id: UUID, thread_id: UUID) -> None:
        self.run_id = run_id
        self.thread_id = thread_id
        self.events: list[EventData] = []
        self.closed = False
        self.stored = 0  # events[:stored] are in storage (batches while followed)
        self.followed = False  # a client in another process follows it
        self.keep = timedelta(minutes=10)  # how long storage keeps its events once over
        self._waiters: list[asyncio.Future[bool]] = []

    def batch(self, final: EventData, keep_until: datetime) -> EventBatch:
        """The events not yet stored and ``final``, the one that ends the reply
        (emitted once they are stored), as one batch."""
        events = [*self.events[self.stored :], final]
        return EventBatch(
            first=self.stored, count=len(events), data=encode_events(events), keep_until=keep_until
        )

    def emit(self, event: EventData) -> None:
        self.events.append(event)
        if self._waiters:
            self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(True)

    async def read(self, start: int, wait_s: float) -> list[EventData] | None:
        """Events from index ``start`` on, waiting up to ``wait_s`` seconds for the
        first; ``[]`` when the turn is closed and all were read; ``None`` on timeout."""
        while start >= len(self.events):
            if self.closed:
                return []
            loop = asyncio.get_running_loop()
            waiter: asyncio.Future[bool] = loop.create_future()
            self._waiters.append(waiter)
            timer = loop.call_later(wait_s, _expire, waiter)
            try:
                woke = await waiter
            finally:
                timer.cancel()
            if not woke:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                return None
        return self.events[start:]


def _expire(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(False)


async def last_event(source: EventSource) -> Done | ErrorEvent | None:
    """Read a reply to its end (a headless turn: a runner's step, a suggestion):
    its ``done`` or ``error`` event (None: it ended without one)."""
    final: Done | ErrorEvent | None = None
    start = 0
    while final is None:
        events = await source.read(start, 30.0)
        if events is None:
            continue
        if not events:
            break
        start += len(events)
        final = next((e for e in events if isinstance(e, (Done, ErrorEvent))), None)
    return final


class TurnEnded(msgspec.Struct, frozen=True, kw_only=True):
    """What a reply hands to what runs after it (``Conversation(after_turn=...)``),
    once its last event is out."""

    org_id: str
    agent_id: UUID
    thread_id: UUID
    run_id: UUID
    status: str  # the run's final status
    model_id: str  # the model the turn used
    user_id: str | None  # who sent the message the reply answered
    records: Mapping[str, SealedRecord]  # the agent's sealed records the turn read
    metadata: Mapping[str, str]  # the turn's merged metadata (its usage records')


# runs after each reply (memory collection); an exception is logged, not raised
AfterTurn = Callable[[TurnEnded], Awaitable[None]]
