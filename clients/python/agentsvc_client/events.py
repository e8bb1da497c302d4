"""The reply's events (docs/client-guide.md, "Events"), typed.

Each keeps its SSE ``id`` (1 for ``meta``, counting up within the reply): the
number ``Last-Event-ID`` takes to pick the stream up after it. Field names are the
data's, in snake_case.
"""

from __future__ import annotations

from typing import Any, Union

import msgspec


class ToolCallInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A call the model made: the tool's ``name`` and its ``arguments``. ``kind``
    is ``"approval"`` on a server-side call in ``RequiresAction`` that waits for a
    person's approval (answer it with ``tool_approvals``); None on your own tools'."""

    id: str
    name: str
    arguments: dict[str, Any]
    kind: str | None = None

    @property
    def needs_approval(self) -> bool:
        return self.kind == "approval"


class Challenge(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Where the user authorizes a tool's provider."""

    provider: str
    redirect_url: str
    description: str | None = None


class Usage(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Tokens of the reply, summed over its model calls."""

    input_tokens: int
    output_tokens: int
    total_tokens: int
    cached_input_tokens: int | None = None


class Meta(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """First: the reply's run (``run_id`` is what re-attaching needs)."""

    id: int = 0
    started_at: str
    run_id: str
    thread_id: str
    model: str
    trace_id: str = ""


class Token(msgspec.Struct, frozen=True, kw_only=True):
    """A piece of the reply's text."""

    id: int = 0
    delta: str


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """The agent calls a server-side tool."""

    id: int = 0
    tool: ToolCallInfo


class ToolExecuting(msgspec.Struct, frozen=True, kw_only=True):
    """The server-side tool runs."""

    id: int = 0
    tool_name: str
    tool_call_id: str


class ToolResult(msgspec.Struct, frozen=True, kw_only=True):
    """The server-side tool's result (the text that follows comes after it)."""

    id: int = 0
    tool_name: str
    tool_call_id: str
    result: str


class AuthChallenge(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A tool needs the user to authorize first."""

    id: int = 0
    tool_name: str
    challenge: Challenge


class RequiresAction(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The agent calls your own tools, or server-side tools that wait for a person's
    approval (``kind="approval"``): answer with ``tool_results`` and
    ``tool_approvals`` in the next send (``agentsvc_client.tools`` does it for you)."""

    id: int = 0
    tool_calls: list[ToolCallInfo]


class ProfileSwitchProposal(msgspec.Struct, frozen=True, kw_only=True):
    """The agent suggests another tool profile (nothing switches)."""

    id: int = 0
    target: str
    reason: str


class Done(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Last, on success: the whole reply (``stopped`` when it was stopped; ``replied``
    false when the message did not call the agent, on a multiplayer thread)."""

    id: int = 0
    ok: bool
    content: str
    message_id: str | None = None
    usage: Usage | None = None
    stopped: bool | None = None
    # false: a message to a multiplayer thread that did not call the agent (content "")
    replied: bool | None = None


class Error(msgspec.Struct, frozen=True, kw_only=True):
    """Last, on failure (no ``Done`` then): ``PROVIDER_*``, ``INTERRUPTED``..."""

    id: int = 0
    code: str
    detail: str | None = None


Event = Union[  # noqa: UP007 (a runtime alias; X | Y of classes needs 3.10, this reads the same)
    Meta,
    Token,
    ToolCall,
    ToolExecuting,
    ToolResult,
    AuthChallenge,
    RequiresAction,
    ProfileSwitchProposal,
    Done,
    Error,
]

# The SSE event name -> its type: the service's document lists the same names.
EVENT_TYPES: dict[str, type[Event]] = {
    "meta": Meta,
    "token": Token,
    "tool_call": ToolCall,
    "tool_executing": ToolExecuting,
    "tool_result": ToolResult,
    "auth_challenge": AuthChallenge,
    "requires_action": RequiresAction,
    "profile_switch_proposal": ProfileSwitchProposal,
    "done": Done,
    "error": Error,
}

_DECODERS = {name: msgspec.json.Decoder(cls) for name, cls in EVENT_TYPES.items()}


def decode(name: str, event_id: int, data: str) -> Event | None:
    """The typed event, or None for an event this client does not know (newer service)."""
    decoder = _DECODERS.get(name)
    if decoder is None:
        return None
    event: Event = decoder.decode(data)
    return msgspec.structs.replace(event, id=event_id)


__all__ = [
    "EVENT_TYPES",
    "AuthChallenge",
    "Challenge",
    "Done",
    "Error",
    "Event",
    "Meta",
    "ProfileSwitchProposal",
    "RequiresAction",
    "Token",
    "ToolCall",
    "ToolCallInfo",
    "ToolExecuting",
    "ToolResult",
    "Usage",
    "decode",
]
