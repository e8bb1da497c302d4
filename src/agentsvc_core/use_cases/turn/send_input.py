"""What a send carries (the body of POST /api/threads/{id}/messages, as the
core sees it) and its checks, made before anything is read or stored."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from uuid import UUID

import msgspec

from agentsvc_core.entities import Agent, Message, Principal, Run, Thread, ToolCall
from agentsvc_core.entities.model_params import ModelParams
from agentsvc_core.errors import InvalidInput, NotFound, PermissionDenied, ThreadBusy
from agentsvc_core.ports import Clock, ToolSpec, TurnInputs
from agentsvc_core.rules import (
    MAX_CLIENT_TOOLS,
    MAX_CONTENT,
    MAX_DESCRIPTION,
    MAX_PREAMBLE,
    MAX_TITLE,
    MAX_USER_ID,
    check_metadata,
    check_model_id,
    check_text,
)
from agentsvc_core.use_cases.model_params import check_params
from agentsvc_core.use_cases.threads import Threads
from agentsvc_core.use_cases.turn._private import new_message
from agentsvc_core.use_cases.turn.context import PROPOSE_PROFILE_SWITCH
from agentsvc_core.use_cases.turn.queued import STRATEGIES, Strategy

__all__ = [
    "EVENTS_ON_REQUEST",
    "SendInput",
    "ToolApprovalIn",
    "ToolResultIn",
    "approved_calls",
    "check_input",
    "check_tool_results",
    "waiting_calls",
]

EVENTS_ON_REQUEST = frozenset({"compaction"})
"""The events a send gets only when it names them (``includeEvents``), so that a
client that knows only the spec's events sees nothing new."""


class ToolResultIn(msgspec.Struct, frozen=True, kw_only=True):
    tool_call_id: str
    output: str


class ToolApprovalIn(msgspec.Struct, frozen=True, kw_only=True):
    """A person's answer to a server-side call waiting for approval."""

    tool_call_id: str
    approved: bool
    reason: str | None = None  # why (told to the model when denied)


class SendInput(msgspec.Struct, frozen=True, kw_only=True):
    content: str
    tools: list[ToolSpec] = []
    tool_results: list[ToolResultIn] = []
    tool_approvals: list[ToolApprovalIn] = []
    model_override: str | None = None
    sender_name: str | None = None
    sender_id: str | None = None
    tool_profile: str | None = None
    system_prompt_overlay: str | None = None
    metadata: dict[str, str] = {}
    include_events: frozenset[str] = frozenset()  # of EVENTS_ON_REQUEST
    # what a send that finds the thread's reply running does (use_cases/turn/queued.py)
    multitask_strategy: Strategy = "reject"
    # a new branch (use_cases/branches.py): this message replaces the user message
    # ``edit_of``, or (``regenerate``) the last user message is answered again
    edit_of: UUID | None = None
    regenerate: bool = False
    # the send's model parameters: each one given overrides the agent's
    params: ModelParams | None = None


def _check_model_choice(msg: SendInput) -> None:
    """The model and the model parameters the send asks for (whether the model's
    family honours them is checked once the model is known: reply_plan.choose)."""
    if msg.model_override is not None:
        check_model_id("model_override", msg.model_override)
    if msg.params is not None:
        check_params(msg.params)


def check_input(msg: SendInput) -> None:
    check_text("content", msg.content, max_len=MAX_CONTENT)
    _check_model_choice(msg)
    if msg.system_prompt_overlay is not None:
        check_text("system_prompt_overlay", msg.system_prompt_overlay, max_len=MAX_PREAMBLE)
    check_metadata("metadata", msg.metadata)
    unknown = msg.include_events - EVENTS_ON_REQUEST
    if unknown:
        raise InvalidInput(
            "include_events",
            f"unknown events {sorted(unknown)}: one of {sorted(EVENTS_ON_REQUEST)}",
        )
    if len(msg.tools) > MAX_CLIENT_TOOLS:
        raise InvalidInput("tools", f"at most {MAX_CLIENT_TOOLS} tools")
    names = [t.name for t in msg.tools]
    if len(set(names)) != len(names):
        raise InvalidInput("tools", "tool names must be unique")
    if PROPOSE_PROFILE_SWITCH in names:
        raise InvalidInput("tools", f"{PROPOSE_PROFILE_SWITCH!r} is reserved")
    for r in msg.tool_results:
        check_text("tool_results", r.output, max_len=MAX_CONTENT)
    for a in msg.tool_approvals:
        if a.reason is not None:
            check_text("tool_approvals", a.reason, max_len=MAX_DESCRIPTION)
    if msg.multitask_strategy not in STRATEGIES:
        raise InvalidInput("multitask_strategy", f"must be one of {', '.join(STRATEGIES)}")
    if msg.regenerate:
        return  # no message of its own: the last user message is answered again
    if not msg.content.strip() and not msg.tool_results and not msg.tool_approvals:
        raise InvalidInput("content", "must not be empty")


def check_tool_results(
    pending: tuple[ToolCall, ...], msg: SendInput, expired: bool = False
) -> None:
    """The send answers exactly the calls the previous reply waits for: the client's
    with ``toolResults``, those waiting for approval with ``toolApprovals``, unless
    they expired (``expired``: then they count as denied and an answer is optional,
    but one that is given must still name exactly those calls)."""
    answered = [r.tool_call_id for r in msg.tool_results]
    expected = [c.id for c in pending if not c.approval]
    if expected and sorted(answered) != sorted(expected):
        raise InvalidInput(
            "tool_results",
            "the previous reply is waiting for client tool results: send toolResults "
            f"answering exactly the calls {expected}",
        )
    if not expected and answered:
        raise InvalidInput("tool_results", "no reply is waiting for client tool results")
    approvals = [a.tool_call_id for a in msg.tool_approvals]
    waiting = [c.id for c in pending if c.approval]
    if waiting and (approvals or not expired) and sorted(approvals) != sorted(waiting):
        raise InvalidInput(
            "tool_approvals",
            "the previous reply is waiting for approvals: send toolApprovals "
            f"answering exactly the calls {waiting}",
        )
    if not waiting and approvals:
        raise InvalidInput("tool_approvals", "no reply is waiting for approvals")


def waiting_calls(
    latest: Run | None, agent: Agent, now: datetime
) -> tuple[tuple[ToolCall, ...], bool]:
    """The calls the latest run waits for (the send's results and approvals answer
    them), and whether they waited longer than the agent's
    ``approval_timeout_minutes`` since the run ended: those waiting for approval
    then count as denied ("expired"). No job expires them: the next send does."""
    if latest is None or latest.status != "requires_action":
        return (), False
    ended = latest.finished_at
    limit = timedelta(minutes=agent.approval_timeout_minutes)
    return latest.pending_tool_calls, ended is not None and now - ended > limit


def approved_calls(
    pending: tuple[ToolCall, ...], msg: SendInput, expired: bool
) -> tuple[ToolCall, ...]:
    """The waiting calls the send approves (none once they expired), in the order
    the model made them, as the model made them: the reply runs them before its
    first model call, with the events of any server-side call."""
    if expired or not msg.tool_approvals:
        return ()
    yes = {a.tool_call_id for a in msg.tool_approvals if a.approved}
    return tuple(
        msgspec.structs.replace(c, approval=False) for c in pending if c.approval and c.id in yes
    )


def _not_approved(call: ToolCall, msg: SendInput, expired_after: int | None) -> str | None:
    """What the model reads of a waiting call that will not run (None: it runs)."""
    if expired_after is not None:
        return f"error: the call was not run: nobody approved it within {expired_after} minutes"
    answer = next(a for a in msg.tool_approvals if a.tool_call_id == call.id)
    if answer.approved:
        return None
    reason = (answer.reason or "").strip()
    return "error: the user denied this call; it was not run" + f". Reason: {reason}" * bool(reason)


async def sender_of(
    threads: Threads, who: Principal, thread: Thread, msg: SendInput
) -> tuple[str | None, str | None, str | None]:
    """Who posts the message (id, name and role in the thread): the JWT's user, or
    the API key caller's ``sender_id``; a multiplayer thread takes only its
    participants (the others have no role)."""
    sender_id = msg.sender_id
    if msg.sender_name is not None:
        check_text("sender_name", msg.sender_name, max_len=MAX_TITLE)
    if sender_id is not None:
        check_text("sender_id", sender_id, max_len=MAX_USER_ID, required=True)
    if who.user_id is not None:
        if sender_id is not None and sender_id != who.user_id:
            raise PermissionDenied("a user token may only post as its own user")
        sender_id = who.user_id
    if thread.kind == "multiplayer":
        if sender_id is None:
            raise InvalidInput(
                "sender_id", "required to post to a multiplayer thread with an API key"
            )
        member = await threads.participant(who.org_id, thread.id, sender_id)
        if member is None:
            raise PermissionDenied("only participants may post to this thread")
        return sender_id, msg.sender_name or member.display_name, member.role
    return sender_id, msg.sender_name, None


def new_messages(
    clock: Clock,
    run: Run,
    msg: SendInput,
    pending: tuple[ToolCall, ...],
    sender_id: str | None,
    sender_name: str | None,
    expired_after: int | None = None,
) -> list[Message]:
    """The messages a send stores: the results of the pending client-side tool
    calls (named by their calls), what the model reads of the waiting calls that
    were denied, or expired (``expired_after``: the agent's limit in minutes, when
    they did), then the user's message (unless the send only answers tool calls).
    The approved calls' results come later, from the reply that runs them."""
    if msg.regenerate:
        return []
    names = {c.id: c.name for c in pending}
    new = [
        new_message(
            clock,
            run,
            "tool",
            r.output,
            tool_call_id=r.tool_call_id,
            sender_name=names.get(r.tool_call_id),
        )
        for r in msg.tool_results
    ]
    for call in pending:
        said = _not_approved(call, msg, expired_after) if call.approval else None
        if said is not None:
            new.append(
                new_message(clock, run, "tool", said, tool_call_id=call.id, sender_name=call.name)
            )
    if msg.content or not (msg.tool_results or msg.tool_approvals):
        new.append(
            new_message(
                clock, run, "user", msg.content, sender_name=sender_name, sender_id=sender_id
            )
        )
    return new


def agent_of(inputs: TurnInputs) -> Agent:
    if inputs.agent is None:
        raise NotFound("agent not found")
    return inputs.agent


def pending_tool_calls(latest: Run | None) -> tuple[ToolCall, ...]:
    """The client-side tool calls the latest run waits for (its results may answer them)."""
    return latest.pending_tool_calls if latest and latest.status == "requires_action" else ()


def new_run(who: Principal, thread_id: UUID, now: datetime) -> Run:
    return Run(
        id=uuid.uuid4(),
        org_id=who.org_id,
        thread_id=thread_id,
        status="running",
        started_at=now,
        heartbeat_at=now,
    )


def refuse_when_busy(latest: Run | None, fresh_since: datetime) -> None:
    """A reply still running (its heartbeat since ``fresh_since``) holds the thread:
    ``ThreadBusy`` before anything else (begin_turn would refuse it too)."""
    if latest and latest.status == "running" and latest.heartbeat_at >= fresh_since:
        raise ThreadBusy()
