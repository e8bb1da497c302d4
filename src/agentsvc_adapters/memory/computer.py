"""Computer instances in memory: the agent's existence and the one active
instance per agent and thread are checked as PostgreSQL's foreign key and
partial unique index do (migration 0024). No method awaits between its read and
its write, so on one event loop each is atomic."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from uuid import UUID

from agentsvc_core.entities.computer import ACTIVE, RUNNING, ComputerInstance
from agentsvc_core.errors import Conflict, NotFound
from agentsvc_core.ports.computer import ComputerStore

Exists = Callable[[str, UUID], bool]


class MemoryComputers(ComputerStore):
    def __init__(self, agent_exists: Exists) -> None:
        self._agent_exists = agent_exists
        self._instances: dict[UUID, ComputerInstance] = {}

    def drop_agent(self, org_id: str, agent_id: UUID) -> None:
        for key in [
            k for k, i in self._instances.items() if (i.org_id, i.agent_id) == (org_id, agent_id)
        ]:
            del self._instances[key]

    def _active(
        self, org_id: str, agent_id: UUID, thread_id: UUID | None
    ) -> ComputerInstance | None:
        for i in self._instances.values():
            if (i.org_id, i.agent_id, i.thread_id) == (org_id, agent_id, thread_id) and (
                i.status in ACTIVE
            ):
                return i
        return None

    async def add(self, instance: ComputerInstance) -> ComputerInstance:
        if not self._agent_exists(instance.org_id, instance.agent_id):
            raise NotFound("agent not found")
        if instance.status in ACTIVE and self._active(
            instance.org_id, instance.agent_id, instance.thread_id
        ):
            raise Conflict("the computer has an active instance", code="INSTANCE_EXISTS")
        self._instances[instance.id] = instance
        return instance

    async def get(self, org_id: str, instance_id: UUID) -> ComputerInstance:
        found = self._instances.get(instance_id)
        if found is None or found.org_id != org_id:
            raise NotFound("computer instance not found")
        return found

    async def active(
        self, org_id: str, agent_id: UUID, thread_id: UUID | None
    ) -> ComputerInstance | None:
        return self._active(org_id, agent_id, thread_id)

    async def of_agent(self, org_id: str, agent_id: UUID) -> list[ComputerInstance]:
        mine = [i for i in self._instances.values() if (i.org_id, i.agent_id) == (org_id, agent_id)]
        return sorted(mine, key=lambda i: (i.created_at, i.id), reverse=True)

    async def of_thread(self, org_id: str, thread_id: UUID) -> ComputerInstance | None:
        for i in self._instances.values():
            if i.org_id == org_id and i.thread_id == thread_id and i.status in ACTIVE:
                return i
        return None

    async def modify(
        self,
        org_id: str,
        instance_id: UUID,
        change: Callable[[ComputerInstance], ComputerInstance],
    ) -> ComputerInstance:
        changed = change(await self.get(org_id, instance_id))
        self._instances[instance_id] = changed
        return changed

    async def idle_since(self, now: datetime, limit: int = 100) -> list[ComputerInstance]:
        due = [
            i
            for i in self._instances.values()
            if i.status in RUNNING and i.last_used_at + timedelta(seconds=i.idle_timeout_s) <= now
        ]
        return sorted(due, key=lambda i: (i.last_used_at, i.id))[:limit]
