"""Agent updates keep their timestamps honest and an empty change reads the agent
of the caller's organization. Written to kill the mutants `make mutation` found
alive in ``agentsvc_core.use_cases.agents`` (docs/development.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest

from agentsvc_adapters.memory import MemoryStorage
from agentsvc_core.entities import Principal, ToolProfile
from agentsvc_core.entities.model_params import ModelParams
from agentsvc_core.errors import InvalidInput, NotFound
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


async def test_an_agents_model_parameters_are_kept_checked_and_replaced() -> None:
    agents = Agents(MemoryStorage().agents, SteppingClock(), default_model="local")
    params = ModelParams(temperature=0.2, stop=("END",))
    made = await agents.create(
        ORG, AgentDraft(name="a", model_params=params, approval_timeout_minutes=5)
    )
    assert (made.model_params, made.approval_timeout_minutes) == (params, 5)
    assert (await agents.get(ORG, made.id)).model_params == params
    with pytest.raises(InvalidInput) as caught:
        await agents.create(ORG, AgentDraft(name="b", model_params=ModelParams(top_p=2)))
    assert (caught.value.field, caught.value.problem) == (
        "model_params.topP",
        "must be between 0 and 1",
    )
    with pytest.raises(InvalidInput) as caught:
        await agents.update(ORG, made.id, AgentChanges(model_params=ModelParams(temperature=3)))
    assert caught.value.field == "model_params.temperature"
    assert (await agents.get(ORG, made.id)).model_params == params  # a refused change: none
    other = ModelParams(max_output_tokens=10)
    changed = await agents.update(ORG, made.id, AgentChanges(model_params=other))
    assert changed.model_params == other
    cleared = await agents.update(ORG, made.id, AgentChanges(model_params=None))
    assert cleared.model_params is None
    plain = await agents.create(ORG, AgentDraft(name="c"))
    assert plain.model_params is None
