"""Projects on PostgreSQL (``projects``; the ``project_id`` of ``agents`` and
``runners``; migration 0016).

``delete`` is one transaction: it locks the project's row ``FOR UPDATE`` first, so
a change of an agent or a runner that names the project meanwhile (its foreign key
check takes a share lock on that row) waits for the delete, then fails on the
key, which ``translate`` reads as "project not found": no member is left naming a
project that is gone."""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from agentsvc_adapters.postgres.pool import Repo, Row, translate
from agentsvc_core.entities.project import Detached, Project
from agentsvc_core.errors import NotFound
from agentsvc_core.ports.projects import ProjectStore

_COLS = "id, org_id, name, description, created_at, updated_at"


def _project(row: Row) -> Project:
    return Project(
        id=row[0],
        org_id=row[1],
        name=row[2],
        description=row[3],
        created_at=row[4],
        updated_at=row[5],
    )


class PostgresProjects(Repo, ProjectStore):
    async def add(self, project: Project) -> None:
        async with translate(), self._pool.connection() as conn:
            await conn.execute(
                f"INSERT INTO projects ({_COLS}) VALUES (%s, %s, %s, %s, %s, %s)",
                (
                    project.id,
                    project.org_id,
                    project.name,
                    project.description,
                    project.created_at,
                    project.updated_at,
                ),
            )

    async def get(self, org_id: str, project_id: UUID) -> Project:
        row = await self._one(
            f"SELECT {_COLS} FROM projects WHERE org_id = %s AND id = %s", (org_id, project_id)
        )
        if row is None:
            raise NotFound("project not found")
        return _project(row)

    async def list(self, org_id: str) -> list[Project]:
        rows = await self._all(
            f"SELECT {_COLS} FROM projects WHERE org_id = %s ORDER BY created_at, id", (org_id,)
        )
        return [_project(r) for r in rows]

    async def modify(
        self, org_id: str, project_id: UUID, change: Callable[[Project], Project]
    ) -> Project:
        # the row lock serialises concurrent changes of one project: none is lost
        async with translate(), self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                f"SELECT {_COLS} FROM projects WHERE org_id = %s AND id = %s FOR UPDATE",
                (org_id, project_id),
            )
            row = await cur.fetchone()
            if row is None:
                raise NotFound("project not found")
            updated = change(_project(row))
            await conn.execute(
                "UPDATE projects SET name = %s, description = %s, updated_at = %s"
                " WHERE org_id = %s AND id = %s",
                (updated.name, updated.description, updated.updated_at, org_id, project_id),
            )
            return updated

    async def delete(self, org_id: str, project_id: UUID) -> Detached:
        async with translate(), self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                "SELECT id FROM projects WHERE org_id = %s AND id = %s FOR UPDATE",
                (org_id, project_id),
            )
            if await cur.fetchone() is None:
                raise NotFound("project not found")
            counts = []
            for table in ("agents", "runners"):
                cur = await conn.execute(
                    f"UPDATE {table} SET project_id = NULL WHERE org_id = %s AND project_id = %s",
                    (org_id, project_id),
                )
                counts.append(cur.rowcount)
            await conn.execute(
                "DELETE FROM projects WHERE org_id = %s AND id = %s", (org_id, project_id)
            )
            return Detached(agents=counts[0], runners=counts[1])
