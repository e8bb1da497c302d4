"""Client-side tools answered by Python callables, with the ``local`` model ("call
get_time {}" makes it call an offered tool), sync and async."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from agentsvc_client import (
    Approval,
    AsyncClient,
    Client,
    Done,
    RequiresAction,
    Tool,
    arun_tools,
    run_tools,
    send_approvals,
)
from tests.client.conftest import KEY
from tests.client.test_client_webhooks import Receiver
from tests.e2e.service import Service
from tests.web.live import serve

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


def _refund_agent(c: Client, url: str) -> tuple[str, str]:
    """An agent with a webhook tool ``refund`` (on the loopback ``url``) that needs
    approval; a thread of it."""
    tool = c.tools.create(
        name=f"refund_{uuid.uuid4().hex[:6]}",
        url=f"{url}/refund",
        parameters={"type": "object"},
        approval="always",
    )
    agent = c.agents.create(name="Refunds").id
    c.agents.delegated.put(agent, tool_ids=[tool.id])
    return c.threads.create(agent_id=agent).id, tool.name


def test_on_approval_answers_calls_that_wait_for_a_person(memory_service: Service) -> None:
    receiver = Receiver()
    asked: list[Any] = []

    def ask_a_human(call: Any) -> Approval:
        asked.append(call)
        return Approval(approved=len(asked) == 1, reason=None if len(asked) == 1 else "twice")

    with serve(receiver) as url, Client(memory_service.url, KEY) as c:
        thread, name = _refund_agent(c, url)
        events = list(run_tools(c, thread, f"call {name} {{}}", [], on_approval=ask_a_human))
        assert [(call.name, call.kind) for call in asked] == [(name, "approval")]
        assert len(receiver.calls) == 1  # approved: called once
        assert isinstance(events[-1], Done)
        assert events[-1].content.startswith(f"The tool {name} returned")

        # without on_approval the loop stops where the turn waits; send_approvals answers
        events = list(run_tools(c, thread, f"call {name} {{}}", []))
        waiting = next(e for e in events if isinstance(e, RequiresAction))
        [call] = waiting.tool_calls
        assert call.needs_approval
        assert len(receiver.calls) == 1
        answered = list(send_approvals(c, thread, {call.id: Approval(False, "no receipt")}))
        assert len(receiver.calls) == 1  # denied: never called
        last = answered[-1]
        assert isinstance(last, Done)
        assert "the user denied this call" in last.content
        assert "no receipt" in last.content


async def test_arun_tools_takes_an_async_approver(memory_service: Service) -> None:
    receiver = Receiver()

    async def no(call: Any) -> bool:
        return False

    with serve(receiver) as url:
        with Client(memory_service.url, KEY) as c:
            thread, name = _refund_agent(c, url)
        async with AsyncClient(memory_service.url, KEY) as ac:
            content = f"call {name} {{}}"
            events = [e async for e in arun_tools(ac, thread, content, [], on_approval=no)]
        assert receiver.calls == []
    last = events[-1]
    assert isinstance(last, Done)
    assert last.content.endswith("error: the user denied this call; it was not run")
