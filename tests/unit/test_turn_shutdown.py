"""Shutting down (``Conversation.close``): new sends are refused, running replies
get the grace to finish, then are interrupted with their text kept."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentsvc_core.entities import Agent, Principal
from agentsvc_core.errors import Unavailable
from agentsvc_core.ports import ModelEvent, ModelRequest, TextDelta
from agentsvc_core.use_cases.turn.conversation import SendInput
from agentsvc_core.use_cases.turn.events import Done, ErrorEvent, Token
from tests.unit.test_turn_begin import ORG, WHO, Model, stored, world
from tests.unit.turn_world import read_all


class Endless(Model):
    """Says ``words``, then waits until its call is cancelled (a long reply)."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        for w in self.words:
            yield TextDelta(w)
        self.started.set()
        await asyncio.Event().wait()


async def test_close_interrupts_a_reply_that_outlasts_the_grace_and_keeps_its_text() -> None:
    model = Endless(["Hel", "lo"])
    conversation, store, _, thread, storage = await world(model)
    store.release.set()
    turn = await conversation.send(WHO, thread.id, SendInput(content="hi"))
    await asyncio.wait_for(model.started.wait(), 5)
    drain = conversation.close(0.05)
    assert conversation.close(9.0) is drain  # one drain
    with pytest.raises(Unavailable):
        await conversation.send(WHO, thread.id, SendInput(content="more"))
    events = await read_all(turn)
    assert "".join(e.delta for e in events if isinstance(e, Token)) == "Hello"
    assert events[-1] == ErrorEvent(
        code="INTERRUPTED", detail="the service is shutting down; the partial reply was kept"
    )
    assert not any(isinstance(e, Done) for e in events)
    await conversation.shutdown(0.05)
    assert await stored(storage, thread.id) == [("user", "hi"), ("assistant", "Hello")]
    page, _ = await storage.conversations.history(ORG, thread.id, offset=0, limit=10)
    assert page[-1].status == "interrupted"
    assert [r.status for r in store.finished] == ["interrupted"]
    # shut down and started again (tests reuse services): sends are served again
    model.words, model.started = ["Again"], asyncio.Event()
    again = await conversation.send(WHO, thread.id, SendInput(content="back?"))
    await asyncio.wait_for(model.started.wait(), 5)
    await conversation.shutdown(0)
    assert isinstance((await read_all(again))[-1], ErrorEvent)


async def test_a_reply_that_ends_within_the_grace_ends_as_usual() -> None:
    model = Model(["Hel", "lo"])
    conversation, store, _, thread, storage = await world(model)
    store.release.set()
    turn = await conversation.send(WHO, thread.id, SendInput(content="hi"))
    await conversation.shutdown(5.0)
    events = await read_all(turn)
    assert isinstance(events[-1], Done)
    assert [r.status for r in store.finished] == ["completed"]
    assert await stored(storage, thread.id) == [("user", "hi"), ("assistant", "Hello")]


async def test_a_reply_stuck_in_a_tool_call_is_cancelled_and_stored_as_interrupted() -> None:
    model = Model(["found it"], tool="kb__search")
    conversation, store, tools, thread, _ = await world(model)

    called = asyncio.Event()

    async def hang(
        who: Principal, agent: Agent, name: str, arguments: dict[str, Any], ctx: Any = None
    ) -> str:
        called.set()
        await asyncio.Event().wait()  # a stop does not cut a tool call short
        return ""

    tools.call = hang  # type: ignore[method-assign]
    store.release.set()
    turn = await conversation.send(WHO, thread.id, SendInput(content="look"))
    await asyncio.wait_for(called.wait(), 5)
    await asyncio.wait_for(conversation.shutdown(0), 5)
    events = await read_all(turn)
    assert isinstance(events[-1], ErrorEvent)
    assert events[-1].code == "INTERRUPTED"
    assert [r.status for r in store.finished] == ["interrupted"]
