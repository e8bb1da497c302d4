"""Projects: the memory and PostgreSQL adapters agree on the ProjectStore contract
(agentsvc_core/ports/projects.py): fields round-trip, the list is oldest first,
another organization's project is not found, ``delete`` detaches the project's
agents and runners (and answers how many) and deletes nothing else, the members'
lists filter by project, and no agent or runner can name a project that is not
its organization's or that is gone, even when the delete and the change race."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentsvc_core.entities.project import Detached, Project
from agentsvc_core.errors import NotFound
from tests.contract.conftest import Backend, now
from tests.contract.test_agents_contract import agent_in
from tests.contract.test_runners_contract import runner_in

text = st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"]), max_size=60)


def project_in(org: str, **over: object) -> Project:
    t = now()
    base = Project(
        id=uuid.uuid4(), org_id=org, name="p", description="", created_at=t, updated_at=t
    )
    return msgspec.structs.replace(base, **over)


@given(name=text, description=text)
@settings(max_examples=20, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_project_round_trips(backend: Backend, name: str, description: str) -> None:
    org = backend.fresh_org()
    p = project_in(org, name=name, description=description)
    backend.run(backend.storage.projects.add, p)
    assert backend.run(backend.storage.projects.get, org, p.id) == p


def test_the_list_is_the_organizations_oldest_first(backend: Backend) -> None:
    store = backend.storage.projects
    org, other = backend.fresh_org(), backend.fresh_org()
    t = now()
    later = project_in(org, name="later", created_at=t + timedelta(seconds=1))
    first = project_in(org, name="first", created_at=t)
    theirs = project_in(other)
    for p in (later, first, theirs):
        backend.run(store.add, p)
    assert backend.run(store.list, org) == [first, later]
    with pytest.raises(NotFound, match="project not found"):
        backend.run(store.get, other, first.id)
    with pytest.raises(NotFound):
        backend.run(store.modify, other, first.id, lambda p: p)
    with pytest.raises(NotFound):
        backend.run(store.delete, other, first.id)
    assert backend.run(store.list, org) == [first, later]


def test_modify_stores_the_change(backend: Backend) -> None:
    store = backend.storage.projects
    org = backend.fresh_org()
    p = project_in(org)
    backend.run(store.add, p)
    later = p.updated_at + timedelta(minutes=1)
    changed = backend.run(
        store.modify,
        org,
        p.id,
        lambda cur: msgspec.structs.replace(cur, name="n2", description="d2", updated_at=later),
    )
    assert changed == msgspec.structs.replace(p, name="n2", description="d2", updated_at=later)
    assert backend.run(store.get, org, p.id) == changed


def test_delete_detaches_the_members_and_deletes_nothing_else(backend: Backend) -> None:
    s = backend.storage
    org = backend.fresh_org()
    going, staying = project_in(org), project_in(org)
    for p in (going, staying):
        backend.run(s.projects.add, p)
    members = [agent_in(org, project_id=going.id) for _ in range(2)]
    kept = agent_in(org, project_id=staying.id)
    loose = agent_in(org)
    for a in (*members, kept, loose):
        backend.run(s.agents.add, a)
    runner = runner_in(org, project_id=going.id)
    other_runner = runner_in(org, project_id=staying.id)
    for r in (runner, other_runner):
        backend.run(s.runners.add, r)

    assert backend.run(lambda: s.agents.list(org, project_id=going.id)) == members
    assert backend.run(lambda: s.runners.list_all(org, project_id=going.id)) == [runner]
    assert len(backend.run(s.agents.list, org)) == 4

    assert backend.run(s.projects.delete, org, going.id) == Detached(agents=2, runners=1)
    for a in members:
        assert backend.run(s.agents.get, org, a.id) == msgspec.structs.replace(a, project_id=None)
    assert backend.run(s.runners.get, org, runner.id) == msgspec.structs.replace(
        runner, project_id=None
    )
    assert backend.run(s.agents.get, org, kept.id) == kept
    assert backend.run(s.agents.get, org, loose.id) == loose
    assert backend.run(s.runners.get, org, other_runner.id) == other_runner
    assert backend.run(s.projects.list, org) == [staying]
    with pytest.raises(NotFound):
        backend.run(s.projects.delete, org, going.id)
    assert backend.run(lambda: s.agents.list(org, project_id=going.id)) == []


def test_no_member_names_a_project_that_is_not_there(backend: Backend) -> None:
    s = backend.storage
    org, other = backend.fresh_org(), backend.fresh_org()
    theirs = project_in(other)
    backend.run(s.projects.add, theirs)
    for missing in (uuid.uuid4(), theirs.id):  # nowhere, and another organization's
        with pytest.raises(NotFound, match="project not found"):
            backend.run(s.agents.add, agent_in(org, project_id=missing))
        with pytest.raises(NotFound, match="project not found"):
            backend.run(s.runners.add, runner_in(org, project_id=missing))
        agent = agent_in(org)
        backend.run(s.agents.add, agent)
        with pytest.raises(NotFound, match="project not found"):
            backend.run(
                s.agents.modify,
                org,
                agent.id,
                lambda a, m=missing: msgspec.structs.replace(a, project_id=m),
            )
        assert backend.run(s.agents.get, org, agent.id) == agent
        r = runner_in(org)
        backend.run(s.runners.add, r)
        with pytest.raises(NotFound, match="project not found"):
            backend.run(s.runners.replace, msgspec.structs.replace(r, project_id=missing))
        assert backend.run(s.runners.get, org, r.id) == r


def test_a_change_racing_the_delete_never_leaves_a_member_naming_it(backend: Backend) -> None:
    """Many agents join the project while it is deleted: each either joined before
    the delete (and was detached) or failed with "project not found"."""
    s = backend.storage
    org = backend.fresh_org()
    project = project_in(org)
    backend.run(s.projects.add, project)
    agents = [agent_in(org) for _ in range(12)]
    for a in agents:
        backend.run(s.agents.add, a)

    async def join(agent_id: uuid.UUID) -> bool:
        try:
            await s.agents.modify(
                org, agent_id, lambda a: msgspec.structs.replace(a, project_id=project.id)
            )
        except NotFound:
            return False
        return True

    async def race() -> tuple[list[bool], Detached]:
        joins = [asyncio.create_task(join(a.id)) for a in agents]
        await asyncio.sleep(0)
        detached = await s.projects.delete(org, project.id)
        return list(await asyncio.gather(*joins)), detached

    joined, detached = backend.run(race)
    assert detached.agents == sum(joined)
    assert all(a.project_id is None for a in backend.run(s.agents.list, org))
