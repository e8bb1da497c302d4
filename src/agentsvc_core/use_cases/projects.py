"""Projects (docs/projects.md): a named grouping of an organization's agents and
runners, for people to find their way among many. A project owns nothing: an agent
or a runner names its project (``projectId`` on create and PATCH), the project's
``members`` are those that name it, and deleting it detaches them (their
``project_id`` becomes null) and deletes nothing else.

Reads are open to the organization's members; every change is an admin's. A
project another organization owns is ``NotFound``, in a path or in a body.
"""

from __future__ import annotations

import uuid
from uuid import UUID

import msgspec
from msgspec import UNSET, UnsetType

from agentsvc_core.entities import Agent, Principal
from agentsvc_core.entities.project import Detached, Project
from agentsvc_core.entities.runner import Runner
from agentsvc_core.errors import NotFound, PermissionDenied
from agentsvc_core.ports import AgentRepository, Clock
from agentsvc_core.ports.projects import ProjectStore
from agentsvc_core.ports.runners import RunnerStore
from agentsvc_core.rules import MAX_DESCRIPTION, MAX_NAME, check_text

__all__ = ["Members", "ProjectChanges", "ProjectDraft", "Projects", "check_project"]


class ProjectDraft(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    description: str = ""


class ProjectChanges(msgspec.Struct, frozen=True, kw_only=True):
    name: str | UnsetType = UNSET
    description: str | UnsetType = UNSET


class Members(msgspec.Struct, frozen=True, kw_only=True):
    """A project's agents (oldest first) and runners (newest first), as their own
    lists are ordered."""

    agents: list[Agent]
    runners: list[Runner]


async def check_project(
    projects: ProjectStore | None, org_id: str, project_id: UUID | None
) -> None:
    """A ``projectId`` an agent or a runner is given names a project of the
    organization (``NotFound`` otherwise, as any id of another organization)."""
    if project_id is None:
        return
    if projects is None:
        raise NotFound("project not found")
    await projects.get(org_id, project_id)


class Projects:
    def __init__(
        self, store: ProjectStore, agents: AgentRepository, runners: RunnerStore, clock: Clock
    ) -> None:
        self._store = store
        self._agents = agents
        self._runners = runners
        self._clock = clock

    @staticmethod
    def _admin(who: Principal) -> None:
        if not who.is_admin:
            raise PermissionDenied("projects are managed by the organization's admins")

    async def create(self, who: Principal, draft: ProjectDraft) -> Project:
        self._admin(who)
        now = self._clock.now()
        project = Project(
            id=uuid.uuid4(),
            org_id=who.org_id,
            name=check_text("name", draft.name, max_len=MAX_NAME, required=True),
            description=check_text("description", draft.description, max_len=MAX_DESCRIPTION),
            created_at=now,
            updated_at=now,
        )
        await self._store.add(project)
        return project

    async def list(self, who: Principal) -> list[Project]:
        return await self._store.list(who.org_id)

    async def get(self, who: Principal, project_id: UUID) -> Project:
        return await self._store.get(who.org_id, project_id)

    async def update(self, who: Principal, project_id: UUID, changes: ProjectChanges) -> Project:
        self._admin(who)
        fields: dict[str, str] = {}
        if not isinstance(changes.name, UnsetType):
            fields["name"] = check_text("name", changes.name, max_len=MAX_NAME, required=True)
        if not isinstance(changes.description, UnsetType):
            fields["description"] = check_text(
                "description", changes.description, max_len=MAX_DESCRIPTION
            )
        if not fields:
            return await self._store.get(who.org_id, project_id)
        now = self._clock.now()
        return await self._store.modify(
            who.org_id,
            project_id,
            lambda current: msgspec.structs.replace(current, updated_at=now, **fields),
        )

    async def members(self, who: Principal, project_id: UUID) -> Members:
        await self._store.get(who.org_id, project_id)
        return Members(
            agents=await self._agents.list(who.org_id, project_id=project_id),
            runners=await self._runners.list_all(who.org_id, project_id=project_id),
        )

    async def delete(self, who: Principal, project_id: UUID) -> Detached:
        """Detach the project's agents and runners, then delete it."""
        self._admin(who)
        return await self._store.delete(who.org_id, project_id)
