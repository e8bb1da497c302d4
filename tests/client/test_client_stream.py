"""Reply streams through a loopback proxy that cuts the connection: the client
re-attaches (after ``meta``) or sends again with the same Idempotency-Key (before
it), and the caller sees every event exactly once and the same ``Done`` as an
uncut run. Sync and async, against the real service."""

from __future__ import annotations

import re

import pytest

from agentsvc_client import (
    AsyncClient,
    Client,
    Done,
    Event,
    Meta,
    StreamInterrupted,
    Token,
)
from tests.client.conftest import KEY
from tests.client.proxy import Cut, cutting_proxy
from tests.e2e.service import Service

pytestmark = pytest.mark.e2e

SLOW = "tell me slowly"
POST = b"POST /api/threads/"
GET = b"GET /api/threads/"


def _check_once(events: list[Event], uncut: Done) -> Done:
    """Ids 1..n without gap or repeat, the tokens make the text, the same Done."""
    assert [e.id for e in events] == list(range(1, len(events) + 1))
    assert isinstance(events[0], Meta)
    done = events[-1]
    assert isinstance(done, Done)
    assert "".join(e.delta for e in events if isinstance(e, Token)) == done.content
    assert (done.ok, done.content, done.usage, done.stopped) == (
        uncut.ok,
        uncut.content,
        uncut.usage,
        uncut.stopped,
    )
    assert "word50" in done.content
    return done


def _setup(url: str) -> tuple[Done, str]:
    """An uncut reply on one thread; a fresh thread of the same agent for the cut one."""
    with Client(url, KEY) as c:
        agent = c.agents.create(name="Cut")
        uncut = c.send_message(c.threads.create(agent_id=agent.id).id, SLOW).final()
        return uncut, c.threads.create(agent_id=agent.id).id


def _last_event_ids(requests: list[bytes]) -> list[int]:
    return [
        int(m.group(1))
        for r in requests
        if r.startswith(GET)
        for m in [re.search(rb"last-event-id: (\d+)", r, re.IGNORECASE)]
        if m
    ]


def test_a_cut_mid_reply_is_picked_up_where_it_left(memory_service: Service) -> None:
    uncut, thread = _setup(memory_service.url)
    with cutting_proxy(memory_service.port) as proxy:
        # the send is cut ~20 tokens in, the first re-attach too: two re-attaches
        proxy.cuts = [Cut(POST, 1500, b"/messages"), Cut(GET, 700, b"/stream")]
        with Client(f"http://127.0.0.1:{proxy.port}", KEY, stream_backoff=0.05) as c:
            stream = c.send_message(thread, SLOW)
            events = list(stream)
            assert len(c.threads.messages.list(thread).messages) == 2
    assert all(cut.done for cut in proxy.cuts)
    resumed = _last_event_ids(proxy.requests)
    assert len(resumed) == 2
    assert 1 < resumed[0] < resumed[1] < len(events)  # mid-reply, and further on
    attaches = [r for r in proxy.requests if r.startswith(GET) and b"/stream" in r]
    assert stream.run_id is not None
    assert all(b"runId=" + stream.run_id.encode() in r for r in attaches)
    _check_once(events, uncut)


def test_a_cut_before_meta_sends_again_with_the_same_key(memory_service: Service) -> None:
    uncut, thread = _setup(memory_service.url)
    with cutting_proxy(memory_service.port) as proxy:
        proxy.cuts = [Cut(POST, 0, b"/messages")]  # not one byte of the answer
        with Client(f"http://127.0.0.1:{proxy.port}", KEY, stream_backoff=0.05) as c:
            stream = c.send_message(thread, SLOW)
            events = list(stream)
            history = c.threads.messages.list(thread).messages
    posts = [r for r in proxy.requests if r.startswith(POST) and b"/messages" in r]
    assert len(posts) == 2
    key = f"idempotency-key: {stream.idempotency_key}".encode()
    assert all(key in p.lower() for p in posts)
    _check_once(events, uncut)
    # one user message stored, not two
    assert [m.role for m in history] == ["user", "assistant"]


async def test_async_a_cut_mid_reply_is_picked_up(memory_service: Service) -> None:
    uncut, thread = _setup(memory_service.url)
    with cutting_proxy(memory_service.port) as proxy:
        proxy.cuts = [Cut(POST, 1500, b"/messages")]
        async with AsyncClient(f"http://127.0.0.1:{proxy.port}", KEY, stream_backoff=0.05) as c:
            events = [e async for e in c.send_message(thread, SLOW)]
    assert len(_last_event_ids(proxy.requests)) == 1
    _check_once(events, uncut)


async def test_async_a_cut_before_meta_sends_again(memory_service: Service) -> None:
    uncut, thread = _setup(memory_service.url)
    with cutting_proxy(memory_service.port) as proxy:
        proxy.cuts = [Cut(POST, 0, b"/messages")]
        async with AsyncClient(f"http://127.0.0.1:{proxy.port}", KEY, stream_backoff=0.05) as c:
            events = [e async for e in c.send_message(thread, SLOW)]
            history = (await c.threads.messages.list(thread)).messages
    _check_once(events, uncut)
    assert [m.role for m in history] == ["user", "assistant"]


def test_it_gives_up_after_the_retries_with_what_it_knows(memory_service: Service) -> None:
    _, thread = _setup(memory_service.url)
    with cutting_proxy(memory_service.port) as proxy:
        proxy.cuts = [Cut(POST, 1500, b"/messages")] + [Cut(GET, 0, b"/stream") for _ in range(3)]
        with Client(
            f"http://127.0.0.1:{proxy.port}", KEY, stream_retries=2, stream_backoff=0.01
        ) as c:
            seen: list[Event] = []
            with pytest.raises(StreamInterrupted) as caught:
                seen.extend(c.send_message(thread, SLOW))
    assert caught.value.attempts == 3
    assert caught.value.run_id == seen[0].run_id  # type: ignore[union-attr]
    assert caught.value.last_event_id == seen[-1].id
    # what it knows is enough to pick the reply up later, directly
    with Client(memory_service.url, KEY) as c:
        rest = list(c.threads.attach(thread, run_id=caught.value.run_id, last_event_id=seen[-1].id))
    assert rest[0].id == seen[-1].id + 1
    assert isinstance(rest[-1], Done)
