"""Projects (docs/projects.md) over the memory storage and a clock the test moves:
a project groups the agents and runners that name it, owns nothing, and its
delete detaches them. Changes are an admin's; another organization's project is
``NotFound`` wherever it is named."""

from __future__ import annotations

import uuid

import pytest

from agentsvc_adapters.clock import SystemClock
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_core.entities import Principal
from agentsvc_core.entities.project import Detached
from agentsvc_core.errors import InvalidInput, NotFound, PermissionDenied
from agentsvc_core.use_cases import AgentChanges, AgentDraft, Agents
from agentsvc_core.use_cases.projects import (
    ProjectChanges,
    ProjectDraft,
    Projects,
    check_project,
)
from agentsvc_core.use_cases.runners.definitions import RunnerChanges, RunnerDraft, Runners
from tests.unit.runner_world import AnyUrl
from tests.unit.turn_world import BOX, T0, Clock

ADMIN = Principal(org_id="org-a", method="api_key")
MEMBER = Principal(org_id="org-a", method="jwt", user_id="mia")
STRANGER = Principal(org_id="org-b", method="api_key")


class World:
    def __init__(self) -> None:
        self.storage = s = MemoryStorage()
        self.clock = Clock()
        self.projects = Projects(s.projects, s.agents, s.runners, self.clock)
        self.agents = Agents(s.agents, self.clock, "local", projects=s.projects)
        self.runners = Runners(s.runners, s.agents, BOX, AnyUrl(), self.clock, projects=s.projects)


@pytest.fixture
def w() -> World:
    return World()


async def test_create_get_list_and_change(w: World) -> None:
    made = await w.projects.create(ADMIN, ProjectDraft(name="Support", description="care"))
    assert (made.org_id, made.name, made.description) == ("org-a", "Support", "care")
    assert made.created_at == made.updated_at == T0
    w.clock.advance(5)
    second = await w.projects.create(ADMIN, ProjectDraft(name="Research"))
    assert second.description == ""
    assert await w.projects.get(MEMBER, made.id) == made
    assert await w.projects.list(MEMBER) == [made, second]
    assert await w.projects.list(STRANGER) == []
    w.clock.advance(5)
    renamed = await w.projects.update(ADMIN, made.id, ProjectChanges(name="Care"))
    assert (renamed.name, renamed.description) == ("Care", "care")
    assert (renamed.created_at, renamed.updated_at) == (T0, w.clock.at)
    described = await w.projects.update(ADMIN, made.id, ProjectChanges(description=""))
    assert (described.name, described.description) == ("Care", "")
    # nothing given: nothing changes, not even the time
    w.clock.advance(5)
    assert await w.projects.update(ADMIN, made.id, ProjectChanges()) == described
    assert await w.projects.get(ADMIN, made.id) == described


@pytest.mark.parametrize(
    ("draft", "field"),
    [
        (ProjectDraft(name=""), "name"),
        (ProjectDraft(name="   "), "name"),
        (ProjectDraft(name="n" * 257), "name"),
        (ProjectDraft(name="a\x00b"), "name"),
        (ProjectDraft(name="ok", description="d" * 10_001), "description"),
    ],
)
async def test_bad_fields_are_refused_naming_them(
    w: World, draft: ProjectDraft, field: str
) -> None:
    with pytest.raises(InvalidInput) as err:
        await w.projects.create(ADMIN, draft)
    assert err.value.field == field
    assert await w.projects.list(ADMIN) == []
    good = await w.projects.create(ADMIN, ProjectDraft(name="n" * 256, description="d" * 10_000))
    changes = ProjectChanges(name=draft.name, description=draft.description)
    with pytest.raises(InvalidInput) as err:
        await w.projects.update(ADMIN, good.id, changes)
    assert err.value.field == field
    assert await w.projects.get(ADMIN, good.id) == good


async def test_only_admins_change_projects(w: World) -> None:
    made = await w.projects.create(ADMIN, ProjectDraft(name="p"))
    with pytest.raises(PermissionDenied) as denied:
        await w.projects.create(MEMBER, ProjectDraft(name="q"))
    assert denied.value.detail == "projects are managed by the organization's admins"
    with pytest.raises(PermissionDenied):
        await w.projects.update(MEMBER, made.id, ProjectChanges(name="q"))
    with pytest.raises(PermissionDenied):
        await w.projects.delete(MEMBER, made.id)
    assert await w.projects.list(ADMIN) == [made]
    assert (await w.projects.members(MEMBER, made.id)).agents == []


async def test_members_are_the_agents_and_runners_that_name_the_project(w: World) -> None:
    p = await w.projects.create(ADMIN, ProjectDraft(name="p"))
    other = await w.projects.create(ADMIN, ProjectDraft(name="other"))
    first = await w.agents.create(ADMIN, AgentDraft(name="first", project_id=p.id))
    w.clock.advance(1)
    loose = await w.agents.create(ADMIN, AgentDraft(name="loose"))
    w.clock.advance(1)
    elsewhere = await w.agents.create(ADMIN, AgentDraft(name="elsewhere", project_id=other.id))
    w.clock.advance(1)
    joined = await w.agents.update(ADMIN, loose.id, AgentChanges(project_id=p.id))
    assert joined.project_id == p.id
    old = await w.runners.create(ADMIN, RunnerDraft(name="old", project_id=p.id))
    w.clock.advance(1)
    await w.runners.create(ADMIN, RunnerDraft(name="outside"))
    new = await w.runners.create(ADMIN, RunnerDraft(name="new"))
    new = await w.runners.update(ADMIN, new.id, RunnerChanges(project_id=p.id))
    assert new.project_id == p.id

    members = await w.projects.members(MEMBER, p.id)
    assert [a.name for a in members.agents] == ["first", "loose"]  # oldest first
    assert [r.name for r in members.runners] == ["new", "old"]  # newest first
    assert [a.id for a in await w.agents.list(MEMBER, project_id=p.id)] == [first.id, loose.id]
    assert [a.id for a in await w.agents.list(MEMBER, project_id=other.id)] == [elsewhere.id]
    assert len(await w.agents.list(MEMBER)) == 3
    assert [r.id for r in await w.runners.list_all(MEMBER, project_id=p.id)] == [new.id, old.id]
    with pytest.raises(NotFound, match="project not found"):
        await w.projects.members(STRANGER, p.id)

    # leaving: None; a change that does not name the project keeps it
    left = await w.agents.update(ADMIN, first.id, AgentChanges(project_id=None))
    assert left.project_id is None
    kept = await w.runners.update(ADMIN, old.id, RunnerChanges(name="older"))
    assert kept.project_id == p.id
    renamed = await w.agents.update(ADMIN, loose.id, AgentChanges(name="l"))
    assert renamed.project_id == p.id


async def test_delete_detaches_the_members_and_counts_them(w: World) -> None:
    p = await w.projects.create(ADMIN, ProjectDraft(name="p"))
    agents = [await w.agents.create(ADMIN, AgentDraft(name=n, project_id=p.id)) for n in "ab"]
    runner = await w.runners.create(ADMIN, RunnerDraft(name="r", project_id=p.id))
    assert await w.projects.delete(ADMIN, p.id) == Detached(agents=2, runners=1)
    assert [(await w.agents.get(ADMIN, a.id)).project_id for a in agents] == [None, None]
    assert (await w.runners.get(ADMIN, runner.id)).project_id is None
    with pytest.raises(NotFound):
        await w.projects.get(ADMIN, p.id)
    with pytest.raises(NotFound):
        await w.projects.delete(ADMIN, p.id)


async def test_a_project_not_of_the_organization_is_not_found_wherever_it_is_named(
    w: World,
) -> None:
    theirs = await w.projects.create(STRANGER, ProjectDraft(name="theirs"))
    for pid in (theirs.id, uuid.uuid4()):
        with pytest.raises(NotFound, match="project not found"):
            await w.projects.get(ADMIN, pid)
        with pytest.raises(NotFound, match="project not found"):
            await w.projects.update(ADMIN, pid, ProjectChanges(name="x"))
        with pytest.raises(NotFound, match="project not found"):
            await w.projects.delete(ADMIN, pid)
        with pytest.raises(NotFound, match="project not found"):
            await w.agents.create(ADMIN, AgentDraft(name="x", project_id=pid))
        with pytest.raises(NotFound, match="project not found"):
            await w.runners.create(ADMIN, RunnerDraft(name="x", project_id=pid))
    assert await w.agents.list(ADMIN) == []
    assert await w.runners.list_all(ADMIN) == []
    agent = await w.agents.create(ADMIN, AgentDraft(name="a"))
    with pytest.raises(NotFound, match="project not found"):
        await w.agents.update(ADMIN, agent.id, AgentChanges(project_id=theirs.id))
    assert await w.agents.get(ADMIN, agent.id) == agent
    assert await w.projects.get(STRANGER, theirs.id) == theirs


async def test_without_a_project_store_no_project_can_be_named() -> None:
    s = MemoryStorage()
    agents = Agents(s.agents, SystemClock(), "local")
    with pytest.raises(NotFound) as err:
        await agents.create(ADMIN, AgentDraft(name="x", project_id=uuid.uuid4()))
    assert err.value.detail == "project not found"
    await check_project(None, "org-a", None)  # naming none is always fine
    made = await agents.create(ADMIN, AgentDraft(name="x"))
    assert made.project_id is None
