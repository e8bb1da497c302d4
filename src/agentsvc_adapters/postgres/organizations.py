"""Organizations on PostgreSQL."""

from __future__ import annotations

from agentsvc_adapters.postgres.pool import Repo
from agentsvc_core.entities import Organization
from agentsvc_core.errors import NotFound
from agentsvc_core.ports import OrganizationRepository


class PostgresOrganizations(Repo, OrganizationRepository):
    async def ensure(self, org: Organization) -> Organization:
        # Insert unless present and read the row in one statement. Under READ
        # COMMITTED a concurrent inserter of the same id makes our insert wait and
        # then do nothing, while this statement's snapshot (taken before the other
        # committed) cannot see the winner: then one more read, in a new snapshot.
        row = await self._one(
            "WITH ins AS (INSERT INTO organizations (org_id, created_at) VALUES (%s, %s)"
            " ON CONFLICT (org_id) DO NOTHING RETURNING org_id, created_at)"
            " SELECT org_id, created_at FROM ins"
            " UNION ALL SELECT org_id, created_at FROM organizations WHERE org_id = %s"
            " LIMIT 1",
            (org.id, org.created_at, org.id),
        )
        if row is None:
            return await self.get(org.id)
        return Organization(id=row[0], created_at=row[1])

    async def get(self, org_id: str) -> Organization:
        row = await self._one(
            "SELECT org_id, created_at FROM organizations WHERE org_id = %s", (org_id,)
        )
        if row is None:
            raise NotFound("organization not found")
        return Organization(id=row[0], created_at=row[1])
