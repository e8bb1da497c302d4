"""Agents on PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_adapters.postgres._rows import AGENT_COLS, to_agent
from agentsvc_adapters.postgres.pool import Repo, translate
from agentsvc_core.entities import Agent
from agentsvc_core.errors import NotFound
from agentsvc_core.ports import AgentRepository

_encoder = msgspec.json.Encoder()


def _agent_values(a: Agent) -> tuple[Any, ...]:
    profiles = None if a.tool_profiles is None else _encoder.encode(a.tool_profiles).decode()
    return (
        a.name,
        a.description,
        a.stable_preamble,
        a.default_model,
        profiles,
        a.default_profile,
        a.runtime_provider,
        a.created_at,
        a.updated_at,
        a.project_id,
        None if a.template is None else a.template.id,
        None if a.template is None else a.template.version,
        a.approval_timeout_minutes,
        None if a.model_params is None else _encoder.encode(a.model_params).decode(),
    )


class PostgresAgents(Repo, AgentRepository):
    async def add(self, agent: Agent) -> None:
        async with translate(), self._pool.connection() as conn:
            await conn.execute(
                "INSERT INTO agents (org_id, id, name, description, stable_preamble,"
                " default_model, tool_profiles, default_profile, runtime_provider,"
                " created_at, updated_at, project_id, template_id, template_version,"
                " approval_timeout_minutes, model_params)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s::json, %s, %s, %s, %s, %s, %s, %s, %s,"
                " %s::json)",
                (agent.org_id, agent.id, *_agent_values(agent)),
            )

    async def get(self, org_id: str, agent_id: UUID) -> Agent:
        row = await self._one(
            f"SELECT {AGENT_COLS} FROM agents WHERE org_id = %s AND id = %s", (org_id, agent_id)
        )
        if row is None:
            raise NotFound("agent not found")
        return to_agent(row)

    async def list(self, org_id: str, *, project_id: UUID | None = None) -> list[Agent]:
        rows = await self._all(
            f"SELECT {AGENT_COLS} FROM agents WHERE org_id = %s"
            " AND (%s::uuid IS NULL OR project_id = %s) ORDER BY created_at, id",
            (org_id, project_id, project_id),
        )
        return [to_agent(r) for r in rows]

    async def modify(self, org_id: str, agent_id: UUID, change: Callable[[Agent], Agent]) -> Agent:
        # The row lock serialises concurrent modifications of one agent: each
        # sees the previous one's result, so none is lost.
        async with translate(), self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                f"SELECT {AGENT_COLS} FROM agents WHERE org_id = %s AND id = %s FOR UPDATE",
                (org_id, agent_id),
            )
            row = await cur.fetchone()
            if row is None:
                raise NotFound("agent not found")
            updated = change(to_agent(row))
            await conn.execute(
                "UPDATE agents SET name = %s, description = %s, stable_preamble = %s,"
                " default_model = %s, tool_profiles = %s::json, default_profile = %s,"
                " runtime_provider = %s, created_at = %s, updated_at = %s, project_id = %s,"
                " template_id = %s, template_version = %s, approval_timeout_minutes = %s,"
                " model_params = %s::json WHERE org_id = %s AND id = %s",
                (*_agent_values(updated), org_id, agent_id),
            )
            return updated

    async def delete(self, org_id: str, agent_id: UUID) -> None:
        row = await self._one(
            "DELETE FROM agents WHERE org_id = %s AND id = %s RETURNING id", (org_id, agent_id)
        )
        if row is None:
            raise NotFound("agent not found")
