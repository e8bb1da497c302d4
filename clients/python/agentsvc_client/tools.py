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
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from msgspec import UNSET

from agentsvc_client.events import Event, RequiresAction, ToolCallInfo
from agentsvc_client.models import ClientToolBody, ToolResultBody

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


def run_tools(
    client: Client,
    thread_id: str,
    content: str,
    tools: Sequence[Tool],
    *,
    max_rounds: int = 10,
    **options: Any,
) -> Iterator[Event]:
    """Send ``content`` offering ``tools``; answer each ``requires_action`` by calling
    them; yield every event until a reply ends without asking (its ``Done`` or
    ``Error`` is the last event). ``options`` go to every send (``model_override``...).
    """
    definitions = [t.definition() for t in tools]
    results: list[ToolResultBody] | None = None
    for _ in range(max_rounds):
        stream = client.send_message(
            thread_id,
            content if results is None else "",
            tools=definitions,
            tool_results=UNSET if results is None else results,
            **options,
        )
        asked: RequiresAction | None = None
        for event in stream:
            if isinstance(event, RequiresAction):
                asked = event
            yield event
        if asked is None:
            return
        results = [_call(tools, call) for call in asked.tool_calls]
    raise ToolLoopExceeded(f"the agent still calls tools after {max_rounds} rounds")


async def arun_tools(
    client: AsyncClient,
    thread_id: str,
    content: str,
    tools: Sequence[Tool],
    *,
    max_rounds: int = 10,
    **options: Any,
) -> AsyncIterator[Event]:
    """``run_tools`` for the async client; tool functions may be ``async def``."""
    definitions = [t.definition() for t in tools]
    results: list[ToolResultBody] | None = None
    for _ in range(max_rounds):
        stream = client.send_message(
            thread_id,
            content if results is None else "",
            tools=definitions,
            tool_results=UNSET if results is None else results,
            **options,
        )
        asked: RequiresAction | None = None
        async for event in stream:
            if isinstance(event, RequiresAction):
                asked = event
            yield event
        if asked is None:
            return
        results = [await _acall(tools, call) for call in asked.tool_calls]
    raise ToolLoopExceeded(f"the agent still calls tools after {max_rounds} rounds")


__all__ = ["Tool", "ToolLoopExceeded", "arun_tools", "run_tools"]
