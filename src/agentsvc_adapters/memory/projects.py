"""Projects in memory. ``delete`` detaches the members through the agents' and
runners' stores (``detach``, filled in by ``MemoryStorage``: what PostgreSQL's
UPDATE does in the same transaction); nothing awaits in between, so no other call
sees it half done. Those stores refuse a member naming a project ``has`` does not
know, as PostgreSQL's foreign keys do."""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from agentsvc_core.entities.project import Detached, Project
from agentsvc_core.errors import NotFound
from agentsvc_core.ports.projects import ProjectStore

Detach = Callable[[str, UUID], int]  # (org, project) -> how many members it let go


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
