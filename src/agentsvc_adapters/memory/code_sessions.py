"""Code agents, code sessions and their timelines in memory. Every method runs
without an ``await`` between its read and its write, so on one event loop each
is atomic (``change`` included: the session and its events are written together,
as PostgreSQL's transaction does in migration 0025)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from uuid import UUID

import msgspec

from agentsvc_core.entities.code_session import CodeAgent, CodeSession, SessionEvent
from agentsvc_core.errors import NotFound
from agentsvc_core.ports.code_sessions import Change, CodeSessionStore, NewEvent


class MemoryCodeSessions(CodeSessionStore):
    def __init__(self) -> None:
        self._agents: dict[UUID, CodeAgent] = {}
        self._sessions: dict[UUID, CodeSession] = {}
        self._events: dict[UUID, list[SessionEvent]] = {}

    # --- code agents ------------------------------------------------------------

    def _agent(self, org_id: str, agent_id: UUID) -> CodeAgent:
        found = self._agents.get(agent_id)
        if found is None or found.org_id != org_id:
            raise NotFound("code agent not found")
        return found

    async def add_agent(self, agent: CodeAgent) -> CodeAgent:
        self._agents[agent.id] = agent
        return agent

    async def get_agent(self, org_id: str, agent_id: UUID) -> CodeAgent:
        return self._agent(org_id, agent_id)

    async def agents(self, org_id: str) -> list[CodeAgent]:
        mine = [a for a in self._agents.values() if a.org_id == org_id]
        return sorted(mine, key=lambda a: (a.created_at, a.id))

    async def modify_agent(
        self, org_id: str, agent_id: UUID, change: Callable[[CodeAgent], CodeAgent]
    ) -> CodeAgent:
        changed = change(self._agent(org_id, agent_id))
        self._agents[agent_id] = changed
        return changed

    async def delete_agent(self, org_id: str, agent_id: UUID) -> bool:
        found = self._agents.get(agent_id)
        if found is None or found.org_id != org_id:
            return False
        del self._agents[agent_id]
        return True

    # --- sessions ---------------------------------------------------------------

    def _session(self, org_id: str, session_id: UUID) -> CodeSession:
        found = self._sessions.get(session_id)
        if found is None or found.org_id != org_id:
            raise NotFound("code session not found")
        return found

    def _append(
        self, session: CodeSession, events: Sequence[NewEvent], at: datetime
    ) -> tuple[CodeSession, list[SessionEvent]]:
        seq = session.last_event_seq
        made = []
        for e in events:
            seq += 1
            made.append(
                SessionEvent(
                    session_id=session.id, seq=seq, type=e.type, data=e.data, created_at=at
                )
            )
        stored = msgspec.structs.replace(session, last_event_seq=seq)
        self._sessions[session.id] = stored
        self._events.setdefault(session.id, []).extend(made)
        return stored, made

    async def add_session(
        self, session: CodeSession, events: Sequence[NewEvent]
    ) -> tuple[CodeSession, list[SessionEvent]]:
        return self._append(session, events, session.created_at)

    async def get_session(self, org_id: str, session_id: UUID) -> CodeSession:
        return self._session(org_id, session_id)

    async def sessions(
        self,
        org_id: str,
        *,
        before: tuple[datetime, UUID] | None,
        limit: int,
        code_agent_id: UUID | None = None,
    ) -> list[CodeSession]:
        rows = [
            s
            for s in self._sessions.values()
            if s.org_id == org_id
            and code_agent_id in (None, s.code_agent_id)
            and (before is None or (s.created_at, s.id) < before)
        ]
        rows.sort(key=lambda s: (s.created_at, s.id), reverse=True)
        return rows[:limit]

    async def change(
        self, org_id: str, session_id: UUID, change: Change
    ) -> tuple[CodeSession, list[SessionEvent]]:
        current = self._session(org_id, session_id)
        went = change(current)
        if went is None:
            return current, []
        session, events = went
        return self._append(session, events, session.updated_at)

    async def events(
        self, org_id: str, session_id: UUID, *, after: int, limit: int
    ) -> list[SessionEvent]:
        found = self._sessions.get(session_id)
        if found is None or found.org_id != org_id:
            return []
        return [e for e in self._events.get(session_id, []) if e.seq > after][:limit]
