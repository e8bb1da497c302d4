"""Projects in memory. ``delete`` detaches the members through the agents' and
runners' stores (``detach``, filled in by ``MemoryStorage``: what PostgreSQL's
UPDATE does in the same transaction); nothing awaits in between, so no other call
sees it half done. Those stores refuse a member naming a project ``has`` does not
know, as PostgreSQL's foreign keys do."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar
from uuid import UUID

import msgspec

from agentsvc_core.entities import Agent
from agentsvc_core.entities.project import Detached, Project
from agentsvc_core.entities.runner import Runner
from agentsvc_core.errors import NotFound
from agentsvc_core.ports.projects import ProjectStore

Detach = Callable[[str, UUID], int]  # (org, project) -> how many members it let go
Exists = Callable[[str, UUID], bool]  # (org, project) -> whether it is there
Member = TypeVar("Member", Agent, Runner)


def naming_a_project(exists: Exists, member: Member) -> Member:
    """``member`` as it is, if the project it names is its organization's (or it
    names none): a member store's foreign key."""
    if member.project_id is not None and not exists(member.org_id, member.project_id):
        raise NotFound("project not found")
    return member


def detach_members(members: dict[tuple[str, UUID], Member], org_id: str, project_id: UUID) -> int:
    """The members of the project (in a store keyed by organization and id) let go
    of it; how many there were."""
    keys = [k for k, m in members.items() if k[0] == org_id and m.project_id == project_id]
    for key in keys:
        members[key] = msgspec.structs.replace(members[key], project_id=None)
    return len(keys)


class MemoryProjects(ProjectStore):
    def __init__(self) -> None:
        self._projects: dict[tuple[str, UUID], Project] = {}
        # the members' stores, by kind ("agents", "runners")
        self.detach: dict[str, Detach] = {}

    def has(self, org_id: str, project_id: UUID) -> bool:
        return (org_id, project_id) in self._projects

    def _get(self, org_id: str, project_id: UUID) -> Project:
        try:
            return self._projects[(org_id, project_id)]
        except KeyError:
            raise NotFound("project not found") from None

    async def add(self, project: Project) -> None:
        self._projects[(project.org_id, project.id)] = project

    async def get(self, org_id: str, project_id: UUID) -> Project:
        return self._get(org_id, project_id)

    async def list(self, org_id: str) -> list[Project]:
        mine = [p for (org, _), p in self._projects.items() if org == org_id]
        return sorted(mine, key=lambda p: (p.created_at, p.id))

    async def modify(
        self, org_id: str, project_id: UUID, change: Callable[[Project], Project]
    ) -> Project:
        updated = change(self._get(org_id, project_id))
        self._projects[(org_id, project_id)] = updated
        return updated

    async def delete(self, org_id: str, project_id: UUID) -> Detached:
        self._get(org_id, project_id)
        detached = Detached(
            agents=self.detach["agents"](org_id, project_id),
            runners=self.detach["runners"](org_id, project_id),
        )
        del self._projects[(org_id, project_id)]
        return detached
