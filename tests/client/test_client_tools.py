"""Client-side tools answered by Python callables, with the ``local`` model ("call
get_time {}" makes it call an offered tool), sync and async."""

from __future__ import annotations

from typing import Any

import pytest

from agentsvc_client import AsyncClient, Client, Done, RequiresAction, Tool, arun_tools, run_tools
from tests.client.conftest import KEY
from tests.e2e.service import Service

pytestmark = pytest.mark.e2e

PARAMS = {"type": "object", "properties": {"zone": {"type": "string"}}}


def test_a_tool_call_is_answered_by_the_callable(memory_service: Service) -> None:
    calls: list[dict[str, Any]] = []

    def get_time(**arguments: Any) -> str:
        calls.append(arguments)
        return "12:34 in Lyon"

    with Client(memory_service.url, KEY) as c:
        thread = c.threads.create(agent_id=c.agents.create(name="Clock").id).id
        events = list(
            run_tools(
                c,
                thread,
                'call get_time {"zone": "CET"}',
                [Tool("get_time", "Now", PARAMS, get_time)],
            )
        )
        history = c.threads.messages.list(thread).messages
    assert calls == [{"zone": "CET"}]
    asked = [e for e in events if isinstance(e, RequiresAction)]
    assert [(t.name, t.arguments) for t in asked[0].tool_calls] == [("get_time", {"zone": "CET"})]
    dones = [e for e in events if isinstance(e, Done)]
    assert len(dones) == 2  # the step that asked, then the one that answered
    assert dones[-1].content == "The tool get_time returned: 12:34 in Lyon"
    assert events[-1] == dones[-1]
    assert history[-1].content == dones[-1].content


def test_a_failing_tool_tells_the_model(memory_service: Service) -> None:
    def broken(**_: Any) -> str:
        raise RuntimeError("the clock is broken")

    with Client(memory_service.url, KEY) as c:
        thread = c.threads.create(agent_id=c.agents.create(name="Broken").id).id
        events = list(
            run_tools(c, thread, "call get_time {}", [Tool("get_time", "Now", PARAMS, broken)])
        )
    last = events[-1]
    assert isinstance(last, Done)
    assert last.content == "The tool get_time returned: error: the clock is broken"


async def test_async_tools_may_be_coroutines(memory_service: Service) -> None:
    async def get_time(**_: Any) -> dict[str, str]:
        return {"time": "08:00"}

    async with AsyncClient(memory_service.url, KEY) as c:
        thread = (
            await c.threads.create(agent_id=(await c.agents.create(name="Async clock")).id)
        ).id
        events = [
            e
            async for e in arun_tools(
                c, thread, "call get_time {}", [Tool("get_time", "Now", PARAMS, get_time)]
            )
        ]
    last = events[-1]
    assert isinstance(last, Done)
    assert last.content == 'The tool get_time returned: {"time": "08:00"}'
