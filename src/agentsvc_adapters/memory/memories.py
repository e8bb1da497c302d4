"""Memories in memory. ``save`` and ``edit`` do not await between their reads and
their write, so the event loop runs each whole (the port's atomicity). The search
scores a memory by word overlap: the share of the query's terms found among its
key's and content's words."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from uuid import UUID

import msgspec

from agentsvc_core.entities.memory import Memory, MemoryStatus, fingerprint, words
from agentsvc_core.errors import NotFound
from agentsvc_core.ports.memories import MemoryStore, Saved, ScopeFilter


def _newest_first(m: Memory) -> tuple[datetime, UUID]:
    return (m.created_at, m.id)


def _same_place(a: Memory, b: Memory) -> bool:
    return (a.org_id, a.agent_id, a.scope, a.scope_id) == (
        b.org_id,
        b.agent_id,
        b.scope,
        b.scope_id,
    )


def _within(m: Memory, scopes: Sequence[ScopeFilter] | None) -> bool:
    return scopes is None or any(
        m.scope == s and (sid is None or m.scope_id == sid) for s, sid in scopes
    )


class MemoryMemories(MemoryStore):
    def __init__(self, agent_exists: Callable[[str, UUID], bool]) -> None:
        self._agent_exists = agent_exists  # PostgreSQL's foreign key
        self._rows: dict[tuple[str, UUID], Memory] = {}

    def drop_agent(self, org_id: str, agent_id: UUID) -> None:
        """The agent's memories go with it (``MemoryAgents.delete`` calls this)."""
        for key in [k for k, m in self._rows.items() if k[0] == org_id and m.agent_id == agent_id]:
            del self._rows[key]

    def drop_scope(self, org_id: str, scope: str, scope_id: str) -> int:
        """Delete the memories of one thread or user scope, of every agent; how many."""
        gone = [
            k
            for k, m in self._rows.items()
            if k[0] == org_id and m.scope == scope and m.scope_id == scope_id
        ]
        for key in gone:
            del self._rows[key]
        return len(gone)

    def of_scope(self, org_id: str, scope: str, scope_id: str) -> list[Memory]:
        found = [
            m
            for (org, _), m in self._rows.items()
            if org == org_id and m.scope == scope and m.scope_id == scope_id
        ]
        return sorted(found, key=lambda m: (m.created_at, m.id))

    def _of(self, org_id: str, agent_id: UUID) -> list[Memory]:
        return [m for (org, _), m in self._rows.items() if org == org_id and m.agent_id == agent_id]

    async def save(self, memory: Memory, max_active: int) -> Saved:
        if not self._agent_exists(memory.org_id, memory.agent_id):
            raise NotFound("agent not found")
        active = [m for m in self._of(memory.org_id, memory.agent_id) if m.status == "active"]
        here = [m for m in active if _same_place(m, memory)]
        mark = fingerprint(memory.content)
        for m in here:
            if fingerprint(m.content) == mark:
                return Saved(outcome="existing", memory=m)
        old = next((m for m in here if memory.key is not None and m.key == memory.key), None)
        if len(active) - (old is not None) >= max_active:
            return Saved(outcome="full")
        if old is not None:
            self._rows[(old.org_id, old.id)] = msgspec.structs.replace(
                old, status="superseded", superseded_by=memory.id, updated_at=memory.created_at
            )
        self._rows[(memory.org_id, memory.id)] = memory
        return Saved(outcome="saved", memory=memory, superseded=None if old is None else old.id)

    async def edit(
        self, org_id: str, agent_id: UUID, memory_id: UUID, content: str, now: datetime
    ) -> Saved:
        memory = self._get(org_id, agent_id, memory_id)
        if memory.status == "active":
            mark = fingerprint(content)
            for m in self._of(org_id, agent_id):
                same = m.status == "active" and _same_place(m, memory)
                if same and m.id != memory.id and fingerprint(m.content) == mark:
                    return Saved(outcome="existing", memory=m)
        changed = msgspec.structs.replace(memory, content=content, updated_at=now)
        self._rows[(org_id, memory_id)] = changed
        return Saved(outcome="saved", memory=changed)

    async def get(self, org_id: str, agent_id: UUID, memory_id: UUID) -> Memory:
        return self._get(org_id, agent_id, memory_id)

    def _get(self, org_id: str, agent_id: UUID, memory_id: UUID) -> Memory:
        found = self._rows.get((org_id, memory_id))
        if found is None or found.agent_id != agent_id:
            raise NotFound("memory not found")
        return found

    async def page(
        self,
        org_id: str,
        agent_id: UUID,
        *,
        scopes: Sequence[ScopeFilter] | None,
        status: MemoryStatus | None,
        before: tuple[datetime, UUID] | None,
        limit: int,
    ) -> list[Memory]:
        rows = [
            m
            for m in self._of(org_id, agent_id)
            if _within(m, scopes)
            and (status is None or m.status == status)
            and (before is None or _newest_first(m) < before)
        ]
        return sorted(rows, key=_newest_first, reverse=True)[:limit]

    async def search(
        self,
        org_id: str,
        agent_id: UUID,
        terms: Sequence[str],
        scopes: Sequence[ScopeFilter] | None,
        limit: int,
    ) -> list[tuple[Memory, float]]:
        wanted = set(terms)
        if not wanted:
            return []
        found: list[tuple[Memory, float]] = []
        for m in self._of(org_id, agent_id):
            if m.status != "active":
                continue
            if not _within(m, scopes):
                continue
            has = set(words(f"{m.key or ''} {m.content}"))
            score = len(wanted & has) / len(wanted)
            if score > 0:
                found.append((m, score))
        found.sort(key=lambda f: (f[1], *_newest_first(f[0])), reverse=True)
        return found[:limit]

    async def delete(self, org_id: str, agent_id: UUID, memory_id: UUID) -> None:
        await self.get(org_id, agent_id, memory_id)
        del self._rows[(org_id, memory_id)]
