"""One kind of an agent's configuration (``/api/agents/{id}/<kind>``: plan, memory,
web...), kept as a sealed record keyed by the agent's id: the defaults until a PUT
(so an agent never configured needs no row), read by the turn with the thread
(``opened``) or on its own (``of``), changed without losing a concurrent change
(``SealedRecords.change``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Generic, TypeVar
from uuid import UUID

import msgspec

from agentsvc_core.entities import Principal
from agentsvc_core.ports import AgentRepository, SealedRecord, SecretBox, SecretStore, ToolSetup
from agentsvc_core.use_cases.sealed import SealedRecords

__all__ = ["AgentSettings"]


C = TypeVar("C", bound=msgspec.Struct)


class AgentSettings(Generic[C]):
    """A configuration of ``kind``: a Struct of ``typ`` whose defaults need only
    ``agent_id`` and ``org_id``."""

    def __init__(
        self,
        store: SecretStore,
        agents: AgentRepository,
        box: SecretBox,
        kind: str,
        typ: type[C],
    ) -> None:
        self._records = SealedRecords(store, box)
        self._agents = agents
        self._kind = kind
        self._typ = typ

    def _default(self, org: str, agent_id: UUID) -> C:
        return self._typ(agent_id=agent_id, org_id=org)

    async def of(self, org: str, agent_id: UUID) -> C:
        stored = await self._records.get(org, self._kind, str(agent_id), self._typ)
        return stored or self._default(org, agent_id)

    def opened(self, org: str, agent_id: UUID, records: Mapping[str, SealedRecord]) -> C:
        """From the records the turn read (defaults when none was stored)."""
        record = records.get(self._kind)
        if record is None:
            return self._default(org, agent_id)
        return self._records.open(org, self._kind, str(agent_id), record.value, self._typ)

    async def in_turn(self, org: str, agent_id: UUID, setup: ToolSetup | None) -> C:
        """For a tool source: from what the turn read, or read now outside a turn."""
        if setup is not None:
            return self.opened(org, agent_id, setup.records)
        return await self.of(org, agent_id)

    async def get(self, who: Principal, agent_id: UUID) -> C:
        await self._agents.get(who.org_id, agent_id)
        return await self.of(who.org_id, agent_id)

    async def _change(self, who: Principal, agent_id: UUID, apply: Callable[[C], C]) -> C:
        """``apply`` to the stored configuration (or the defaults); it may raise to
        refuse. A concurrent change of other fields is not lost."""
        await self._agents.get(who.org_id, agent_id)
        return await self._records.change(
            who.org_id,
            self._kind,
            str(agent_id),
            self._typ,
            lambda current: apply(current or self._default(who.org_id, agent_id)),
        )
