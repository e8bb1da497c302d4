"""The events of a streamed reply (spec 6.1) and the buffer a reply writes them to.

The reply runs in a task of its own and appends events to a ``Turn``; any number
of readers (the SSE response) follow it. A reader that goes away (the client
disconnected) does not stop the reply.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec


class Meta(msgspec.Struct, rename="camel"):
    started_at: datetime
    run_id: UUID
    thread_id: UUID
    model: str


class Token(msgspec.Struct):
    delta: str


class ToolCallOut(msgspec.Struct):
    id: str
    name: str
    arguments: dict[str, Any]


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


class ErrorEvent(msgspec.Struct, omit_defaults=True):
    code: str
    detail: str | None = None


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
        self._waiters: list[asyncio.Future[bool]] = []

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
