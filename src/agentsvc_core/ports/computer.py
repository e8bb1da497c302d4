"""Where computer instances are kept (``entities/computer.py``). The sandboxes
themselves are the providers' (``ports/sandboxes.py``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol
from uuid import UUID

from agentsvc_core.entities.computer import ComputerInstance

__all__ = ["ComputerStore"]


class ComputerStore(Protocol):
    async def add(self, instance: ComputerInstance) -> ComputerInstance:
        """Store a new instance. At most one active instance (any status but
        ``destroyed``) per agent and thread (``thread_id`` None counts as one
        thread): a second is ``Conflict`` (two first uses raced: the caller reads
        the winner with ``active``). ``NotFound`` when the agent is gone."""
        ...

    async def get(self, org_id: str, instance_id: UUID) -> ComputerInstance:
        """``NotFound`` when there is none in this organization."""
        ...

    async def active(
        self, org_id: str, agent_id: UUID, thread_id: UUID | None
    ) -> ComputerInstance | None:
        """The agent's instance for this thread (None: the shared one), not destroyed."""
        ...

    async def of_agent(self, org_id: str, agent_id: UUID) -> list[ComputerInstance]:
        """The agent's instances, destroyed ones included, newest first."""
        ...

    async def of_thread(self, org_id: str, thread_id: UUID) -> ComputerInstance | None:
        """The thread's active instance (scope ``thread``), if any."""
        ...

    async def modify(
        self,
        org_id: str,
        instance_id: UUID,
        change: Callable[[ComputerInstance], ComputerInstance],
    ) -> ComputerInstance:
        """Apply ``change`` to the stored instance atomically (concurrent changes
        are serialised, none lost). ``NotFound`` when it is gone."""
        ...

    async def idle_since(self, now: datetime, limit: int = 100) -> list[ComputerInstance]:
        """Across organizations: running instances (``ready``, ``idle``) whose
        ``last_used_at`` is ``idle_timeout_s`` or more before ``now``, oldest first."""
        ...
