"""The generated client's computer calls against the real service (memory storage,
no sandbox provider): the configuration read and changed, the instances listed, an
unknown instance's command as the typed error; and an operator's command's events
read from a stream of the service's frames."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from agentsvc_client import AsyncClient, Client, errors
from agentsvc_client.computer import ExecEvent, exec_events
from tests.client.conftest import KEY
from tests.e2e.service import Service


def test_the_computer_through_the_client(memory_service: Service) -> None:
    with Client(memory_service.url, KEY) as c:
        agent = c.agents.create(name="Builder", runtime_provider="alternative")
        config = c.agents.computer.get(agent.id)
        assert (config.enabled, config.provider, config.effective_provider) == (False, None, "e2b")
        changed = c.agents.computer.put(agent.id, enabled=True, provider="local", memory_mb=1024)
        assert (changed.enabled, changed.effective_provider, changed.memory_mb) == (
            True,
            "local",
            1024,
        )
        with pytest.raises(errors.ValidationError):
            c.agents.computer.put(agent.id, memory_mb=1)
        assert c.agents.computer.instances(agent.id) == []
        with pytest.raises(errors.NotFound):
            c.agents.computer.exec(agent.id, str(uuid.uuid4()), "true")
        thread = c.threads.create(agent_id=agent.id)
        with pytest.raises(errors.NotFound):
            c.threads.computer(thread.id)

    async def go() -> None:
        async with AsyncClient(memory_service.url, KEY) as a:
            with pytest.raises(errors.NotFound):
                await a.agents.computer.exec(agent.id, str(uuid.uuid4()), "true")

    asyncio.run(go())


def test_exec_events_are_read_from_the_frames() -> None:
    frames = (
        'id: 1\nevent: exec_started\ndata: {"instance_id":"i","command":"ls"}\n\n'
        'id: 2\nevent: stdout\ndata: {"data":"a\\n"}\n\n'
        ": keep-alive\n\n"
        'id: 3\nevent: exit\ndata: {"exit_code":0,"timed_out":false}\n\n'
    )
    assert exec_events(frames.split("\n")) == [
        ExecEvent("exec_started", {"instance_id": "i", "command": "ls"}),
        ExecEvent("stdout", {"data": "a\n"}),
        ExecEvent("exit", {"exit_code": 0, "timed_out": False}),
    ]
