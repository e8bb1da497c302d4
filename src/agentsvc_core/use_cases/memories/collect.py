"""Automatic memory collection (docs/memory.md): after a completed turn of an agent
whose memory configuration has ``auto_collect`` on, a background job asks the
agent's model which facts of that turn are worth keeping and saves them, as the
``memory_save`` tool would.

The turn pays nothing for it unless it is on: the configuration comes from the
records the turn read already, and the job is queued after the reply's last event
(one write). The job reads the run's messages and up to ``_KNOWN`` memories the
turn's words recall (so a changed fact is saved under its old key and supersedes
it), then makes one model call offering only ``memory_save``: each call of it is a
fact (at most ``MAX_COLLECTED``). The call goes through the same router and key
broker as the turn (the turn's model, the user's resolved key when the agent's
resolver is on) and its usage is recorded with ``purpose: memory`` on the turn's
run. The built-in ``local`` model calls ``memory_save`` when the turn's text asks
for it (``call memory_save {...}``), so the whole path runs offline.

Collected facts go to the user's scope (the sender of the message the reply
answered), or to the thread's when the message had no sender: the transcript is
text the user wrote, so it may not write to the agent's scope, which every user of
the agent sees. An agent whose scopes allow neither collects nothing.

A collection whose model call fails is logged and dropped: a memory is a
convenience, not worth retrying a paid call for. A resolver that fails means the
platform's key, as in a turn. A job run again (a worker killed midway) makes a
second call; an identical fact is not stored twice.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_core.entities import Message, Usage, UsageRecord, key_source
from agentsvc_core.entities.memory import MemoryScope, words
from agentsvc_core.errors import DomainError
from agentsvc_core.ports import (
    AgentRepository,
    Clock,
    ConversationStore,
    ModelRequest,
    ModelRouter,
    ToolCallRequested,
    UsageReport,
)
from agentsvc_core.ports.jobs import JobQueue
from agentsvc_core.ports.memories import MemoryStore
from agentsvc_core.pricing import PriceTable
from agentsvc_core.use_cases.memories.memories import Memories, MemoryConfig, MemorySettings
from agentsvc_core.use_cases.memories.tools import memory_save_spec
from agentsvc_core.use_cases.org_settings import KeyBroker, OrgSettings
from agentsvc_core.use_cases.turn.events import TurnEnded

__all__ = ["COLLECT_JOB", "COLLECT_PROMPT", "MAX_COLLECTED", "MemoryCollector"]

log = logging.getLogger("agentsvc.memory")

COLLECT_JOB = "memory.collect"
MAX_COLLECTED = 10  # facts saved from one turn
_KNOWN = 20  # remembered facts shown to the model
_TRANSCRIPT_CHARS = 16_000  # of the turn's text sent (its end kept)
_ANSWER_CHARS = 2_000  # of each assistant message in it (the facts are the user's)
COLLECT_PROMPT = (
    "You keep an assistant's long-term memory. Read the conversation turn below and "
    "call memory_save once for each fact worth remembering in later conversations: "
    "who the user is, their preferences, circumstances, plans and decisions, and how "
    "they want to be helped. Skip small talk, what is only true for this moment, and "
    "what is remembered already unchanged. Give each fact a short key (its subject, "
    "such as 'tea'); when a remembered fact changed, save the new one under the same "
    "key. Call no tool when nothing is worth remembering, and write no text."
)


class _Job(msgspec.Struct, frozen=True, array_like=True):
    org_id: str
    agent_id: UUID
    thread_id: UUID
    run_id: UUID
    model_id: str
    user_id: str | None
    metadata: dict[str, str] = {}


class _Save(msgspec.Struct, frozen=True, kw_only=True):
    content: str
    key: str | None = None


def transcript(messages: list[Message]) -> str:
    """The turn as text: what the user said and what the assistant answered (tool
    traffic left out; each answer cut to ``_ANSWER_CHARS``), the end kept when it
    is long."""
    lines = [
        f"user: {m.content}" if m.role == "user" else f"assistant: {m.content[:_ANSWER_CHARS]}"
        for m in messages
        if m.role in ("user", "assistant") and m.content
    ]
    return "\n".join(lines)[-_TRANSCRIPT_CHARS:]


def _place(config: MemoryConfig, job: _Job) -> tuple[MemoryScope, str] | None:
    """Where this turn's facts go: the user's scope, else the thread's (None: the
    agent's scopes allow neither)."""
    if job.user_id is not None and "user" in config.scopes:
        return ("user", job.user_id)
    if "thread" in config.scopes:
        return ("thread", str(job.thread_id))
    return None


class MemoryCollector:
    def __init__(
        self,
        memories: Memories,
        settings: MemorySettings,
        store: MemoryStore,
        conversations: ConversationStore,
        agents: AgentRepository,
        router: ModelRouter,
        keys: KeyBroker,
        org_settings: OrgSettings,
        jobs: JobQueue,
        clock: Clock,
        prices: PriceTable | None = None,
    ) -> None:
        self._memories = memories
        self._settings = settings
        self._store = store
        self._conversations = conversations
        self._agents = agents
        self._router = router
        self._keys = keys
        self._org_settings = org_settings
        self._jobs = jobs
        self._clock = clock
        self._prices = prices

    async def after_turn(self, ended: TurnEnded) -> None:
        """Queue the collection of a completed turn, when the agent asks for it."""
        if ended.status != "completed" or "memory" not in ended.records:
            return
        config = self._settings.opened(ended.org_id, ended.agent_id, ended.records)
        if not config.auto_collect:
            return
        job = _Job(
            ended.org_id,
            ended.agent_id,
            ended.thread_id,
            ended.run_id,
            ended.model_id,
            ended.user_id,
            dict(ended.metadata),
        )
        await self._jobs.enqueue(
            COLLECT_JOB, msgspec.json.encode(job), key=f"{COLLECT_JOB}:{ended.run_id}"
        )

    async def collect(self, payload: bytes) -> None:
        """The job: one model call, its facts saved, its usage recorded."""
        job = msgspec.json.decode(payload, type=_Job)
        try:
            await self._collect(job)
        except DomainError as exc:
            log.warning("memory collection after run %s skipped: %s", job.run_id, exc.detail)

    async def _collect(self, job: _Job) -> None:
        config = await self._settings.of(job.org_id, job.agent_id)
        if not config.auto_collect:
            return  # turned off since the turn
        place = _place(config, job)
        if place is None:
            return
        await self._agents.get(job.org_id, job.agent_id)  # NotFound: the agent went
        messages = await self._conversations.run_messages(job.org_id, job.thread_id, job.run_id)
        said = transcript(messages)
        if not said:
            return
        asked = " ".join(m.content for m in messages if m.role == "user")
        known = await self._store.search(
            job.org_id, job.agent_id, words(asked)[:64], [place, ("agent", None)], _KNOWN
        )
        model, model_name = self._router.route(job.model_id)
        resolver = await self._org_settings.resolver_of(job.org_id, job.agent_id)
        api_key = await self._keys.key(
            resolver, user_id=job.user_id or "", provider=model.provider, model=model_name
        )
        system = COLLECT_PROMPT
        if known:
            system += "\n\nRemembered already:\n" + "\n".join(
                f"- [{m.key or 'no key'}] {m.content}" for m, _ in known
            )
        request = ModelRequest(
            model=model_name,
            system=system,
            messages=[
                Message(
                    id=uuid.uuid4(),
                    org_id=job.org_id,
                    thread_id=job.thread_id,
                    role="user",
                    content=said,
                    created_at=self._clock.now(),
                )
            ],
            tools=[memory_save_spec(config, place[0], scoped=False)],
            max_tokens=1024,
            api_key=api_key,
        )
        calls: list[dict[str, Any]] = []
        usage = Usage()
        try:
            async for event in model.stream(request):
                if isinstance(event, ToolCallRequested) and event.call.name == "memory_save":
                    calls.append(event.call.arguments)
                elif isinstance(event, UsageReport):
                    usage = event.usage
        except BaseException:
            with contextlib.suppress(DomainError):  # the call's error is the one to see
                await self._record(job, model.provider, usage, api_key)
            raise
        saved = 0
        for arguments in calls[:MAX_COLLECTED]:
            saved += await self._save(job, config, place, arguments)
        await self._record(job, model.provider, usage, api_key)
        log.info(
            "memory collection after run %s: %d of %d facts new", job.run_id, saved, len(calls)
        )

    async def _save(
        self,
        job: _Job,
        config: MemoryConfig,
        place: tuple[MemoryScope, str],
        arguments: dict[str, Any],
    ) -> int:
        """One fact: 1 when it was new (stored or superseding), 0 otherwise."""
        try:
            fact = msgspec.convert(arguments, _Save)
        except msgspec.ValidationError as exc:
            log.info("a collected fact of run %s was malformed: %s", job.run_id, exc)
            return 0
        try:
            outcome = await self._memories.save(
                job.org_id,
                job.agent_id,
                place[0],
                place[1],
                fact.content,
                fact.key,
                max_active=config.max_memories,
            )
        except DomainError as exc:
            log.info("a collected fact of run %s was not saved: %s", job.run_id, exc.detail)
            return 0
        return 1 if outcome.outcome == "saved" else 0

    async def _record(self, job: _Job, provider: str, usage: Usage, api_key: str | None) -> None:
        await self._conversations.add_usage(
            [
                UsageRecord(
                    id=uuid.uuid4(),
                    org_id=job.org_id,
                    agent_id=job.agent_id,
                    thread_id=job.thread_id,
                    run_id=job.run_id,
                    message_id=None,
                    provider=provider,
                    model=job.model_id,
                    usage=usage,
                    key_source=key_source(api_key),
                    metadata=job.metadata,
                    created_at=self._clock.now(),
                    cost_usd=None
                    if self._prices is None
                    else self._prices.cost(job.model_id, usage),
                    purpose="memory",
                )
            ]
        )
