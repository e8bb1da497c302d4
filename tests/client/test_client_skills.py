"""The generated client's skills calls against the real service: a skill made
inline, found in the registry and installed, given to an agent in both forms of
bindings, renamed and synced; a taken name as the client's typed error."""

from __future__ import annotations

import pytest

from agentsvc_client import AsyncClient, Client, errors
from agentsvc_client.models import BindingBody
from tests.client.conftest import KEY
from tests.e2e.service import Service

TEA = "---\nname: client-tea\ndescription: Brew tea for the client.\n---\nSteep."


def test_skills_through_the_client(memory_service: Service) -> None:
    with Client(memory_service.url, KEY) as c:
        tea = c.skills.create(content=TEA, files={"a.md": "A"})
        assert (tea.name, tea.version, tea.source.type) == ("client-tea", 1, "inline")
        assert [(f.path, f.size) for f in tea.files] == [("a.md", 1)]
        with pytest.raises(errors.Conflict) as taken:
            c.skills.create(content=TEA)
        assert taken.value.error == "SKILL_NAME_TAKEN"
        [found] = c.skills.browse(q="commit message")
        installed = c.skills.create(registry_id=found.id)
        assert installed.body == found.body
        synced = c.skills.sync(installed.id)
        assert (synced.changed, synced.to_version) == (False, 1)
        agent = c.agents.create(name="Skilled")
        by_ids = c.agents.skills.set(agent.id, skill_ids=[tea.id])
        assert [(b.skill_id, b.enabled) for b in by_ids] == [(tea.id, True)]
        full = c.agents.skills.set(
            agent.id, skills=[BindingBody(skill_id=installed.id, pinned_version=1)]
        )
        assert [(b.skill_id, b.pinned_version) for b in full] == [(installed.id, 1)]
        assert c.agents.skills.list(agent.id) == full
        renamed = c.skills.update(tea.id, name="house-tea", enabled=False)
        assert (renamed.name, renamed.status) == ("house-tea", "disabled")
        assert tea.id in [s.id for s in c.skills.list()]
        c.skills.delete(tea.id)
        with pytest.raises(errors.NotFound):
            c.skills.get(tea.id)


async def test_the_async_client_browses_skills(memory_service: Service) -> None:
    async with AsyncClient(memory_service.url, KEY) as c:
        listed = await c.skills.browse(category="engineering")
        assert listed
        assert {s.category for s in listed} == {"engineering"}
