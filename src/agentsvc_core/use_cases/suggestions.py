"""Improvement suggestions for a runner or an agent (``/api/runners/{id}/suggestions``,
``/api/agents/{id}/suggestions``; docs/runners.md#suggestions).

Generating asks the agent's model (a runner's: its first agent step's agent) to
read what recent runs or turns did (statuses, errors, tool errors, tokens, cost,
time to the first token) and to answer with a few lines ``title: detail``. The
call is a turn of that agent on a thread of its own (metadata ``purpose:
suggestions``), so it goes through the same router, key broker, usage records and
trace as any turn, and works offline with the ``local`` model. Each line becomes
a suggestion; a user dismisses it or brings it back.
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_core.entities import Principal
from agentsvc_core.entities.runner import Suggestion
from agentsvc_core.errors import InvalidInput, NotFound, PermissionDenied
from agentsvc_core.ports import AgentRepository, Clock
from agentsvc_core.ports.runners import RunnerStore
from agentsvc_core.ports.traces import TraceFilter, TraceStore
from agentsvc_core.use_cases.agent_asks import ask_agent
from agentsvc_core.use_cases.threads import Threads
from agentsvc_core.use_cases.turn.conversation import Conversation

__all__ = ["MAX_SUGGESTIONS", "Suggestions", "parse_suggestions"]

MAX_SUGGESTIONS = 5  # kept from one generation
RECENT = 20  # the runs or turns a generation reads
MAX_TITLE, MAX_DETAIL = 200, 2000
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")
_enc = msgspec.json.Encoder()

PROMPT = (
    "You review how an AI agent {what} has been doing. Below are its {n} most recent"
    " {items} as JSON: statuses, errors, tool errors, tokens, cost and timings.\n"
    "Suggest at most {max} concrete improvements (to its instructions, tools, steps,"
    " model or limits), most useful first. Answer with one suggestion per line, each"
    " line 'title: detail', and nothing else.\n\n{facts}"
)


def parse_suggestions(text: str) -> list[tuple[str, str]]:
    """(title, detail) of each ``title: detail`` line (bullets and numbers dropped;
    a line without a colon is a title alone), at most ``MAX_SUGGESTIONS``."""
    found: list[tuple[str, str]] = []
    for raw in text.splitlines():
        line = _BULLET.sub("", raw).strip().strip("*").strip()
        if not line:
            continue
        title, _, detail = line.partition(":")
        title, detail = title.strip().strip("*").strip(), detail.strip()
        if not title:
            continue
        found.append((title[:MAX_TITLE], detail[:MAX_DETAIL]))
        if len(found) == MAX_SUGGESTIONS:
            break
    return found


class Suggestions:
    def __init__(
        self,
        store: RunnerStore,
        agents: AgentRepository,
        threads: Threads,
        conversation: Conversation,
        traces: TraceStore,
        clock: Clock,
    ) -> None:
        self._store = store
        self._agents = agents
        self._threads = threads
        self._conversation = conversation
        self._traces = traces
        self._clock = clock

    async def _owner(self, who: Principal, runner_id: UUID | None, agent_id: UUID | None) -> None:
        if runner_id is not None:
            await self._store.get(who.org_id, runner_id)
        if agent_id is not None:
            await self._agents.get(who.org_id, agent_id)

    async def page(
        self,
        who: Principal,
        *,
        runner_id: UUID | None = None,
        agent_id: UUID | None = None,
        dismissed: bool | None = None,
        before: tuple[datetime, UUID] | None = None,
        limit: int = 50,
    ) -> list[Suggestion]:
        await self._owner(who, runner_id, agent_id)
        return await self._store.suggestions(
            who.org_id,
            runner_id=runner_id,
            agent_id=agent_id,
            dismissed=dismissed,
            before=before,
            limit=limit,
        )

    async def set_dismissed(
        self,
        who: Principal,
        suggestion_id: UUID,
        dismissed: bool,
        *,
        runner_id: UUID | None = None,
        agent_id: UUID | None = None,
    ) -> Suggestion:
        if not who.is_admin:
            raise PermissionDenied("suggestions are managed by the organization's admins")
        await self._owner(who, runner_id, agent_id)
        mine = await self._store.suggestions(
            who.org_id, runner_id=runner_id, agent_id=agent_id, limit=10_000
        )
        if not any(s.id == suggestion_id for s in mine):
            raise NotFound("suggestion not found")
        return await self._store.set_dismissed(
            who.org_id, suggestion_id, dismissed, self._clock.now()
        )

    async def generate(
        self, who: Principal, *, runner_id: UUID | None = None, agent_id: UUID | None = None
    ) -> list[Suggestion]:
        """Ask the model; store and answer the suggestions its reply holds."""
        if not who.is_admin:
            raise PermissionDenied("suggestions are generated by the organization's admins")
        if runner_id is not None:
            runner = await self._store.get(who.org_id, runner_id)
            asked = next((s.agent_id for s in runner.steps if s.kind == "agent"), None)
            if asked is None:
                raise InvalidInput("steps", "the runner has no agent step whose model to ask")
            facts = await self._runner_facts(who, runner_id)
            what, items = f"pipeline ({runner.name!r})", "runs"
        else:
            assert agent_id is not None
            agent = await self._agents.get(who.org_id, agent_id)
            asked = agent.id
            facts = await self._agent_facts(who, agent_id)
            what, items = f"({agent.name!r})", "turns"
        prompt = PROMPT.format(
            what=what,
            n=len(facts),
            items=items,
            max=MAX_SUGGESTIONS,
            facts=_enc.encode(facts).decode(),
        )
        text = await self._ask(who, asked, prompt, runner_id)
        now = self._clock.now()
        made = [
            Suggestion(
                id=uuid.uuid4(),
                org_id=who.org_id,
                runner_id=runner_id,
                agent_id=None if runner_id is not None else agent_id,
                title=title,
                detail=detail,
                dismissed=False,
                created_at=now,
                updated_at=now,
            )
            for title, detail in parse_suggestions(text)
        ]
        await self._store.add_suggestions(made)
        return made

    async def _runner_facts(self, who: Principal, runner_id: UUID) -> list[dict[str, Any]]:
        runs = await self._store.runs(who.org_id, runner_id=runner_id, limit=RECENT)
        return [
            {
                "status": r.status,
                "error": r.error,
                "trigger": r.trigger_kind,
                "tokens": r.tokens,
                "cost_usd": r.cost_usd,
                "seconds": None
                if r.ended_at is None
                else round((r.ended_at - (r.started_at or r.created_at)).total_seconds(), 1),
                "steps": [
                    {"id": s.step_id, "status": s.status, "error": s.error, "tokens": s.tokens}
                    for s in r.steps
                    if s.status != "pending"
                ],
            }
            for r in runs
        ]

    async def _agent_facts(self, who: Principal, agent_id: UUID) -> list[dict[str, Any]]:
        traces = await self._traces.list_traces(
            who.org_id, TraceFilter(agent_id=agent_id), before=None, limit=RECENT
        )
        return [
            {
                "status": t.run_status or t.status,
                "error": t.error,
                "model": t.model,
                "model_calls": t.model_calls,
                "tool_calls": t.tool_calls,
                "tool_errors": t.tool_errors,
                "tokens": t.total_tokens,
                "cost_usd": t.cost_usd,
                "ms": t.duration_ms,
                "first_token_ms": t.first_token_ms,
            }
            for t in traces
            if t.kind == "agent_turn"
        ]

    async def _ask(
        self, who: Principal, agent_id: UUID, prompt: str, runner_id: UUID | None
    ) -> str:
        metadata = {"purpose": "suggestions"}
        if runner_id is not None:
            metadata["runner_id"] = str(runner_id)
        day = self._clock.now().date().isoformat()
        return await ask_agent(
            self._threads,
            self._conversation,
            who.org_id,
            agent_id,
            prompt,
            title=f"suggestions {day}",
            metadata=metadata,
        )
