"""Two sends on one busy thread (use_cases/turn/queued.py): ``reject`` (the spec's
409), ``enqueue`` (the replies one after the other, in the order sent) and
``interrupt`` (the running reply stopped, its text kept, the new one started)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from agentsvc_core.entities import Principal, Run, ToolCall, Usage
from agentsvc_core.errors import (
    Conflict,
    IdempotencyKeyReused,
    InvalidInput,
    NotFound,
    PermissionDenied,
    ThreadBusy,
    Unavailable,
)
from agentsvc_core.ports import (
    ChatModel,
    Finished,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ToolCallRequested,
    ToolSpec,
    UsageReport,
)
from agentsvc_core.use_cases.idempotency import RequestKey
from agentsvc_core.use_cases.turn import queued
from agentsvc_core.use_cases.turn.conversation import SendInput
from agentsvc_core.use_cases.turn.events import Done, ErrorEvent, Meta, RequiresAction, Token
from agentsvc_core.use_cases.turn.queued import (
    Line,
    Queued,
    Waiting,
    error_event,
    reply_of,
    until_free,
)
from tests.unit.turn_world import ORG, T0, read_all, world

WHO = Principal(org_id=ORG, method="api_key")


class Gated(ChatModel):
    """Answers "re: <the last user message>", each reply only once its gate
    opens (``open``); records the order of the requests."""

    provider = "local"

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.gates: list[asyncio.Event] = []
        self.waiting = asyncio.Event()

    def open(self, index: int) -> None:
        while len(self.gates) <= index:
            self.gates.append(asyncio.Event())
        self.gates[index].set()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        last = next(m.content for m in reversed(request.messages) if m.role == "user")
        index = len(self.asked)
        self.asked.append(last)
        while len(self.gates) <= index:
            self.gates.append(asyncio.Event())
        yield TextDelta(f"re: {last}")
        self.waiting.set()
        await self.gates[index].wait()
        yield UsageReport(Usage(input_tokens=1, output_tokens=1))
        yield Finished("stop")


def msg(content: str, strategy: Any = "reject") -> SendInput:
    return SendInput(content=content, multitask_strategy=strategy)


def text(events: list[Any]) -> str:
    return "".join(e.delta for e in events if isinstance(e, Token))


async def until(condition: Any) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("never came")


async def test_reject_is_the_default_and_answers_thread_busy() -> None:
    model = Gated()
    w = await world(model)  # type: ignore[arg-type]
    first = await w.conversation.post(WHO, w.thread.id, msg("one"))
    await model.waiting.wait()
    with pytest.raises(ThreadBusy):
        await w.conversation.post(WHO, w.thread.id, SendInput(content="two"))
    model.open(0)
    assert isinstance((await read_all(first))[-1], Done)
    assert model.asked == ["one"]


async def test_three_enqueued_sends_stream_three_replies_in_order() -> None:
    model = Gated()
    w = await world(model)  # type: ignore[arg-type]
    first = await w.conversation.post(WHO, w.thread.id, msg("one", "enqueue"))
    await model.waiting.wait()
    second = await w.conversation.post(WHO, w.thread.id, msg("two", "enqueue"))
    third = await w.conversation.post(WHO, w.thread.id, msg("three", "enqueue"))
    # the waiting streams answer keep-alives, nothing else, while the first runs
    assert await second.read(0, 0.05) is None
    assert await third.read(0, 0.05) is None
    assert model.asked == ["one"]
    for i in range(3):
        model.open(i)
    replies = [await read_all(s) for s in (first, second, third)]
    assert [text(r) for r in replies] == ["re: one", "re: two", "re: three"]
    for events in replies:
        assert isinstance(events[0], Meta)
        assert isinstance(events[-1], Done)
        assert events[-1].ok
    assert model.asked == ["one", "two", "three"]
    # each reply saw the ones before it: stored in order, one run after another
    stored = [(m.role, m.content) for m in await w.messages()]
    assert stored == [
        ("user", "one"),
        ("assistant", "re: one"),
        ("user", "two"),
        ("assistant", "re: two"),
        ("user", "three"),
        ("assistant", "re: three"),
    ]
    assert [r.status for r in await w.runs()] == ["completed"] * 3


async def test_an_enqueued_send_starts_only_once_the_running_reply_ended() -> None:
    model = Gated()
    w = await world(model)  # type: ignore[arg-type]
    first = await w.conversation.post(WHO, w.thread.id, msg("one"))
    await model.waiting.wait()
    second = await w.conversation.post(WHO, w.thread.id, msg("two", "enqueue"))
    await asyncio.sleep(0.1)
    assert model.asked == ["one"]
    assert len(await w.messages()) == 1  # nothing of the waiting send is stored yet
    model.open(0)
    model.open(1)
    assert text(await read_all(first)) == "re: one"
    assert text(await read_all(second)) == "re: two"


async def test_interrupt_stops_the_running_reply_keeps_its_text_and_starts_the_new_one() -> None:
    model = Gated()
    w = await world(model)  # type: ignore[arg-type]
    first = await w.conversation.post(WHO, w.thread.id, msg("one"))
    await model.waiting.wait()
    second = await w.conversation.post(WHO, w.thread.id, msg("two", "interrupt"))
    model.open(1)
    old = await read_all(first)
    assert isinstance(old[-1], Done)
    assert old[-1].stopped
    new = await read_all(second)
    assert text(new) == "re: two"
    assert isinstance(new[-1], Done)
    assert new[-1].ok
    assert not new[-1].stopped
    stored = [(m.role, m.content) for m in await w.messages()]
    assert stored[:2] == [("user", "one"), ("assistant", "re: one")]  # kept, as a stop keeps it
    assert stored[2:] == [("user", "two"), ("assistant", "re: two")]
    assert [r.status for r in await w.runs()] == ["stopped", "completed"]


async def test_interrupt_on_a_free_thread_is_a_plain_send() -> None:
    w = await world()
    events = await read_all(await w.conversation.post(WHO, w.thread.id, msg("hi", "interrupt")))
    assert isinstance(events[-1], Done)
    assert events[-1].ok
    assert [r.status for r in await w.runs()] == ["completed"]


class AsksTheClient(ChatModel):
    """Calls the client's tool ``pick`` once its gate opens."""

    provider = "local"

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.waiting = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.waiting.set()
        await self.gate.wait()
        yield ToolCallRequested(ToolCall(id="call-1", name="pick", arguments={}))
        yield UsageReport(Usage())
        yield Finished("tool_calls")


async def test_a_refusal_found_once_the_thread_is_free_ends_the_stream_with_an_error() -> None:
    model = AsksTheClient()
    w = await world(model)  # type: ignore[arg-type]
    pick = ToolSpec(name="pick", description="pick one", parameters={"type": "object"})
    first = await w.conversation.post(WHO, w.thread.id, SendInput(content="one", tools=[pick]))
    await model.waiting.wait()
    # the running reply will wait for the client's tool result, which this send lacks
    late = await w.conversation.post(WHO, w.thread.id, msg("two", "enqueue"))
    model.gate.set()
    assert any(isinstance(e, RequiresAction) for e in await read_all(first))
    events = await read_all(late)
    assert len(events) == 1
    error = events[0]
    assert isinstance(error, ErrorEvent)
    assert error.code == "VALIDATION_ERROR"
    assert "toolResults" in (error.detail or "") or "tool results" in (error.detail or "")
    assert [m.content for m in await w.messages() if m.role == "user"] == ["one"]


async def test_a_keyed_retry_of_a_waiting_send_gets_the_same_stream() -> None:
    model = Gated()
    w = await world(model, stored=True)  # type: ignore[arg-type]
    first = await w.conversation.post(WHO, w.thread.id, msg("one"))
    await model.waiting.wait()
    key = RequestKey(key="k-1", fingerprint=b"f1")
    waiting = await w.conversation.send_once(WHO, w.thread.id, msg("two", "enqueue"), key)
    again = await w.conversation.send_once(WHO, w.thread.id, msg("two", "enqueue"), key)
    assert again is waiting
    with pytest.raises(IdempotencyKeyReused):
        await w.conversation.send_once(
            WHO, w.thread.id, msg("other", "enqueue"), RequestKey(key="k-1", fingerprint=b"f2")
        )
    model.open(0)
    model.open(1)
    await read_all(first)
    assert text(await read_all(waiting)) == "re: two"
    # once started, a retry follows the reply it started (stored with its key)
    later = await w.conversation.send_once(WHO, w.thread.id, msg("two", "enqueue"), key)
    assert text(await read_all(later)) == "re: two"
    assert model.asked == ["one", "two"]


async def test_a_strategy_the_service_does_not_know_is_refused() -> None:
    w = await world()
    with pytest.raises(InvalidInput) as caught:
        await w.conversation.post(WHO, w.thread.id, msg("hi", "later"))
    assert caught.value.field == "multitask_strategy"


# --- the parts ---------------------------------------------------------------------


async def test_the_line_lets_each_in_after_the_one_before_in_the_order_they_came() -> None:
    line = Line()
    order: list[int] = []
    release = asyncio.Event()

    async def one(i: int) -> None:
        async with line.turn("t"):
            order.append(i)
            if i == 0:
                await release.wait()

    tasks = [asyncio.create_task(one(i)) for i in range(4)]
    await asyncio.sleep(0.02)
    assert order == [0]
    release.set()
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3]
    assert len(line) == 0  # no line is kept once empty


async def test_a_send_that_leaves_the_line_lets_the_next_in() -> None:
    line = Line()
    entered: list[str] = []
    hold = asyncio.Event()

    async def first() -> None:
        async with line.turn("t"):
            await hold.wait()

    async def second() -> None:
        async with line.turn("t"):
            entered.append("second")

    async def third() -> None:
        async with line.turn("t"):
            entered.append("third")

    a = asyncio.create_task(first())
    await asyncio.sleep(0)
    b = asyncio.create_task(second())
    c = asyncio.create_task(third())
    await asyncio.sleep(0.02)
    b.cancel()  # gives up while waiting
    hold.set()
    await asyncio.gather(a, c)
    assert entered == ["third"]
    # lines of other threads do not wait for this one
    async with line.turn("other"):
        pass


async def test_until_free_awaits_a_reply_of_this_process_and_polls_another_s() -> None:
    done = asyncio.Event()
    task = asyncio.create_task(done.wait())
    answers: list[Any] = [task, True, False]
    asked = 0

    async def running() -> Any:
        nonlocal asked
        asked += 1
        return answers[min(asked - 1, len(answers) - 1)]

    deadline = asyncio.get_running_loop().time() + 5
    waiter = asyncio.create_task(until_free(running, deadline))
    await asyncio.sleep(0.05)
    assert asked == 1
    assert not waiter.done()
    done.set()
    await asyncio.wait_for(waiter, 2)
    assert asked == 3  # the task ended, another process's reply, then none


async def test_until_free_gives_up_past_its_deadline_with_thread_busy() -> None:
    async def running() -> Any:
        return True

    deadline = asyncio.get_running_loop().time() + 0.05
    with pytest.raises(Conflict) as caught:
        await until_free(running, deadline)
    assert caught.value.code == "THREAD_BUSY"
    assert f"{queued.MAX_WAIT_S:.0f} s" in caught.value.detail


async def test_a_queued_stream_passes_a_refusal_on_as_one_error_event() -> None:
    async def refused() -> Any:
        raise NotFound("thread not found")

    stream = Queued(refused)
    assert await stream.read(0, 1.0) == [ErrorEvent(code="NOT_FOUND", detail="thread not found")]
    assert await stream.read(1, 1.0) == []


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (ThreadBusy(), "THREAD_BUSY"),
        (Conflict("x", code="SOMETHING"), "SOMETHING"),
        (InvalidInput("content", "must not be empty"), "VALIDATION_ERROR"),
        (NotFound("gone"), "NOT_FOUND"),
        (PermissionDenied("no"), "FORBIDDEN"),
        (Unavailable("later"), "UNAVAILABLE"),
        (IdempotencyKeyReused(), "ERROR"),
    ],
)
def test_error_events_carry_the_code_the_http_answer_would(exc: Any, code: str) -> None:
    event = error_event(exc)
    assert event.code == code
    assert event.detail == exc.detail


async def test_waiting_sends_are_cancelled_with_the_waiting() -> None:
    waiting = Waiting()
    never = asyncio.Event()

    async def reply_of() -> Any:
        return asyncio.create_task(never.wait())

    async def send() -> Any:
        raise AssertionError("never sent")

    stream = waiting.queue("o", "t", ("k", b"f"), reply_of, send)
    assert waiting.keyed("o", "k", b"f") is stream
    waiting.cancel()
    await asyncio.sleep(0.01)
    assert stream.task.cancelled()
    assert waiting.keyed("o", "k", b"f") is None  # its key is free again


# --- what the mutants showed untested -------------------------------------------------


async def test_until_free_waits_for_a_task_no_longer_than_its_deadline() -> None:
    forever = asyncio.create_task(asyncio.Event().wait())

    async def running() -> Any:
        return forever

    deadline = asyncio.get_running_loop().time() + 0.2
    with pytest.raises(Conflict) as caught:
        await asyncio.wait_for(until_free(running, deadline), 3)
    assert caught.value.detail.startswith(
        "a reply is still running on this thread; this send waited"
    )
    forever.cancel()


async def test_until_free_does_not_give_up_before_its_deadline() -> None:
    answers = iter([True, False])

    async def running() -> Any:
        return next(answers)

    deadline = asyncio.get_running_loop().time() + 0.8
    await until_free(running, deadline)  # looked again a quarter second later: free


async def test_the_reply_of_a_thread_here_elsewhere_or_none() -> None:
    class Store:
        def __init__(self) -> None:
            self.run: Run | None = None
            self.asked: list[Any] = []

        async def running(self, org: str, thread_id: Any, stale_before: Any) -> Run | None:
            self.asked.append((org, thread_id, stale_before))
            return self.run

    class Clock:
        def now(self) -> Any:
            return T0

    store, task = Store(), asyncio.create_task(asyncio.sleep(0))
    run = Run(
        id=uuid.uuid4(),
        org_id="o",
        thread_id=uuid.uuid4(),
        status="running",
        started_at=T0,
        heartbeat_at=T0,
    )
    running: dict[Any, Any] = {}
    ask = reply_of(store, running, Clock(), timedelta(seconds=45), "o", run.thread_id)  # type: ignore[arg-type]
    assert await ask() is False
    assert store.asked == [("o", run.thread_id, T0 - timedelta(seconds=45))]
    store.run = run
    assert await ask() is True  # another process runs it
    running[run.id] = ("o", task, object())
    assert await ask() is task  # this process runs it
    running[uuid.uuid4()] = ("o", object(), object())
    assert await ask() is task
    await task


async def test_a_send_that_lost_the_thread_again_waits_again() -> None:
    waiting = Waiting()
    tries: list[int] = []

    async def reply_of_none() -> Any:
        return False

    async def send() -> Any:
        tries.append(1)
        if len(tries) == 1:
            raise ThreadBusy()
        return Queued(_refused_source)

    async def _refused_source() -> Any:
        raise NotFound("x")

    stream = waiting.queue("o", "t", None, reply_of_none, send)
    await asyncio.wait_for(stream.task, 2)
    assert len(tries) == 2
    assert not waiting._tasks  # a finished send is let go


async def test_the_lines_of_two_threads_do_not_wait_for_each_other() -> None:
    waiting = Waiting()
    hold = asyncio.Event()
    started: list[str] = []

    async def free() -> Any:
        return False

    def send_of(name: str, block: bool) -> Any:
        async def send() -> Any:
            started.append(name)
            if block:
                await hold.wait()
            return Queued(_nothing)

        return send

    async def _nothing() -> Any:
        raise NotFound("x")

    first = waiting.queue("o", "thread-a", None, free, send_of("a", True))
    second = waiting.queue("o", "thread-b", None, free, send_of("b", False))
    await asyncio.wait_for(second.task, 2)
    assert started == ["a", "b"]
    hold.set()
    await asyncio.wait_for(first.task, 2)
