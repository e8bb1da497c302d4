"""The memory tools an agent with memory enabled gives the model: ``memory_save``
and ``memory_search`` (docs/memory.md).

The configuration is read with the turn (``MemoryTools.kinds``): a turn of an
agent without memory enabled costs nothing more (no read of the memories). The
``thread`` scope is the turn's thread, the ``user`` scope the user who sent the
message; a call in a scope the configuration does not allow, or without that
thread or user, is an ``error: ...`` result. Answers are compact JSON.
"""

from __future__ import annotations

from typing import Any

import msgspec

from agentsvc_core.entities import Agent, Principal
from agentsvc_core.entities.memory import MemoryScope
from agentsvc_core.ports import ToolCallContext, ToolSpec
from agentsvc_core.ports.memories import ScopeFilter
from agentsvc_core.use_cases.agent_settings import GatedTools, ToolRefused
from agentsvc_core.use_cases.memories.memories import (
    MAX_CONTENT,
    MAX_KEY,
    MAX_QUERY,
    MAX_TOP_K,
    Memories,
    MemoryConfig,
    MemorySettings,
)

__all__ = ["TOOL_NAMES", "MemoryTools", "memory_save_spec"]


class _Save(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    content: str
    key: str | None = None
    scope: MemoryScope | None = None


class _Search(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    query: str
    top_k: int = 5
    scope: MemoryScope | None = None


TOOL_NAMES = ("memory_save", "memory_search")
_enc = msgspec.json.Encoder()


def _scope_param(config: MemoryConfig) -> dict[str, Any]:
    return {
        "type": "string",
        "enum": list(config.scopes),
        "description": "agent: every conversation of this agent; thread: this "
        "conversation only; user: the user you are talking to",
    }


def memory_save_spec(
    config: MemoryConfig, default: MemoryScope, *, scoped: bool = True
) -> ToolSpec:
    """``memory_save`` as the model sees it; without ``scoped`` it has no scope
    (memory collection decides where facts go)."""
    properties: dict[str, Any] = {
        "content": {"type": "string", "maxLength": MAX_CONTENT},
        "key": {"type": "string", "maxLength": MAX_KEY},
    }
    if scoped:
        properties["scope"] = _scope_param(config)
    return ToolSpec(
        name="memory_save",
        description="Remember a short fact for later conversations. Give a key "
        "(a short subject such as 'tea') to replace the previous fact of that key "
        "instead of adding a second one." + (f" Default scope: {default}." if scoped else ""),
        parameters={"type": "object", "properties": properties, "required": ["content"]},
    )


def _specs(config: MemoryConfig) -> list[ToolSpec]:
    scope = _scope_param(config)
    return [
        memory_save_spec(config, _default(config)),
        ToolSpec(
            name="memory_search",
            description="Search the facts remembered (by words), best first. "
            "Default: every scope you may use.",
            parameters={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "maxLength": MAX_QUERY},
                    "topK": {"type": "integer", "minimum": 1, "maximum": MAX_TOP_K},
                    "scope": scope,
                },
                "required": ["query"],
            },
        ),
    ]


def _default(config: MemoryConfig) -> MemoryScope:
    return "agent" if "agent" in config.scopes else config.scopes[0]


def _place(scope: MemoryScope, ctx: ToolCallContext) -> ScopeFilter:
    """The scope's id in this call, or a refusal when there is none."""
    if scope == "agent":
        return ("agent", None)
    if scope == "thread":
        if ctx.thread_id is None:
            raise ToolRefused("the thread scope works inside a conversation only")
        return ("thread", str(ctx.thread_id))
    if ctx.user_id is None:
        raise ToolRefused("the user scope needs a user: this message has none")
    return ("user", ctx.user_id)


class MemoryTools(GatedTools[MemoryConfig]):
    """The memory tools of an agent whose memory configuration is enabled."""

    names = TOOL_NAMES
    noun = "memory"
    disabled = "memory is not enabled for this agent"

    def __init__(self, memories: Memories, settings: MemorySettings) -> None:
        super().__init__(settings)
        self._memories = memories

    def specs(self, config: MemoryConfig) -> list[ToolSpec]:
        return _specs(config)

    async def run(
        self,
        who: Principal,
        agent: Agent,
        name: str,
        arguments: dict[str, Any],
        ctx: ToolCallContext,
        config: MemoryConfig,
    ) -> str:
        if name == "memory_save":
            return await self._save(who, agent, msgspec.convert(arguments, _Save), ctx, config)
        return await self._search(who, agent, msgspec.convert(arguments, _Search), ctx, config)

    async def _save(
        self, who: Principal, agent: Agent, args: _Save, ctx: ToolCallContext, config: MemoryConfig
    ) -> str:
        scope = args.scope or _default(config)
        if scope not in config.scopes:
            raise ToolRefused(f"the {scope} scope is not enabled for this agent")
        _, scope_id = _place(scope, ctx)
        saved = await self._memories.save(
            who.org_id,
            agent.id,
            scope,
            scope_id,
            args.content,
            args.key,
            max_active=config.max_memories,
        )
        memory = saved.memory
        assert memory is not None  # "full" raised
        answer: dict[str, Any] = {
            "saved": saved.outcome == "saved",  # False: the same fact was there
            "id": memory.id,
            "scope": memory.scope,
            "key": memory.key,
        }
        if saved.superseded is not None:
            answer["superseded"] = saved.superseded
        return _enc.encode(answer).decode()

    async def _search(
        self,
        who: Principal,
        agent: Agent,
        args: _Search,
        ctx: ToolCallContext,
        config: MemoryConfig,
    ) -> str:
        if args.scope is not None:
            if args.scope not in config.scopes:
                raise ToolRefused(f"the {args.scope} scope is not enabled for this agent")
            places = [_place(args.scope, ctx)]
        else:  # every allowed scope this call has an id for
            places = []
            for scope in config.scopes:
                try:
                    places.append(_place(scope, ctx))
                except ToolRefused:
                    continue
        found = await self._memories.search(who.org_id, agent.id, args.query, places, args.top_k)
        return _enc.encode(
            {
                "memories": [
                    {
                        "id": m.id,
                        "content": m.content,
                        "key": m.key,
                        "scope": m.scope,
                        "score": round(score, 4),
                    }
                    for m, score in found
                ]
            }
        ).decode()
