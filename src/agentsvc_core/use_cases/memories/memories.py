"""Memories of an agent (docs/memory.md): its configuration
(``GET/PUT /api/agents/{id}/memory``, a sealed record of kind ``memory``), the
list, the recall, the add by hand, the edit and the delete of
``/api/agents/{id}/memories``, and the save and search the memory tools use
(``use_cases/memories/tools.py``). A memory added by hand goes through the tools'
``save`` (the same checks, identical-fact rule, supersede by key and cap), so
recall and memory_search find it as they find a saved one.

Who sees what over HTTP: a caller that acts for the organization (an API key) sees
every memory of the agent; any other (a JWT user, admin or not) sees the agent's
``agent`` scope and its own ``user`` scope, not other users' memories nor those of
threads (a thread's memories are the model's, in that thread). Another caller's
memory is 404, as another organization's is; such a caller adds memories only to
the places it sees.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_core.entities import Principal
from agentsvc_core.entities.memory import (
    MEMORY_SCOPES,
    Memory,
    MemoryScope,
    MemoryStatus,
    words,
)
from agentsvc_core.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from agentsvc_core.ports import AgentRepository, Clock, SecretBox, SecretStore, ThreadRepository
from agentsvc_core.ports.memories import MemoryStore, Saved, ScopeFilter
from agentsvc_core.rules import check_text
from agentsvc_core.use_cases.agent_settings import AgentSettings, Switched

__all__ = [
    "KIND",
    "MAX_CONTENT",
    "MAX_KEY",
    "MAX_MEMORIES",
    "MAX_QUERY",
    "MAX_SCOPE_ID",
    "MAX_TOP_K",
    "Memories",
    "MemoryConfig",
    "MemoryPage",
    "MemorySettings",
]

KIND = "memory"
MAX_CONTENT = 2000  # characters of a memory
MAX_KEY = 100
MAX_SCOPE_ID = 200  # a user id (a thread's is a UUID)
MAX_QUERY = 1000
MAX_TOP_K = 50
MAX_MEMORIES = 10_000  # the highest max_memories an agent may be given


class MemoryConfig(Switched, frozen=True, kw_only=True):
    """``enabled``: the model gets memory_save and memory_search."""

    scopes: tuple[MemoryScope, ...] = MEMORY_SCOPES  # the scopes the tools may use
    max_memories: int = 1000  # active memories of the agent; a save beyond is refused
    # after each completed turn, a background job asks the agent's model for the
    # facts worth keeping and saves them (use_cases/memories/collect.py)
    auto_collect: bool = False


def _check_config(config: MemoryConfig) -> MemoryConfig:
    if not config.scopes:
        raise InvalidInput("scopes", "must name at least one scope")
    if len(set(config.scopes)) != len(config.scopes):
        raise InvalidInput("scopes", "must not repeat a scope")
    if not 1 <= config.max_memories <= MAX_MEMORIES:
        raise InvalidInput("maxMemories", f"must be between 1 and {MAX_MEMORIES}")
    return config


class MemorySettings(AgentSettings[MemoryConfig]):
    def __init__(self, store: SecretStore, agents: AgentRepository, box: SecretBox) -> None:
        super().__init__(store, agents, box, KIND, MemoryConfig)

    async def update(self, who: Principal, agent_id: UUID, changes: dict[str, Any]) -> MemoryConfig:
        """Only the supplied fields change (a concurrent PUT of others is not lost)."""
        if "scopes" in changes:
            changes = {**changes, "scopes": tuple(changes["scopes"])}
        return await self._change(
            who,
            agent_id,
            lambda current: _check_config(msgspec.structs.replace(current, **changes)),
        )


class MemoryPage(msgspec.Struct, frozen=True, kw_only=True):
    memories: list[Memory]
    next_cursor: tuple[datetime, UUID] | None  # (created_at, id) of the page's last


def _visible(
    who: Principal, scope: MemoryScope | None, scope_id: str | None
) -> list[ScopeFilter] | None:
    """The places the caller asks for and may see (``None``: every place). A
    ``scope_id`` counts only with the thread or user scope."""
    if scope == "agent" or scope is None:
        scope_id = None
    if who.acts_for_org:
        return None if scope is None else [(scope, scope_id)]
    mine: list[ScopeFilter] = [("agent", None)]
    if who.user_id is not None:
        mine.append(("user", who.user_id))
    return [
        (s, sid)
        for s, sid in mine
        if (scope is None or s == scope) and (scope_id is None or sid == scope_id)
    ]


def _place(scope: MemoryScope, scope_id: str | None) -> str | None:
    """The scope id a memory added by hand is kept under: none for the agent scope,
    a thread's id as the tools write it, a user id as given."""
    if scope == "agent":
        if scope_id is not None:
            raise InvalidInput("scopeId", "the agent scope has no id")
        return None
    if scope_id is None or not scope_id.strip():
        raise InvalidInput("scopeId", f"the {scope} scope needs the {scope}'s id")
    if scope == "user":
        return check_text("scopeId", scope_id, max_len=MAX_SCOPE_ID)
    try:
        return str(UUID(scope_id))
    except ValueError:
        raise InvalidInput("scopeId", "a thread's id is a UUID") from None


class Memories:
    def __init__(
        self,
        store: MemoryStore,
        agents: AgentRepository,
        clock: Clock,
        settings: MemorySettings,
        threads: ThreadRepository,
    ) -> None:
        self._store = store
        self._agents = agents
        self._clock = clock
        self._settings = settings  # the agent's cap (max_memories) for a memory added by hand
        self._threads = threads  # a thread's memory added by hand: the agent's thread

    # --- what the tools do (the agent is the turn's: no check) ---------------------

    async def save(
        self,
        org: str,
        agent_id: UUID,
        scope: MemoryScope,
        scope_id: str | None,
        content: str,
        key: str | None,
        *,
        max_active: int,
    ) -> Saved:
        """Raises ``InvalidInput`` for a bad text or an agent at its cap."""
        content = check_text("content", content, max_len=MAX_CONTENT, required=True).strip()
        if key is not None:
            key = " ".join(check_text("key", key, max_len=MAX_KEY).casefold().split()) or None
        now = self._clock.now()
        saved = await self._store.save(
            Memory(
                id=uuid.uuid4(),
                org_id=org,
                agent_id=agent_id,
                scope=scope,
                scope_id=None if scope == "agent" else scope_id,
                content=content,
                key=key,
                created_at=now,
                updated_at=now,
            ),
            max_active,
        )
        if saved.outcome == "full":
            raise InvalidInput(
                "memory", f"the agent keeps at most {max_active} active memories (maxMemories)"
            )
        return saved

    async def search(
        self,
        org: str,
        agent_id: UUID,
        query: str,
        scopes: Sequence[ScopeFilter] | None,
        top_k: int,
    ) -> list[tuple[Memory, float]]:
        query = check_text("query", query, max_len=MAX_QUERY, required=True)
        if not 1 <= top_k <= MAX_TOP_K:
            raise InvalidInput("topK", f"must be between 1 and {MAX_TOP_K}")
        return await self._store.search(org, agent_id, words(query), scopes, top_k)

    # --- the HTTP routes ----------------------------------------------------------

    async def page(
        self,
        who: Principal,
        agent_id: UUID,
        *,
        scope: MemoryScope | None,
        status: MemoryStatus | None,
        cursor: tuple[datetime, UUID] | None,
        limit: int,
    ) -> MemoryPage:
        await self._agents.get(who.org_id, agent_id)
        rows = await self._store.page(
            who.org_id,
            agent_id,
            scopes=_visible(who, scope, None),
            status=status,
            before=cursor,
            limit=limit + 1,
        )
        page = rows[:limit]
        last = page[-1] if len(rows) > limit else None
        return MemoryPage(
            memories=page, next_cursor=None if last is None else (last.created_at, last.id)
        )

    async def recall(
        self,
        who: Principal,
        agent_id: UUID,
        query: str,
        top_k: int,
        scope: MemoryScope | None,
        scope_id: str | None,
    ) -> list[tuple[Memory, float]]:
        await self._agents.get(who.org_id, agent_id)
        return await self.search(who.org_id, agent_id, query, _visible(who, scope, scope_id), top_k)

    async def add(
        self,
        who: Principal,
        agent_id: UUID,
        scope: MemoryScope,
        scope_id: str | None,
        content: str,
        key: str | None,
    ) -> Saved:
        """A memory added by a person, as ``memory_save`` would (``existing``: the
        same fact was there). Raises ``PermissionDenied`` for a place the caller
        does not see, ``InvalidInput`` as ``save``."""
        config = await self._settings.get(who, agent_id)
        scope_id = _place(scope, scope_id)
        if not _visible(who, scope, scope_id):
            raise PermissionDenied("a user adds memories of the agent scope or its own user scope")
        if scope == "thread" and scope_id is not None:
            await self._agents_thread(who.org_id, agent_id, UUID(scope_id))
        return await self.save(
            who.org_id, agent_id, scope, scope_id, content, key, max_active=config.max_memories
        )

    async def _agents_thread(self, org_id: str, agent_id: UUID, thread_id: UUID) -> None:
        """A thread's memory goes with its thread (deleted with it): the thread must
        be there, and the agent's."""
        try:
            thread = await self._threads.get(org_id, thread_id)
        except NotFound:
            thread = None
        if thread is None or thread.agent_id != agent_id:
            raise InvalidInput("scopeId", "no thread of this agent has that id")

    async def edit(self, who: Principal, agent_id: UUID, memory_id: UUID, content: str) -> Memory:
        """New content for a memory the caller sees. Raises ``Conflict`` when another
        active memory of its place says the same."""
        content = check_text("content", content, max_len=MAX_CONTENT, required=True).strip()
        await self._seen(who, agent_id, memory_id)
        saved = await self._store.edit(who.org_id, agent_id, memory_id, content, self._clock.now())
        if saved.outcome == "existing":
            assert saved.memory is not None
            raise Conflict(f"memory {saved.memory.id} of the same scope says this already")
        assert saved.memory is not None
        return saved.memory

    async def _seen(self, who: Principal, agent_id: UUID, memory_id: UUID) -> None:
        """404 unless the agent is there and ``who`` sees the memory."""
        await self._agents.get(who.org_id, agent_id)
        if not who.acts_for_org:
            memory = await self._store.get(who.org_id, agent_id, memory_id)
            if not _visible(who, memory.scope, memory.scope_id):
                raise NotFound("memory not found")

    async def delete(self, who: Principal, agent_id: UUID, memory_id: UUID) -> None:
        await self._seen(who, agent_id, memory_id)
        await self._store.delete(who.org_id, agent_id, memory_id)
