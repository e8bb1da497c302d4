"""Deletion and erasure in memory (``ErasureStore``): each memory store drops or
scrubs its part of a thread, as PostgreSQL's one transaction does (on one event
loop, with no await between them, the whole is atomic)."""

from __future__ import annotations

from datetime import datetime, timedelta
from uuid import UUID

from agentsvc_adapters.memory.channels import MemoryChannels
from agentsvc_adapters.memory.conversations import MemoryConversations, MemoryThreads
from agentsvc_adapters.memory.idempotency import MemoryIdempotency
from agentsvc_adapters.memory.knowledge import MemoryKnowledge
from agentsvc_adapters.memory.memories import MemoryMemories
from agentsvc_adapters.memory.plans import MemoryPlans
from agentsvc_adapters.memory.publishing import MemoryPublishing
from agentsvc_adapters.memory.runners import MemoryRunners
from agentsvc_adapters.memory.traces import MemoryTraces
from agentsvc_core.entities.memory import Memory
from agentsvc_core.errors import ThreadBusy
from agentsvc_core.ports.erasure import ErasureStore, StaleThread, UserThread


class MemoryErasure(ErasureStore):
    def __init__(
        self,
        *,
        threads: MemoryThreads,
        conversations: MemoryConversations,
        idempotency: MemoryIdempotency,
        traces: MemoryTraces,
        memories: MemoryMemories,
        knowledge: MemoryKnowledge,
        plans: MemoryPlans,
        publishing: MemoryPublishing,
        channels: MemoryChannels,
        runners: MemoryRunners,
    ) -> None:
        self._threads = threads
        self._conversations = conversations
        self._idempotency = idempotency
        self._traces = traces
        self._memories = memories
        self._knowledge = knowledge
        self._plans = plans
        self._publishing = publishing
        self._channels = channels
        self._runners = runners
        self._retention: dict[str, int] = {}

    async def erase_thread(self, org_id: str, thread_id: UUID, busy_after: datetime) -> bool:
        if not self._threads.has(org_id, thread_id):
            return False
        if await self._conversations.running(org_id, thread_id, busy_after) is not None:
            raise ThreadBusy()
        runs = self._conversations.drop_thread(org_id, thread_id)
        self._idempotency.drop_runs(org_id, runs)
        self._traces.scrub_thread(org_id, thread_id, self._runners.scrub_thread(org_id, thread_id))
        self._memories.drop_scope(org_id, "thread", str(thread_id))
        self._knowledge.drop_thread(org_id, thread_id)
        self._plans.drop_thread(org_id, thread_id)
        self._publishing.drop_thread(org_id, thread_id)
        self._channels.drop_thread(org_id, thread_id)
        return self._threads.drop_thread(org_id, thread_id)

    async def user_threads(self, org_id: str, user_id: str) -> list[UserThread]:
        visited = {v.thread_id for v in self._publishing.threads_of_visitor(org_id, user_id)}
        found = [
            t
            for t in self._threads.all()
            if t.org_id == org_id and (t.created_by == user_id or t.id in visited)
        ]
        found.sort(key=lambda t: (t.created_at, t.id))
        return [UserThread(thread_id=t.id, visitor=t.id in visited) for t in found]

    async def user_memories(self, org_id: str, user_id: str) -> list[Memory]:
        return self._memories.of_scope(org_id, "user", user_id)

    async def delete_user_memories(self, org_id: str, user_id: str) -> int:
        return self._memories.drop_scope(org_id, "user", user_id)

    async def leave_threads(self, org_id: str, user_id: str) -> int:
        return self._threads.leave_all(org_id, user_id)

    async def retention_days(self, org_id: str) -> int | None:
        return self._retention.get(org_id)

    async def set_retention_days(self, org_id: str, days: int | None) -> None:
        if days is None:
            self._retention.pop(org_id, None)
        else:
            self._retention[org_id] = days

    async def stale_threads(self, now: datetime, limit: int) -> list[StaleThread]:
        found = []
        for t in self._threads.all():
            days = self._retention.get(t.org_id)
            if days is None:
                continue
            last = self._conversations.last_touched(t.org_id, t.id)
            touched = t.updated_at if last is None else max(t.updated_at, last)
            if touched < now - timedelta(days=days):
                found.append((touched, t.org_id, t.id))
        found.sort(key=lambda x: (x[0], x[1], x[2]))
        return [StaleThread(org_id=org, thread_id=tid) for _, org, tid in found[:limit]]
