"""Client-side tools: your Python functions, called when the agent asks for them.

::

    def get_time(timezone: str = "UTC") -> str: ...

    clock = Tool(
        "get_time", "The current time", {"type": "object", "properties": {...}}, get_time
    )
    for event in run_tools(client, thread.id, "What time is it?", [clock]):
        ...

The agent's call ends its stream with ``requires_action``; ``run_tools`` calls each
function with the call's arguments (as keyword arguments), sends the results with
the next message (``toolResults``), and goes on until a reply ends without asking,
yielding every event of every step along the way.

Server-side tools that need a person's approval end a stream the same way, their
calls marked ``kind="approval"``. Give ``run_tools`` an ``on_approval`` function
(the call -> ``True``, ``False`` or ``Approval(approved, reason)``) to answer them
in the loop; without one, it stops at such a ``requires_action`` (its last event)
and you answer later with ``send_approvals``::

    for event in run_tools(client, thread.id, "Refund order A-17", [], on_approval=ask_a_human):
        ...
    # or, later, from the stored call id:
    for event in send_approvals(client, thread.id, {call_id: Approval(False, "no receipt")}):
        ...
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from msgspec import UNSET

from agentsvc_client.events import Event, RequiresAction, ToolCallInfo
from agentsvc_client.models import ClientToolBody, ToolApprovalBody, ToolResultBody

if TYPE_CHECKING:
    from agentsvc_client.client import AsyncClient, Client


@dataclass(frozen=True)
class Tool:
    """A tool the model may call: its name, what it does, its arguments' JSON Schema,
    and the function that runs it (``async def`` too, with ``arun_tools``).

    The function takes the call's arguments as keyword arguments; its result is sent
    as is when it is a string, as JSON otherwise. An exception it raises is sent back
    to the model as ``error: ...`` so that it can react (and is not raised here).
    """

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    function: Callable[..., Any] = field(default=lambda **_: "")

    def definition(self) -> ClientToolBody:
        return ClientToolBody(
            name=self.name, description=self.description, parameters=self.parameters
        )


@dataclass(frozen=True)
class Approval:
    """A person's answer to a call waiting for approval; ``reason`` is told to the
    model when it is denied."""

    approved: bool
    reason: str | None = None


# what ``on_approval`` answers: yes, no, or an ``Approval`` with a reason
Answer = bool | Approval


def approval_body(call_id: str, answer: Answer) -> ToolApprovalBody:
    given = answer if isinstance(answer, Approval) else Approval(bool(answer))
    if given.reason is None:
        return ToolApprovalBody(tool_call_id=call_id, approved=given.approved)
    return ToolApprovalBody(tool_call_id=call_id, approved=given.approved, reason=given.reason)


class ToolLoopExceeded(RuntimeError):
    """The agent kept calling tools for more rounds than allowed."""


def _output(result: Any) -> str:
    return result if isinstance(result, str) else json.dumps(result, default=str)


def _find(tools: Sequence[Tool], call: ToolCallInfo) -> Tool | None:
    return next((t for t in tools if t.name == call.name), None)


def _call(tools: Sequence[Tool], call: ToolCallInfo) -> ToolResultBody:
    tool = _find(tools, call)
    try:
        if tool is None:
            raise LookupError(f"no tool named {call.name}")
        output = _output(tool.function(**call.arguments))
    except Exception as exc:  # noqa: BLE001 - the model hears of it, as a tool would say
        output = f"error: {exc}"
    return ToolResultBody(tool_call_id=call.id, output=output)


async def _acall(tools: Sequence[Tool], call: ToolCallInfo) -> ToolResultBody:
    tool = _find(tools, call)
    try:
        if tool is None:
            raise LookupError(f"no tool named {call.name}")
        result = tool.function(**call.arguments)
        if inspect.isawaitable(result):
            result = await result
        output = _output(result)
    except Exception as exc:  # noqa: BLE001 - the model hears of it, as a tool would say
        output = f"error: {exc}"
    return ToolResultBody(tool_call_id=call.id, output=output)


def _answers(
    results: list[ToolResultBody] | None, approvals: list[ToolApprovalBody] | None
) -> dict[str, Any]:
    """The send's fields answering a ``requires_action`` (none for the first send)."""
    return {
        "tool_results": results or UNSET,
        "tool_approvals": approvals or UNSET,
    }


def run_tools(
    client: Client,
    thread_id: str,
    content: str,
    tools: Sequence[Tool],
    *,
    max_rounds: int = 10,
    on_approval: Callable[[ToolCallInfo], Answer] | None = None,
    **options: Any,
) -> Iterator[Event]:
    """Send ``content`` offering ``tools``; answer each ``requires_action`` by calling
    them (and ``on_approval`` for the calls waiting for approval); yield every event
    until a reply ends without asking (its ``Done`` or ``Error`` is the last event),
    or asks for approvals without ``on_approval`` (its ``Done`` is the last event:
    answer with ``send_approvals``). ``options`` go to every send (``model_override``...).
    """
    definitions = [t.definition() for t in tools]
    answers: dict[str, Any] | None = None
    for _ in range(max_rounds):
        stream = client.send_message(
            thread_id,
            content if answers is None else "",
            tools=definitions,
            **(answers or {}),
            **options,
        )
        asked: RequiresAction | None = None
        for event in stream:
            if isinstance(event, RequiresAction):
                asked = event
            yield event
        if asked is None:
            return
        waiting = [c for c in asked.tool_calls if c.needs_approval]
        if waiting and on_approval is None:
            return  # the turn waits for a person: send_approvals answers it
        answers = _answers(
            [_call(tools, c) for c in asked.tool_calls if not c.needs_approval],
            [approval_body(c.id, on_approval(c)) for c in waiting] if on_approval else None,
        )
    raise ToolLoopExceeded(f"the agent still calls tools after {max_rounds} rounds")


def send_approvals(
    client: Client,
    thread_id: str,
    answers: Mapping[str, Answer],
    *,
    results: Sequence[ToolResultBody] = (),
    **options: Any,
) -> Iterator[Event]:
    """Answer the calls a reply waits for: ``answers`` by call id (``True``,
    ``False`` or ``Approval(approved, reason)``), with ``results`` for your own
    tools' calls of the same ``requires_action``; the reply's events."""
    approvals = [approval_body(call_id, answer) for call_id, answer in answers.items()]
    yield from client.send_message(
        thread_id, "", **_answers(list(results) or None, approvals or None), **options
    )


async def arun_tools(
    client: AsyncClient,
    thread_id: str,
    content: str,
    tools: Sequence[Tool],
    *,
    max_rounds: int = 10,
    on_approval: Callable[[ToolCallInfo], Answer | Awaitable[Answer]] | None = None,
    **options: Any,
) -> AsyncIterator[Event]:
    """``run_tools`` for the async client; tool functions and ``on_approval`` may
    be ``async def``."""
    definitions = [t.definition() for t in tools]
    answers: dict[str, Any] | None = None
    for _ in range(max_rounds):
        stream = client.send_message(
            thread_id,
            content if answers is None else "",
            tools=definitions,
            **(answers or {}),
            **options,
        )
        asked: RequiresAction | None = None
        async for event in stream:
            if isinstance(event, RequiresAction):
                asked = event
            yield event
        if asked is None:
            return
        waiting = [c for c in asked.tool_calls if c.needs_approval]
        if waiting and on_approval is None:
            return  # the turn waits for a person: asend_approvals answers it
        approvals = []
        for c in waiting:
            assert on_approval is not None
            answer = on_approval(c)
            if inspect.isawaitable(answer):
                answer = await answer
            approvals.append(approval_body(c.id, answer))
        results = [await _acall(tools, c) for c in asked.tool_calls if not c.needs_approval]
        answers = _answers(results, approvals)
    raise ToolLoopExceeded(f"the agent still calls tools after {max_rounds} rounds")


async def asend_approvals(
    client: AsyncClient,
    thread_id: str,
    answers: Mapping[str, Answer],
    *,
    results: Sequence[ToolResultBody] = (),
    **options: Any,
) -> AsyncIterator[Event]:
    """``send_approvals`` for the async client."""
    approvals = [approval_body(call_id, answer) for call_id, answer in answers.items()]
    async for event in client.send_message(
        thread_id, "", **_answers(list(results) or None, approvals or None), **options
    ):
        yield event


__all__ = [
    "Approval",
    "Tool",
    "ToolLoopExceeded",
    "arun_tools",
    "asend_approvals",
    "run_tools",
    "send_approvals",
]
