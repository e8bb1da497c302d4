"""Whose key pays for a turn (docs/byok.md): the resolver is asked once per turn and
provider family, however many model calls the turn makes (tool steps, the compaction
summary); every usage record names the key that paid."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import msgspec

from agentsvc_core.entities import Agent, Principal, ToolCall, Usage
from agentsvc_core.ports import (
    ChatModel,
    ModelEvent,
    ModelRequest,
    ServerTools,
    TextDelta,
    ToolCallRequested,
    ToolSpec,
    UsageReport,
)
from agentsvc_core.ports.resolver import CredentialResolver, Resolution, ResolverRequest
from agentsvc_core.use_cases.org_settings import (
    CompactionConfig,
)
from agentsvc_core.use_cases.sealed import SealedRecords
from agentsvc_core.use_cases.turn.compaction import SUMMARY_PROMPT
from agentsvc_core.use_cases.turn.conversation import SendInput
from agentsvc_core.use_cases.turn.events import Done
from tests.contract.conftest import now
from tests.contract.test_conversations_contract import a_message, a_run
from tests.unit.turn_world import BOX, read_all, resolver_world

ORG = "org-keys"
WHO = Principal(org_id=ORG, method="api_key", user_id="alice")
USER_KEY = "sk-alice-own-key"
TOOL_STEPS = 3


class Resolver(CredentialResolver):
    """Answers the user's key (or None); records every call."""

    def __init__(self, key: str | None = USER_KEY) -> None:
        self.answer = key
        self.calls: list[ResolverRequest] = []

    async def resolve(
        self, url: str, request: ResolverRequest, secrets: list[str], timeout_ms: int
    ) -> Resolution:
        self.calls.append(request)
        return Resolution(self.answer, "key" if self.answer else "platform")


class Model(ChatModel):
    """A 'beta' model: asks for a tool TOOL_STEPS times, then answers; a summary
    request gets a summary. Records the key of every request."""

    provider = "beta"

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        if request.system == SUMMARY_PROMPT:
            yield TextDelta("the summary")
        else:
            steps = sum(1 for m in request.messages if m.role == "tool")
            if steps < TOOL_STEPS:
                yield ToolCallRequested(ToolCall(id=f"c{steps}", name="kb__search", arguments={}))
            else:
                yield TextDelta("done")
        yield UsageReport(Usage(input_tokens=10, output_tokens=2))


class Tools(ServerTools):
    def owns(self, name: str) -> bool:
        return True  # the turn's one source: every name is its own

    def is_extension(self, name: str) -> bool:
        return True  # its tools are traced as MCP tools

    async def list_tools(
        self, who: Principal, agent: Agent, setup: object = None
    ) -> list[ToolSpec]:
        return [ToolSpec(name="kb__search", description="search")]

    async def call(
        self, who: Principal, agent: Agent, name: str, arguments: dict[str, Any], ctx: Any = None
    ) -> str:
        return "found"


async def turn_with(
    resolver: Resolver,
    *,
    compact: bool,
    threshold: int = 1_000,
    model_id: str = "beta:m1",
    who: Principal = WHO,
) -> tuple[Model, list[Any]]:
    """One turn of an agent whose resolver is enabled; with ``compact``, over a long
    history and a low threshold, so the turn summarises first. Returns the model
    and the turn's usage records."""
    w = await resolver_world(who, model := Model(), Tools(), resolver, model_id=model_id)
    storage, agent, thread = w.storage, w.agent, w.thread
    if compact:
        await SealedRecords(storage.secrets, BOX).put(
            ORG,
            "compaction",
            str(agent.id),
            CompactionConfig(
                agent_id=agent.id, org_id=ORG, enabled=True, beta_compact_threshold=threshold
            ),
        )
        old = [a_message(thread, content=f"message {i} " + "word " * 200) for i in range(8)]
        run = a_run(thread)
        await storage.conversations.begin_turn(run, old, now() - timedelta(seconds=45))
        done = msgspec.structs.replace(run, status="completed")
        await storage.conversations.finish_turn(done, [], [])
    turn = await w.conversation.send(who, thread.id, SendInput(content="look it up"))
    events = await read_all(turn)
    assert isinstance(events[-1], Done), events[-1]
    records = await storage.conversations.usage(ORG, thread.id)
    return model, records


async def test_a_turn_with_tool_steps_asks_the_resolver_once() -> None:
    resolver = Resolver()
    model, records = await turn_with(resolver, compact=False)
    assert len(model.requests) == TOOL_STEPS + 1
    assert len(resolver.calls) == 1
    assert resolver.calls[0].provider == "beta"
    assert resolver.calls[0].user_id == "alice"
    assert [r.api_key for r in model.requests] == [USER_KEY] * (TOOL_STEPS + 1)
    assert [r.key_source for r in records] == ["byok"] * (TOOL_STEPS + 1)


async def test_a_compaction_summary_reuses_the_turns_key_and_is_recorded_byok() -> None:
    resolver = Resolver()
    model, records = await turn_with(resolver, compact=True)
    summaries = [r for r in model.requests if r.system == SUMMARY_PROMPT]
    assert len(summaries) == 1
    assert summaries[0].api_key == USER_KEY
    summary_records = [r for r in records if r.message_id is None]
    assert len(summary_records) == 1
    # the summary was paid with the user's key: its usage record says so
    assert [r.key_source for r in records] == ["byok"] * len(model.requests)
    assert len(resolver.calls) == 1
    assert {r.api_key for r in model.requests} == {USER_KEY}


async def test_a_resolver_without_a_key_is_asked_once_and_the_platform_pays() -> None:
    resolver = Resolver(key=None)
    model, records = await turn_with(resolver, compact=True)
    assert len(resolver.calls) == 1
    assert {r.api_key for r in model.requests} == {None}
    assert {r.key_source for r in records} == {"platform"}
