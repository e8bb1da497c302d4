"""Agent updates keep their timestamps honest and an empty change reads the agent
of the caller's organization. Written to kill the mutants `make mutation` found
alive in ``agentsvc_core.use_cases.agents`` (docs/development.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest

from agentsvc_adapters.memory import MemoryStorage
from agentsvc_core.entities import Principal, ToolProfile
from agentsvc_core.errors import NotFound
from agentsvc_core.ports import Clock
from agentsvc_core.use_cases import AgentChanges, AgentDraft, Agents

ORG = Principal(org_id="org-a", method="api_key")
OTHER = Principal(org_id="org-b", method="api_key")


class SteppingClock(Clock):
    """Each reading is one minute after the last."""

    def __init__(self) -> None:
        self.at = datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        self.at += timedelta(minutes=1)
        return self.at


async def test_an_update_stamps_updated_at_and_keeps_created_at() -> None:
    clock = SteppingClock()
    agents = Agents(MemoryStorage().agents, clock, default_model="local")
    profiles = {"p": ToolProfile(tools=("t",))}
    created = await agents.create(ORG, AgentDraft(name="a", tool_profiles=profiles))
    assert isinstance(created.id, UUID)
    assert created.tool_profiles == profiles
    assert created.created_at == created.updated_at == clock.at
    changed = await agents.update(ORG, created.id, AgentChanges(name="b"))
    assert changed.name == "b"
    assert changed.created_at == created.created_at
    assert changed.updated_at == clock.at > created.updated_at
    assert await agents.get(ORG, created.id) == changed


async def test_an_empty_update_reads_the_agent_of_the_callers_organization() -> None:
    clock = SteppingClock()
    agents = Agents(MemoryStorage().agents, clock, default_model="local")
    created = await agents.create(ORG, AgentDraft(name="a"))
    assert await agents.update(ORG, created.id, AgentChanges()) == created
    with pytest.raises(NotFound):
        await agents.update(OTHER, created.id, AgentChanges())
