"""Memory collection after a turn (use_cases/memories/collect.py, docs/memory.md
step 6): what queues the job, where the facts go, what the model is sent (the
turn's text, the facts its words recall, only ``memory_save``), what is saved
and the usage recorded, over the memory storage, a scripted ``beta`` model, a
recording job queue and a clock the test moves (tests/unit/turn_world.py)."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import msgspec
import pytest

from agentsvc_adapters.llm import Families, PrefixRouter
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_adapters.memory.conversations import MemoryConversations
from agentsvc_core.entities import Role, Thread, ToolCall, Usage, UsageRecord
from agentsvc_core.entities.memory import Memory
from agentsvc_core.errors import Unavailable, Upstream
from agentsvc_core.ports import (
    ModelRequest,
    SealedRecord,
    TextDelta,
    ToolCallRequested,
    UsageReport,
)
from agentsvc_core.ports.resolver import (
    CredentialResolver,
    Resolution,
    ResolverRequest,
)
from agentsvc_core.pricing import Price, PriceTable
from agentsvc_core.use_cases.memories.collect import (
    COLLECT_JOB,
    COLLECT_PROMPT,
    MAX_COLLECTED,
    MemoryCollector,
)
from agentsvc_core.use_cases.memories.memories import MemoryConfig
from agentsvc_core.use_cases.org_settings import KeyBroker, OrgSettings, ResolverConfig
from agentsvc_core.use_cases.sealed import SealedRecords
from agentsvc_core.use_cases.turn.events import TurnEnded
from tests.contract.test_conversations_contract import a_message, a_thread
from tests.unit.runner_world import Jobs
from tests.unit.test_mutants_memories import KEY, ORG, Mind, mind
from tests.unit.turn_world import BOX, NoRefusals, Script

MODEL_ID = "beta:m1"  # the beta family's model "m1"
USER = "u-7"
USAGE = Usage(input_tokens=1000, output_tokens=500)
PRICES = PriceTable([("m1", Price(input=2.0, output=4.0))], "2026-11-01")


class Resolver(CredentialResolver):
    """The agent's credential resolver: answers ``answer`` and records each request."""

    def __init__(self, answer: str | None = "sk-user-own") -> None:
        self.answer = answer
        self.asked: list[ResolverRequest] = []

    async def resolve(
        self, url: str, request: ResolverRequest, secrets: list[str], timeout_ms: int
    ) -> Resolution:
        self.asked.append(request)
        return Resolution(self.answer, "key" if self.answer else "platform")


class FailingUsage(MemoryConversations):
    """A conversation store whose usage write fails."""

    async def add_usage(self, records: list[UsageRecord]) -> None:
        raise Unavailable("usage storage is down")


def save(content: Any, key: str | None = None, *, name: str = "memory_save") -> ToolCallRequested:
    arguments: dict[str, Any] = {"content": content}
    if key is not None:
        arguments["key"] = key
    return ToolCallRequested(
        ToolCall(id=f"c-{uuid.uuid4().hex[:6]}", name=name, arguments=arguments)
    )


@dataclass
class Collection:
    m: Mind
    model: Script
    resolver: Resolver
    jobs: Jobs
    store: MemoryConversations
    collector: MemoryCollector
    thread: Thread
    config: MemoryConfig
    run: UUID = field(default_factory=uuid.uuid4)

    async def configure(self, **changes: Any) -> MemoryConfig:
        return await self.m.settings.update(KEY, self.m.agent.id, {"auto_collect": True, **changes})

    def said(self, *messages: tuple[Role, str], run: UUID | None = None) -> None:
        """Messages of the run (``(role, content)``), as the turn stored them."""
        self.store._messages.setdefault((ORG, self.thread.id), []).extend(
            a_message(self.thread, role, content, run_id=run or self.run)
            for role, content in messages
        )

    def ended(
        self,
        *,
        status: str = "completed",
        user_id: str | None = USER,
        config: MemoryConfig | None = None,
        records: dict[str, SealedRecord] | None = None,
    ) -> TurnEnded:
        """The end of the run as the turn hands it over, with the memory record the
        turn read (``config``, else the configuration at the start)."""
        sealed = SealedRecords(self.m.storage.secrets, BOX).seal(
            ORG, "memory", str(self.m.agent.id), config or self.config
        )
        return TurnEnded(
            org_id=ORG,
            agent_id=self.m.agent.id,
            thread_id=self.thread.id,
            run_id=self.run,
            status=status,
            model_id=MODEL_ID,
            user_id=user_id,
            records={"memory": SealedRecord(value=sealed)} if records is None else records,
            metadata={"team": "blue"},
        )

    async def after(self, ended: TurnEnded | None = None) -> None:
        """The turn ends, and the queued jobs run (in this task)."""
        await self.collector.after_turn(ended or self.ended())
        for kind, payload, _ in self.jobs.queued:
            assert kind == COLLECT_JOB
            await self.collector.collect(payload)
        self.jobs.queued.clear()

    async def facts(self) -> list[Memory]:
        return await self.m.storage.memories.page(
            ORG, self.m.agent.id, scopes=None, status=None, before=None, limit=100
        )

    async def usage(self) -> list[UsageRecord]:
        return await self.store.usage(ORG, self.thread.id)

    @property
    def request(self) -> ModelRequest:
        [request] = self.model.requests
        return request


async def collection(
    *steps: list[Any],
    resolver: bool = False,
    prices: PriceTable | None = PRICES,
    agents_of: MemoryStorage | None = None,
    failing_usage: bool = False,
) -> Collection:
    """The collector of one agent with ``auto_collect`` on, its model playing
    ``steps``; ``resolver``: the agent's credential resolver is on; ``agents_of``:
    the storage the collector reads agents from (another: the agent is gone);
    ``failing_usage``: the usage write fails."""
    m = await mind()
    thread = await m.storage.threads.add(a_thread(ORG, m.agent.id))
    store = FailingUsage() if failing_usage else m.storage.conversations
    assert isinstance(store, MemoryConversations)
    model = Script(*(steps or ([UsageReport(USAGE)],)), provider="beta")
    org_settings = OrgSettings(
        m.storage.secrets, m.storage.agents, BOX, NoRefusals(), m.clock, allow_http=False
    )
    if resolver:
        config = ResolverConfig(
            agent_id=m.agent.id, org_id=ORG, enabled=True, resolver_url="https://r.example/"
        )
        await SealedRecords(m.storage.secrets, BOX).put(ORG, "resolver", str(m.agent.id), config)
    answers = Resolver()
    jobs = Jobs()
    collector = MemoryCollector(
        m.memories,
        m.settings,
        m.storage.memories,
        store,
        (agents_of or m.storage).agents,
        PrefixRouter(Families(local=Script(), beta=model)),
        KeyBroker(org_settings, answers),
        org_settings,
        jobs,
        m.clock,
        prices,
    )
    on = await m.settings.update(KEY, m.agent.id, {"auto_collect": True})
    return Collection(m, model, answers, jobs, store, collector, thread, on)


# --- what queues the job -------------------------------------------------------------


async def test_a_completed_turn_queues_one_collection_under_its_runs_key() -> None:
    c = await collection()
    await c.collector.after_turn(c.ended())
    [(kind, payload, key)] = c.jobs.queued
    assert (kind, key) == ("memory.collect", f"memory.collect:{c.run}")
    assert c.jobs.delays == [0.0]
    c.said(("user", "I drink green tea"))
    c.model.steps = [[save("Drinks green tea", "tea"), UsageReport(USAGE)]]
    await c.collector.collect(payload)
    [fact] = await c.facts()
    assert (fact.content, fact.key, fact.scope, fact.scope_id) == (
        "Drinks green tea",
        "tea",
        "user",
        USER,
    )
    [record] = await c.usage()
    assert (record.run_id, record.thread_id, record.agent_id, record.org_id) == (
        c.run,
        c.thread.id,
        c.m.agent.id,
        ORG,
    )
    assert (record.model, record.metadata) == (MODEL_ID, {"team": "blue"})


@pytest.mark.parametrize("status", ["failed", "interrupted", "stopped"])
async def test_a_turn_that_did_not_complete_queues_nothing(status: str) -> None:
    c = await collection()
    await c.collector.after_turn(c.ended(status=status))
    assert c.jobs.queued == []


async def test_a_turn_without_the_memory_record_or_with_collection_off_queues_nothing() -> None:
    c = await collection()
    # the turn read no memory record: the defaults, collection off
    await c.collector.after_turn(c.ended(records={}))
    off = msgspec.structs.replace(c.config, auto_collect=False, enabled=True)
    await c.collector.after_turn(c.ended(config=off))
    assert c.jobs.queued == []


async def test_collection_turned_off_after_the_turn_calls_no_model() -> None:
    c = await collection()
    c.said(("user", "I drink green tea"))
    await c.collector.after_turn(c.ended())
    await c.configure(auto_collect=False)
    await c.collector.collect(c.jobs.queued[0][1])
    assert c.model.requests == []
    assert await c.usage() == []


# --- where the facts go --------------------------------------------------------------


@pytest.mark.parametrize(
    ("scopes", "user_id", "place"),
    [
        (["agent", "thread", "user"], USER, ("user", USER)),
        (["user"], USER, ("user", USER)),
        (["agent", "thread", "user"], None, ("thread", "the thread")),
        (["agent", "thread"], USER, ("thread", "the thread")),
        (["agent"], USER, None),
        (["agent", "user"], None, None),
    ],
)
async def test_facts_go_to_the_senders_scope_else_the_threads_never_the_agents(
    scopes: list[str], user_id: str | None, place: tuple[str, str] | None
) -> None:
    c = await collection([save("Prefers window seats", "seat"), UsageReport(USAGE)])
    await c.configure(scopes=scopes)
    c.said(("user", "A window seat, please"))
    await c.after(c.ended(user_id=user_id))
    if place is None:
        assert c.model.requests == []
        assert await c.facts() == []
        return
    [fact] = await c.facts()
    where = (place[0], str(c.thread.id) if place[1] == "the thread" else place[1])
    assert (fact.scope, fact.scope_id) == where
    assert c.request.tools[0].description.endswith("instead of adding a second one.")


async def test_an_agent_gone_is_logged_and_calls_no_model(caplog: pytest.LogCaptureFixture) -> None:
    c = await collection(agents_of=MemoryStorage())
    c.said(("user", "I drink green tea"))
    with caplog.at_level(logging.WARNING, "agentsvc.memory"):
        await c.after()
    assert c.model.requests == []
    assert await c.usage() == []
    [line] = [r for r in caplog.records if r.name == "agentsvc.memory"]
    assert line.levelno == logging.WARNING
    assert line.getMessage() == f"memory collection after run {c.run} skipped: agent not found"


# --- what the model is sent ----------------------------------------------------------


async def test_the_model_gets_the_turns_text_and_only_an_unscoped_memory_save() -> None:
    c = await collection()
    c.m.clock.advance(90)
    c.said(
        ("user", "I drink green tea"),
        ("assistant", ""),  # a step that only called tools
        ("tool", "the tool's output"),
        ("assistant", "Noted: green tea"),
    )
    c.said(("user", "another turn's words"), run=uuid.uuid4())
    await c.after()
    request = c.request
    assert request.model == "m1"
    assert request.system == COLLECT_PROMPT
    assert request.max_tokens == 1024
    assert request.api_key is None
    [message] = request.messages
    assert message.content == "user: I drink green tea\nassistant: Noted: green tea"
    assert (message.role, message.org_id, message.thread_id) == ("user", ORG, c.thread.id)
    assert message.created_at == c.m.clock.now()
    assert isinstance(message.id, UUID)
    [tool] = request.tools
    assert tool.name == "memory_save"
    assert set(tool.parameters["properties"]) == {"content", "key"}


async def test_answers_are_cut_and_a_long_turn_keeps_its_end() -> None:
    c = await collection()
    c.said(("user", "u" * 3000), ("assistant", "a" * 2500))
    await c.after()
    assert c.request.messages[0].content == f"user: {'u' * 3000}\nassistant: {'a' * 2000}"
    d = await collection()
    d.said(*[("user", f"{i:05d} " + "x" * 994) for i in range(20)])
    await d.after()
    whole = "\n".join(f"user: {i:05d} " + "x" * 994 for i in range(20))
    assert d.request.messages[0].content == whole[-16000:]
    assert d.request.messages[0].content.endswith("00019 " + "x" * 994)


async def test_a_turn_without_text_calls_no_model() -> None:
    c = await collection()
    c.said(("tool", "only a tool's output"), ("assistant", ""))
    await c.after()
    assert c.model.requests == []
    assert await c.usage() == []


async def test_the_facts_the_users_words_recall_are_shown_with_their_keys() -> None:
    c = await collection()
    m = c.m
    await m.keep("The agent serves green tea", key="serves")
    await m.keep("Drinks tea at noon", "user", USER)
    await m.keep("Likes cake", "user", USER, key="cake")
    await m.keep("Another user's tea", "user", "u-8")
    await m.keep("This thread is about tea", "thread", str(c.thread.id))
    await m.keep("Drinks coffee", "user", USER)
    c.said(("user", "Some tea"), ("assistant", "coffee?"), ("user", "cake too"))
    await c.after()
    system = c.request.system
    head = COLLECT_PROMPT + "\n\nRemembered already:\n"
    assert system.startswith(head)
    assert set(system[len(head) :].split("\n")) == {
        "- [serves] The agent serves green tea",
        "- [no key] Drinks tea at noon",
        "- [cake] Likes cake",
    }


async def test_at_most_twenty_facts_are_shown_from_the_first_64_words() -> None:
    c = await collection()
    for i in range(25):
        await c.m.keep(f"tea fact {i}", "user", USER)
    c.said(("user", "tea"))
    await c.after()
    assert c.request.system.count("\n- [no key] tea fact") == 20
    d = await collection()
    await d.m.keep("w63 is the 64th word", "user", USER)
    await d.m.keep("w64 is the 65th word", "user", USER)
    d.said(("user", " ".join(f"w{i}" for i in range(70))))
    await d.after()
    assert "w63 is the 64th word" in d.request.system
    assert "w64" not in d.request.system


async def test_with_the_resolver_on_the_users_key_pays_and_is_recorded_as_theirs() -> None:
    c = await collection(resolver=True)
    c.said(("user", "I drink green tea"))
    await c.after()
    assert c.request.api_key == "sk-user-own"
    assert c.resolver.asked == [
        ResolverRequest(user_id=USER, org_id=ORG, provider="beta", model="m1")
    ]
    [record] = await c.usage()
    assert record.key_source == "byok"
    d = await collection(resolver=True)
    d.said(("user", "I drink green tea"))
    await d.after(d.ended(user_id=None))
    assert d.resolver.asked[0].user_id == ""


# --- what is saved and recorded -----------------------------------------------------


async def test_each_memory_save_call_is_a_fact_in_order_and_the_usage_is_recorded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    c = await collection(
        [
            TextDelta("no text is read"),
            save("Drinks green tea", "tea"),
            save("Searches the web", name="web_search"),
            save(42),  # malformed
            save("x" * 2001),  # too long: refused
            save("Lives in Lyon", "City"),
            save("lives in  LYON"),  # the same fact again
            UsageReport(USAGE),
        ]
    )
    await c.m.keep("Drinks coffee", "user", USER, key="tea")
    c.m.clock.advance(5)
    c.said(("user", "I drink green tea and live in Lyon"))
    with caplog.at_level(logging.INFO, "agentsvc.memory"):
        await c.after()
    facts = await c.facts()
    active = {(f.content, f.key) for f in facts if f.status == "active"}
    assert active == {("Drinks green tea", "tea"), ("Lives in Lyon", "city")}
    assert all(f.scope_id == USER for f in facts)
    [old] = [f for f in facts if f.status == "superseded"]
    assert old.content == "Drinks coffee"
    [record] = await c.usage()
    assert record == UsageRecord(
        id=record.id,
        org_id=ORG,
        agent_id=c.m.agent.id,
        thread_id=c.thread.id,
        run_id=c.run,
        message_id=None,
        provider="beta",
        model=MODEL_ID,
        usage=USAGE,
        key_source="platform",
        metadata={"team": "blue"},
        created_at=c.m.clock.now(),
        cost_usd=0.004,
        purpose="memory",
    )
    assert isinstance(record.id, UUID)
    messages = [r.getMessage() for r in caplog.records if r.name == "agentsvc.memory"]
    malformed, refused = messages[0], messages[1]
    assert malformed.startswith(f"a collected fact of run {c.run} was malformed: Expected `str`")
    assert refused == (
        f"a collected fact of run {c.run} was not saved: content: must be at most 2000 characters"
    )
    assert messages[-1] == f"memory collection after run {c.run}: 2 of 5 facts new"


async def test_at_most_ten_facts_are_kept_from_one_turn() -> None:
    assert MAX_COLLECTED == 10
    c = await collection([*(save(f"Fact number {i}") for i in range(12)), UsageReport(USAGE)])
    c.said(("user", "Many facts"))
    await c.after()
    kept = {f.content for f in await c.facts()}
    assert kept == {f"Fact number {i}" for i in range(10)}


async def test_without_a_price_table_the_cost_is_unknown() -> None:
    c = await collection(prices=None)
    c.said(("user", "Hello"))
    await c.after()
    [record] = await c.usage()
    assert (record.cost_usd, record.usage) == (None, USAGE)


async def test_a_failed_model_call_saves_nothing_but_records_its_usage() -> None:
    c = await collection(
        [save("Drinks green tea"), UsageReport(USAGE), Upstream("the provider failed")],
        resolver=True,
    )
    c.said(("user", "I drink green tea"))
    await c.after()  # logged, not raised
    assert await c.facts() == []
    [record] = await c.usage()
    assert (record.usage, record.purpose, record.run_id) == (USAGE, "memory", c.run)
    assert (record.provider, record.model, record.key_source) == ("beta", MODEL_ID, "byok")


async def test_a_failure_that_is_not_the_services_is_raised_after_the_usage() -> None:
    c = await collection([UsageReport(USAGE), RuntimeError("a bug")])
    c.said(("user", "I drink green tea"))
    with pytest.raises(RuntimeError, match="a bug"):
        await c.after()
    assert [r.usage for r in await c.usage()] == [USAGE]


async def test_the_model_calls_error_is_raised_even_when_its_usage_cannot_be_kept() -> None:
    c = await collection([RuntimeError("a bug")], failing_usage=True)
    c.said(("user", "I drink green tea"))
    with pytest.raises(RuntimeError, match="a bug"):
        await c.after()
