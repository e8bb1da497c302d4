"""The turn's private parts, shared by use_cases/turn/conversation.py and reply_plan.py
(which plan a reply) and use_cases/turn/reply.py (which runs it): the plan, the running
reply's state, how one model call ended, and the small helpers they use."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_core.entities import (
    Agent,
    KeySource,
    Message,
    MessageStatus,
    Principal,
    Role,
    Run,
    RunStatus,
    Thread,
    ToolCall,
    Usage,
    UsageRecord,
)
from agentsvc_core.entities.model_params import ModelParams
from agentsvc_core.errors import Upstream
from agentsvc_core.ports import ChatModel, Clock, NativeCompaction, ToolSetup, ToolSpec
from agentsvc_core.use_cases.model_params import DEFAULT_OUTPUT_TOKENS
from agentsvc_core.use_cases.org_settings import CompactionConfig, TurnKeys
from agentsvc_core.use_cases.turn.events import ErrorEvent, ToolCallOut, UsageOut

__all__ = [
    "INTERRUPTED",
    "INTERRUPTED_DETAIL",
    "BudgetGate",
    "Called",
    "Plan",
    "ReplyState",
    "interrupted",
    "message_status",
    "new_message",
    "tool_out",
    "usage_out",
]

INTERRUPTED_DETAIL = "the service is shutting down; the partial reply was kept"


# A turn's budget check (runners): given the usage of the turn so far and the model
# id, why no further model call may be made, or None.
BudgetGate = Callable[[Usage, str], Awaitable[str | None]]


class Plan(msgspec.Struct, kw_only=True):
    """What the running reply needs, decided when the message is sent. Not frozen:
    summary compaction replaces ``system`` with one that carries the summary before
    the first model call."""

    who: Principal
    thread: Thread
    agent: Agent
    model: ChatModel
    model_name: str
    model_id: str
    system: str
    server_tools: dict[str, ToolSpec]
    client_tools: dict[str, ToolSpec]
    offered: list[ToolSpec]
    metadata: dict[str, str]
    tool_setup: ToolSetup | None = None  # what the turn read for the server-side tools
    user_id: str | None = None  # who sent the message the reply answers
    keys: TurnKeys | None = None  # the turn's keys: resolved once, reused, never stored
    compaction: CompactionConfig | None = None
    native: NativeCompaction | None = None
    # the send asked for ``compaction`` events (includeEvents): none otherwise
    show_compaction: bool = False
    # how long its events stay in storage once it is over (re-attach, idempotent retries)
    keep_events: timedelta = timedelta(minutes=10)
    inputs: tuple[str, ...] = ()  # the text of the user messages the reply answers
    # the results of client-side tool calls it answers: (tool call id, output)
    tool_results: tuple[tuple[str, str], ...] = ()
    # the server-side calls a person approved since the last reply: run first
    approved: tuple[ToolCall, ...] = ()
    # whoever sent the message can answer approvals (a send through the API); else
    # (a runner's step, a channel, a public chat) a call needing one is refused
    ask_approval: bool = False
    # asked before each model call with the turn's usage so far: a reason to end
    # the reply (error BUDGET_EXCEEDED) or None (a runner's budget; None: no check)
    gate: BudgetGate | None = None
    # the span the reply's span is a child of when that span is in the stored trace
    # too (a runner step's); any other parent (the request's) is not kept
    stored_parent: str | None = None
    # the thread has branches (or this send makes one): the reply's messages name
    # their parents and move the thread's head (use_cases/branches.py)
    branched: bool = False
    # the model parameters in force (the send's over the agent's), and the output cap
    params: ModelParams | None = None
    max_tokens: int = DEFAULT_OUTPUT_TOKENS


class ReplyState(msgspec.Struct, kw_only=True):
    """What a running reply has produced so far."""

    messages: list[Message]  # the model's context, growing with each step
    shown: list[str] = msgspec.field(default_factory=list)  # every delta the user saw
    new: list[Message] = msgspec.field(default_factory=list)  # to store at the end
    parent: UUID | None = None  # a branched thread's: the message the reply follows
    records: list[UsageRecord] = msgspec.field(default_factory=list)
    total: Usage = msgspec.field(default_factory=Usage)
    status: RunStatus = "completed"
    pending: tuple[ToolCall, ...] = ()
    error: ErrorEvent | None = None
    step_limit: bool = False  # the reply stopped at MAX_STEPS model calls
    begun: asyncio.Future[None]  # resolved once the run is stored

    def add(self, message: Message) -> None:
        self.new.append(message)
        self.messages.append(message)


class Called(msgspec.Struct, frozen=True, gc=False):
    """How one model call ended (its text and tool calls went to the caller's lists)."""

    stopped: bool  # a stop cut it short
    failure: Upstream | None  # the provider failed
    usage: Usage  # the provider's last report (zeros without one)
    source: KeySource  # the key that paid
    finish: str  # the provider's finish reason ("stop" when stopped, "other" without one)


def new_message(clock: Clock, run: Run, role: Role, content: str, **extra: Any) -> Message:
    return Message(
        id=uuid.uuid4(),
        org_id=run.org_id,
        thread_id=run.thread_id,
        role=role,
        content=content,
        created_at=clock.now(),
        run_id=run.id,
        **extra,
    )


def usage_out(u: Usage) -> UsageOut:
    return UsageOut(
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        total_tokens=u.total_tokens,
        cached_input_tokens=u.cached_input_tokens,
    )


def tool_out(call: ToolCall) -> ToolCallOut:
    if call.approval:
        return ToolCallOut(id=call.id, name=call.name, arguments=call.arguments, kind="approval")
    return ToolCallOut(id=call.id, name=call.name, arguments=call.arguments)


INTERRUPTED = ErrorEvent(code="INTERRUPTED", detail=INTERRUPTED_DETAIL)


def interrupted(state: ReplyState) -> None:
    """The reply ends because the process shuts down: what it said is kept, marked
    interrupted, and the stream ends with an INTERRUPTED error."""
    state.status = "interrupted"
    if state.new and state.new[-1].role == "assistant":
        state.new[-1] = msgspec.structs.replace(state.new[-1], status="interrupted")
    state.error = INTERRUPTED


def message_status(stopped: bool, failure: Upstream | None) -> MessageStatus:
    if stopped:
        return "stopped"
    return "failed" if failure is not None else "complete"
