"""A multiplayer thread's live events through the client (``client.threads.events``),
sync and async, against the real service: typed events with their ids, a message
that does not call the agent (``Done.replied`` false), and a connection cut by a
loopback proxy picked up again with ``Last-Event-ID``, each event seen once."""

from __future__ import annotations

import re

import pytest

from agentsvc_client import AsyncClient, Client
from agentsvc_client.thread_events import MessagePosted, ReplyStored, ThreadEvent
from tests.client.conftest import KEY
from tests.client.proxy import Cut, cutting_proxy
from tests.e2e.service import Service

pytestmark = pytest.mark.e2e

GET = b"GET /api/threads/"


def _room(url: str) -> str:
    """A multiplayer thread whose agent answers only mentions, with two messages of
    Bob's: one it did not answer, one it did."""
    with Client(url, KEY) as c:
        agent = c.agents.create(name="Helper")
        config = c.agents.multiplayer.put(agent.id, respond_to="mentions", display_name="Helpy")
        assert (config.respond_to, config.display_name) == ("mentions", "Helpy")
        thread = c.threads.create(agent_id=agent.id, kind="multiplayer").id
        c.threads.participants.add(thread, user_id="bob", display_name="Bob")
        quiet = c.send_message(thread, "hello all", sender_id="bob").final()
        assert (quiet.ok, quiet.content, quiet.replied, quiet.message_id) == (
            True,
            "",
            False,
            None,
        )
        assert c.send_message(thread, "@helpy hi", sender_id="bob").final().replied is None
        return thread


def _check(events: list[ThreadEvent]) -> None:
    assert [type(e).__name__ for e in events] == ["MessagePosted", "MessagePosted", "ReplyStored"]
    assert [getattr(e, "id", None) for e in events] == [1, 2, 3]
    first = events[0]
    assert isinstance(first, MessagePosted)
    assert (first.sender_id, first.sender_name, first.content) == ("bob", "Bob", "hello all")
    reply = events[2]
    assert isinstance(reply, ReplyStored)
    assert reply.content.startswith('You said: "@helpy hi"')


def test_events_from_the_first_and_picked_up_after_a_cut(memory_service: Service) -> None:
    thread = _room(memory_service.url)
    with Client(memory_service.url, KEY) as c:
        with c.threads.events(thread, after=0) as stream:
            events = [e for _, e in zip(range(3), stream, strict=False)]
        _check(events)
    with cutting_proxy(memory_service.port) as proxy:
        proxy.cuts = [Cut(GET, 600, b"/events")]  # after the first event
        with (
            Client(f"http://127.0.0.1:{proxy.port}", KEY, stream_backoff=0.05) as c,
            c.threads.events(thread, after=0) as stream,
        ):
            events = [e for _, e in zip(range(3), stream, strict=False)]
            assert stream.last_event_id == 3
    _check(events)
    assert all(cut.done for cut in proxy.cuts)
    again = [r for r in proxy.requests if r.startswith(GET) and b"/events" in r]
    assert len(again) == 2
    assert re.search(rb"last-event-id: 0", again[0], re.IGNORECASE)
    assert re.search(rb"last-event-id: [12]\r", again[1], re.IGNORECASE)


async def test_async_events(memory_service: Service) -> None:
    thread = _room(memory_service.url)
    async with AsyncClient(memory_service.url, KEY) as c:
        stream = c.threads.events(thread, last_event_id=1)
        events: list[ThreadEvent] = []
        async for event in stream:
            events.append(event)
            if len(events) == 2:
                break
        await stream.aclose()
    assert [(type(e).__name__, getattr(e, "id", None)) for e in events] == [
        ("MessagePosted", 2),
        ("ReplyStored", 3),
    ]
