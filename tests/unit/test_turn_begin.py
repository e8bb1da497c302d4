"""The turn's start: the model call is made while ``begin_turn`` stores the run.

What must hold (module docstring of ``agentsvc_core.use_cases.turn.conversation``): the
first token does not wait for the write; nothing the reply produces is shown, stored
or acted on (tools) before the run is stored; a refused run leaves nothing behind;
a message that came between the turn's read and its write is in the model's context.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import msgspec
import pytest

from agentsvc_adapters.clock import SystemClock
from agentsvc_adapters.llm import Families, PrefixRouter
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_adapters.signals import LocalStopBus
from agentsvc_core.entities import Agent, Message, Principal, Run, Thread, ToolCall, Usage
from agentsvc_core.errors import Conflict, ThreadBusy
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
from agentsvc_core.ports.idempotency import IdempotencyClaim
from agentsvc_core.use_cases.branches import branch_of
from agentsvc_core.use_cases.threads import Threads
from agentsvc_core.use_cases.turn.conversation import Conversation, SendInput
from agentsvc_core.use_cases.turn.events import Done, Meta, Token, Turn
from tests.contract.conftest import now
from tests.contract.test_agents_contract import agent_in
from tests.contract.test_conversations_contract import a_message, a_run, a_thread
from tests.unit.turn_world import read_all

ORG = "org-begin"
WHO = Principal(org_id=ORG, method="api_key")


class Model(ChatModel):
    """Says ``words``, or asks for ``tool`` once; records its requests and whether
    each stream ran to its end or was closed early."""

    provider = "local"

    def __init__(self, words: list[str], tool: str | None = None) -> None:
        self.words = words
        self.tool = tool
        self.requests: list[ModelRequest] = []
        self.started = asyncio.Event()
        self.ended: list[str] = []  # per call: "done" or "closed"
        self.ended_once = asyncio.Event()  # a call ended (either way)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        self.started.set()
        try:
            if self.tool and request.messages[-1].role != "tool":
                yield ToolCallRequested(ToolCall(id="c1", name=self.tool, arguments={}))
            else:
                for w in self.words:
                    yield TextDelta(w)
                    await asyncio.sleep(0)
            yield UsageReport(Usage(input_tokens=3, output_tokens=len(self.words)))
            self.ended.append("done")
            self.ended_once.set()
        except BaseException:
            self.ended.append("closed")
            self.ended_once.set()
            raise


class Tools(ServerTools):
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.store: Store | None = None
        self.run_stored_at_call: list[bool] = []  # per call: had begin_turn returned?

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
        self.calls.append(name)
        self.run_stored_at_call.append(self.store is not None and self.store.stored > 0)
        return "found"


class Store:
    """The memory store, with a begin_turn that waits for ``release`` and can
    refuse, or let another turn's messages in first."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.release = asyncio.Event()
        self.refuse = False
        self.before: list[Message] = []  # stored as if by another turn, before the write
        self.before_head: UUID | None = None  # the head that other turn moved the thread to
        self.begins = 0
        self.begun = asyncio.Event()  # set at every begin_turn call
        self.stored = 0  # begin_turns that returned
        self.finished: list[Run] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def begin_turn(
        self,
        run: Run,
        new: list[Message],
        stale_before: datetime,
        seen: int | None = None,
        claim: IdempotencyClaim | None = None,
        *,
        head: Any = None,
    ) -> list[Message] | None:
        self.begins += 1
        self.begun.set()
        await self.release.wait()
        if self.refuse:
            raise ThreadBusy()
        if self.before:
            other = msgspec.structs.replace(run, id=uuid.uuid4(), status="completed")
            await self.inner.begin_turn(other, self.before, stale_before, head=self.before_head)
            await self.inner.finish_turn(other, [], [])
            self.before = []
        fresh = await self.inner.begin_turn(run, new, stale_before, seen, head=head)
        self.stored += 1
        return fresh  # type: ignore[no-any-return]

    async def until_begins(self, n: int) -> None:
        """Wait until ``n`` begin_turn calls have come in."""
        while self.begins < n:
            self.begun.clear()
            await asyncio.wait_for(self.begun.wait(), 5)

    async def finish_turn(
        self,
        run: Run,
        new: list[Message],
        usage: list[Any],
        events: Any = None,
        trace: Any = None,
        *,
        head: Any = None,
    ) -> None:
        self.finished.append(run)
        await self.inner.finish_turn(run, new, usage, events, trace, head=head)


async def world(model: Model) -> tuple[Conversation, Store, Tools, Thread, MemoryStorage]:
    storage = MemoryStorage()
    agent = agent_in(ORG)
    await storage.agents.add(agent)
    thread = await storage.threads.add(a_thread(ORG, agent.id))
    store, tools, clock = Store(storage.conversations), Tools(), SystemClock()
    tools.store = store
    conversation = Conversation(
        Threads(storage.threads, storage.agents, storage.conversations, clock),
        storage.turn_reader,
        store,
        PrefixRouter(Families(local=model)),
        tools,
        LocalStopBus(),
        clock,
    )
    return conversation, store, tools, thread, storage


async def replies_ended() -> None:
    """Wait until every reply task (``turn-<run id>``) has ended, cancelled or not."""
    others = {"turn-heartbeats", "turn-drain"}
    replies = [
        t
        for t in asyncio.all_tasks()
        if t.get_name().startswith("turn-") and t.get_name() not in others
    ]
    if replies:
        await asyncio.wait(replies, timeout=5)
    assert all(t.done() for t in replies)


async def stored(storage: MemoryStorage, thread_id: UUID) -> list[tuple[str, str]]:
    page, _ = await storage.conversations.history(ORG, thread_id, offset=0, limit=100)
    return [(m.role, m.content) for m in page]


async def test_the_model_is_called_while_the_run_is_being_stored() -> None:
    model = Model(["Hel", "lo"])
    conversation, store, _, thread, storage = await world(model)
    sending = asyncio.create_task(conversation.send(WHO, thread.id, SendInput(content="hi")))
    await asyncio.wait_for(model.ended_once.wait(), 5)
    assert model.ended == ["done"]  # the whole reply streamed; the write is still pending
    assert not sending.done()
    assert store.begins == 1
    assert store.finished == []  # nothing is stored before the run is
    store.release.set()
    turn = await sending
    events = await read_all(turn)
    assert [type(e) for e in events] == [Meta, Token, Token, Done]
    assert "".join(e.delta for e in events if isinstance(e, Token)) == "Hello"
    assert await stored(storage, thread.id) == [("user", "hi"), ("assistant", "Hello")]
    assert [r.status for r in store.finished] == ["completed"]
    assert [[m.content for m in r.messages] for r in model.requests] == [["hi"]]


async def test_a_refused_run_leaves_nothing_behind() -> None:
    model = Model(["never", "shown", "anywhere"] * 50)
    conversation, store, _, thread, storage = await world(model)
    store.refuse = True
    sending = asyncio.create_task(conversation.send(WHO, thread.id, SendInput(content="hi")))
    await asyncio.wait_for(model.started.wait(), 5)
    store.release.set()
    with pytest.raises(Conflict) as busy:
        await sending
    assert busy.value.code == "THREAD_BUSY"
    await replies_ended()  # the cancelled reply wound down
    assert model.ended == ["closed"]  # the provider's stream was closed early
    assert store.finished == []
    assert await stored(storage, thread.id) == []
    assert await storage.conversations.usage(ORG, thread.id) == []


async def test_no_tool_runs_before_the_run_is_stored() -> None:
    model = Model(["done"], tool="kb__search")
    conversation, store, tools, thread, storage = await world(model)
    store.refuse = True
    sending = asyncio.create_task(conversation.send(WHO, thread.id, SendInput(content="look")))
    await asyncio.wait_for(model.ended_once.wait(), 5)
    assert model.ended == ["done"]  # the model's call is over; its tool call waits for the write
    assert tools.calls == []
    store.release.set()
    with pytest.raises(Conflict):
        await sending
    await replies_ended()  # the refused reply ended without running its tool
    assert tools.calls == []
    assert store.finished == []
    assert await stored(storage, thread.id) == []

    # stored, the same reply runs its tool
    store.refuse = False
    turn = await conversation.send(WHO, thread.id, SendInput(content="look"))
    await read_all(turn)
    assert tools.calls == ["kb__search"]
    assert tools.run_stored_at_call == [True]  # it ran once the run was stored


async def test_a_message_that_came_between_the_read_and_the_write_reaches_the_model() -> None:
    model = Model(["ok"])
    conversation, store, _, thread, storage = await world(model)
    store.before = [a_message(thread, content="from another process")]
    sending = asyncio.create_task(conversation.send(WHO, thread.id, SendInput(content="mine")))
    await asyncio.wait_for(model.started.wait(), 5)
    store.release.set()
    turn = await sending
    events = await read_all(turn)
    # the first call (without the other message) was dropped unseen; the second had it
    assert [[m.content for m in r.messages] for r in model.requests] == [
        ["mine"],
        ["from another process", "mine"],
    ]
    assert [type(e) for e in events] == [Meta, Token, Done]
    assert await stored(storage, thread.id) == [
        ("user", "from another process"),
        ("user", "mine"),
        ("assistant", "ok"),
    ]


async def test_a_send_that_an_edit_overtook_follows_its_message_and_moves_the_head() -> None:
    # The thread had one line when the send read it; before its write, an edit of the
    # first message answered on a new branch (the thread's head moved there). The
    # send's message follows the one stored before it: the send moves the head to
    # its reply, and the model is sent that branch, not every message of the thread.
    model = Model(["ok"])
    conversation, store, _, thread, storage = await world(model)
    run = a_run(thread)
    old = [
        a_message(thread, content="first"),
        a_message(thread, role="assistant", content="answer"),
    ]
    await storage.conversations.begin_turn(run, old, now() - timedelta(seconds=45))
    await storage.conversations.finish_turn(
        msgspec.structs.replace(run, status="completed"), [], []
    )
    edited = a_message(thread, content="edited", parent_id=thread.id)
    again = a_message(thread, role="assistant", content="new answer", parent_id=edited.id)
    store.before, store.before_head = [edited, again], again.id
    sending = asyncio.create_task(conversation.send(WHO, thread.id, SendInput(content="mine")))
    await asyncio.wait_for(model.started.wait(), 5)
    store.release.set()
    await read_all(await sending)
    await replies_ended()
    assert [m.content for m in model.requests[-1].messages] == ["edited", "new answer", "mine"]
    head = (await storage.threads.get(ORG, thread.id)).head_id
    every = await storage.conversations.thread_messages(ORG, thread.id)
    assert [m.content for m in branch_of(every, head)] == ["edited", "new answer", "mine", "ok"]


async def test_an_overtaken_send_whose_reply_failed_still_makes_its_message_current() -> None:
    model = Model(["never"])

    async def failing(request: ModelRequest) -> AsyncIterator[ModelEvent]:
        model.requests.append(request)
        model.started.set()
        raise RuntimeError("the provider fell over")
        yield  # pragma: no cover

    model.stream = failing  # type: ignore[method-assign]
    conversation, store, _, thread, storage = await world(model)
    run = a_run(thread)
    first = a_message(thread, content="first")
    await storage.conversations.begin_turn(run, [first], now() - timedelta(seconds=45))
    await storage.conversations.finish_turn(
        msgspec.structs.replace(run, status="completed"), [], []
    )
    edited = a_message(thread, content="edited", parent_id=thread.id)
    store.before, store.before_head = [edited], edited.id
    sending = asyncio.create_task(conversation.send(WHO, thread.id, SendInput(content="mine")))
    await asyncio.wait_for(model.started.wait(), 5)
    store.release.set()
    await read_all(await sending)
    await replies_ended()
    head = (await storage.threads.get(ORG, thread.id)).head_id
    every = await storage.conversations.thread_messages(ORG, thread.id)
    assert [m.content for m in branch_of(every, head)][-1] == "mine"


async def test_a_running_reply_refuses_the_turn_before_the_model_is_called() -> None:
    model = Model(["no"])
    conversation, store, _, thread, storage = await world(model)
    await storage.conversations.begin_turn(a_run(thread), [], now() - timedelta(seconds=45))
    with pytest.raises(Conflict) as busy:
        await conversation.send(WHO, thread.id, SendInput(content="hi"))
    assert busy.value.code == "THREAD_BUSY"
    assert model.requests == []
    assert store.begins == 0


async def test_a_stop_reaches_a_reply_that_was_started_again() -> None:
    model = Model([f"w{i} " for i in range(200)])
    slow = model.stream

    async def paced(request: ModelRequest) -> AsyncIterator[ModelEvent]:
        async for event in slow(request):
            await asyncio.sleep(0.005)
            yield event

    model.stream = paced  # type: ignore[method-assign]
    conversation, store, _, thread, storage = await world(model)
    store.before = [a_message(thread, content="from another process")]
    store.release.set()
    turn = await conversation.send(WHO, thread.id, SendInput(content="mine"))
    first = await turn.read(1, 5.0)
    assert first
    assert isinstance(first[0], Token)
    # the reply that streams is the one started again, with the other message
    assert [m.content for m in model.requests[-1].messages] == ["from another process", "mine"]
    assert await conversation.stop(WHO, thread.id) is True
    events = await read_all(turn)
    done = events[-1]
    assert isinstance(done, Done)
    assert done.stopped is True
    assert len([e for e in events if isinstance(e, Token)]) < 150
    assert (await stored(storage, thread.id))[-1][0] == "assistant"


async def test_a_burst_of_sends_to_one_thread_makes_at_most_one_early_call() -> None:
    model = Model(["ok"])
    conversation, store, _, thread, storage = await world(model)
    sends = [
        asyncio.create_task(conversation.send(WHO, thread.id, SendInput(content=f"s{i}")))
        for i in range(5)
    ]
    await asyncio.wait_for(model.started.wait(), 5)
    await store.until_begins(5)  # every send is writing its run...
    assert len(model.requests) == 1  # ...but only the first called the model before
    store.release.set()
    results = await asyncio.gather(*sends, return_exceptions=True)
    turns = [r for r in results if isinstance(r, Turn)]
    refused = [r for r in results if isinstance(r, Conflict)]
    assert (len(turns), len(refused)) == (1, 4)
    await read_all(turns[0])
    assert len(model.requests) == 1
    assert [c for r, c in await stored(storage, thread.id) if r == "user"] == ["s0"]
