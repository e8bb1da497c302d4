"""Storage of projects (``Storage.projects``).

Every call is scoped by organization; another organization's project is
``NotFound``. A project's members are the agents and runners whose ``project_id``
names it: ``delete`` detaches them and deletes the project in one step, so no
member is left naming a project that is gone (a concurrent change that names the
project waits for the delete, then finds it gone: ``NotFound``). Adapters raise
what storage raises (``NotFound``, ``StorageError``, ``Unavailable``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol
from uuid import UUID

from agentsvc_core.entities.project import Detached, Project

__all__ = ["ProjectStore"]


class ProjectStore(Protocol):
    async def add(self, project: Project) -> None: ...

    async def get(self, org_id: str, project_id: UUID) -> Project:
        """Raises ``NotFound``."""
        ...

    async def list(self, org_id: str) -> list[Project]:
        """Oldest first."""
        ...

    async def modify(
        self, org_id: str, project_id: UUID, change: Callable[[Project], Project]
    ) -> Project:
        """Atomic read-change-write, as ``AgentRepository.modify``. Raises ``NotFound``."""
        ...

    async def delete(self, org_id: str, project_id: UUID) -> Detached:
        """Set the ``project_id`` of the project's agents and runners to None, delete
        the project, and answer how many of each it let go of. Raises ``NotFound``."""
        ...
