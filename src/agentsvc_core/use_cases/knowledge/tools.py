"""``knowledge_search``: the model searches the documents its conversation may see
(the organization's, its agent's and its thread's; docs/knowledge.md).

The tool is offered when there is something to search: the organization has
indexed documents of its own, or of this agent, or of this thread. Which of them
have documents is kept per organization in this process for ``CACHE_S`` seconds
(and forgotten at once when this process adds or removes a document), so a turn
asks storage at most once per organization in that time, not once per turn; a
document another process indexed shows up within ``CACHE_S``.

The result is compact JSON naming each chunk used, its document and title, so the
user sees in ``tool_result`` what the answer rests on.
"""

from __future__ import annotations

import time
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_core.entities import Agent, Principal
from agentsvc_core.entities.knowledge import SearchScope
from agentsvc_core.errors import DomainError
from agentsvc_core.ports import ServerTools, ToolCallContext, ToolSetup, ToolSpec
from agentsvc_core.use_cases.knowledge.documents import MAX_QUERY, MAX_TOP_K, Knowledge

__all__ = ["CACHE_S", "TOOL_NAME", "KnowledgeTools"]

TOOL_NAME = "knowledge_search"
CACHE_S = 10.0
_enc = msgspec.json.Encoder()

_SPEC = ToolSpec(
    name=TOOL_NAME,
    description="Search the documents this conversation may use (the organization's, "
    "this agent's, this conversation's) for passages about a question. Answers the "
    "best passages with their document's title and ids; cite the titles you use.",
    parameters={
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "maxLength": MAX_QUERY,
                "description": "what to look for, in words the documents would use",
            },
            "topK": {"type": "integer", "minimum": 1, "maximum": MAX_TOP_K},
        },
        "required": ["query"],
    },
)


class _Search(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    query: str
    top_k: int = 5


class _Seen(msgspec.Struct, frozen=True):
    at: float
    changes: int
    org: bool
    agents: frozenset[UUID]
    threads: frozenset[UUID]


class KnowledgeTools(ServerTools):
    kinds: tuple[str, ...] = ()

    def __init__(self, knowledge: Knowledge, *, cache_s: float = CACHE_S) -> None:
        self._knowledge = knowledge
        self._cache_s = cache_s
        self._seen: dict[str, _Seen] = {}

    def owns(self, name: str) -> bool:
        return name == TOOL_NAME

    def is_extension(self, name: str) -> bool:
        return False

    async def _has(self, org_id: str) -> _Seen:
        now = time.monotonic()
        changes = self._knowledge.changes.get(org_id, 0)
        seen = self._seen.get(org_id)
        if seen is None or now - seen.at > self._cache_s or seen.changes != changes:
            org, agents, threads = await self._knowledge.offered(org_id)
            seen = self._seen[org_id] = _Seen(now, changes, org, agents, threads)
        return seen

    async def list_tools(
        self, who: Principal, agent: Agent, setup: ToolSetup | None = None
    ) -> list[ToolSpec]:
        seen = await self._has(who.org_id)
        thread = setup.thread_id if setup is not None else None
        if seen.org or agent.id in seen.agents or (thread is not None and thread in seen.threads):
            return [_SPEC]
        return []

    async def call(
        self,
        who: Principal,
        agent: Agent,
        name: str,
        arguments: dict[str, Any],
        ctx: ToolCallContext,
    ) -> str:
        if name != TOOL_NAME:
            return f"error: no knowledge tool named {name!r}"
        try:
            args = msgspec.convert(arguments, _Search)
            scope = SearchScope(org_id=who.org_id, agent_id=agent.id, thread_id=ctx.thread_id)
            found = await self._knowledge.search(scope, args.query, top_k=args.top_k)
        except msgspec.ValidationError as exc:
            return f"error: invalid arguments: {exc}"
        except DomainError as exc:
            return f"error: {exc.detail}"
        return _enc.encode(
            {
                "results": [
                    {
                        "document_id": r.hit.document_id,
                        "title": r.hit.title,
                        "chunk_id": r.hit.chunk_id,
                        "headings": r.hit.headings,
                        "page": r.hit.page,
                        "score": r.hit.score,
                        "text": r.hit.text,
                    }
                    for r in found.results
                ]
            }
        ).decode()
