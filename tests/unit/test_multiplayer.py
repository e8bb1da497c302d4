"""Multiplayer in the core (use_cases/multiplayer/): the configuration's bounds, the
rule of who a message calls, a message stored without a reply (even while one
runs), the thread's news, and the live events a follower reads. Memory storage, a
scripted model and a clock the test moves: fast enough to run per mutant."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import msgspec
import pytest

from agentsvc_adapters.llm import Families, PrefixRouter
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_adapters.signals import LocalStopBus, LocalThreadNews
from agentsvc_core.entities import Participant, Principal, Thread
from agentsvc_core.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    PermissionDenied,
    ThreadBusy,
    Unavailable,
)
from agentsvc_core.use_cases.idempotency import RequestKey
from agentsvc_core.use_cases.multiplayer.config import (
    MultiplayerConfig,
    MultiplayerSettings,
    calls_agent,
    mentioned,
)
from agentsvc_core.use_cases.multiplayer.events import (
    MessageEvent,
    ReplyEvent,
    ReplyStarted,
    ThreadEvent,
    ThreadEvents,
)
from agentsvc_core.use_cases.multiplayer.posts import NOT_CALLED, MultiplayerPosts, Unanswered
from agentsvc_core.use_cases.threads import ThreadDraft, Threads
from agentsvc_core.use_cases.turn.conversation import Conversation, SendInput, ToolResultIn
from agentsvc_core.use_cases.turn.events import Done, Turn
from tests.contract.test_agents_contract import agent_in
from tests.unit.published import Published
from tests.unit.turn_world import BOX, HANG, ORG, WHO, Clock, Script, Tools, read_all, says

A = uuid.UUID(int=1)


def config(**over: Any) -> MultiplayerConfig:
    return MultiplayerConfig(agent_id=A, org_id=ORG, **over)


# --- the rule -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "called"),
    [
        ("@Helpy hi", True),
        ("hi @helpy", True),
        ("HI @HELPY!", True),
        ("(@Helpy)", True),
        ("@Helpy, and @bob", True),
        ("@Helper: you too", True),
        ("@helpy.", True),
        ("@helpyx", False),
        ("@help", False),
        ("me@helpy", False),
        ("@@helpy", False),
        ("_@helpy", False),
        ("Helpy hi", False),
        ("@ Helpy", False),
        ("", False),
    ],
)
def test_mentions_are_at_a_name_as_a_whole_word(content: str, called: bool) -> None:
    c = config(respond_to="mentions", display_name="Helpy")
    assert calls_agent(c, "Helper", "member", content) is called


def test_without_a_display_name_the_agents_name_is_the_mention() -> None:
    c = config(respond_to="mentions")
    assert calls_agent(c, "Helper", None, "@helper go")
    assert not calls_agent(c, "Helper", None, "@helpy go")


def test_names_with_spaces_or_signs_are_matched_literally() -> None:
    assert mentioned("ask @Support Bot now", ["Support Bot"])
    assert mentioned("ask @c++ now", ["c++"])
    assert not mentioned("ask @cxx now", ["c++"])
    assert not mentioned("ask @Support Botty", ["Support Bot"])
    assert not mentioned("@ x", [" ", ""])
    assert mentioned("@x", ["  x  "])


def test_all_answers_everyone_and_owners_only_owners() -> None:
    every = config()
    assert calls_agent(every, "Helper", None, "no mention")
    owners = config(respond_to="owners")
    assert calls_agent(owners, "Helper", "owner", "hi")
    assert not calls_agent(owners, "Helper", "member", "@Helper hi")
    assert not calls_agent(owners, "Helper", None, "hi")


# --- the configuration --------------------------------------------------------------


@dataclass
class Room:
    storage: MemoryStorage
    clock: Clock
    settings: MultiplayerSettings
    threads: Threads
    conversation: Conversation
    news: LocalThreadNews
    heard: list[UUID]
    events: ThreadEvents
    model: Script
    agent_id: UUID
    thread: Thread
    published: Published


async def room(
    model: Script | None = None,
    *,
    people: dict[str, str] | None = None,
    keys: bool = False,
    **cfg: Any,
) -> Room:
    """A multiplayer thread of an agent named Helper configured with ``cfg``, with
    ``people`` (user id -> role) in it."""
    storage = MemoryStorage()
    clock = Clock()
    settings = MultiplayerSettings(storage.secrets, storage.agents, BOX)
    threads = Threads(storage.threads, storage.agents, storage.conversations, clock, settings)
    news = LocalThreadNews()
    heard: list[UUID] = []
    news.on_news(heard.append)
    published = Published()
    model = model or Script(says("answered"))
    agent = agent_in(ORG, name="Helper", default_model="local")
    await storage.agents.add(agent)
    if cfg:
        await settings.update(WHO, agent.id, cfg)
    conversation = Conversation(
        threads,
        storage.turn_reader,
        storage.conversations,
        PrefixRouter(Families(local=model)),
        Tools(),
        LocalStopBus(),
        clock,
        multiplayer=MultiplayerPosts(settings, storage.conversations, news, clock, published),
        idempotency=storage.idempotency if keys else None,
        events=published,
    )
    thread = await threads.create(WHO, ThreadDraft(agent_id=agent.id, kind="multiplayer"))
    for user, role in (people or {"ada": "owner", "bob": "member"}).items():
        await threads.add_participant(WHO, thread.id, user, user.title(), role)  # type: ignore[arg-type]
    events = ThreadEvents(threads, storage.conversations, news, clock, poll_s=0.05)
    return Room(
        storage,
        clock,
        settings,
        threads,
        conversation,
        news,
        heard,
        events,
        model,
        agent.id,
        thread,
        published,
    )


def post(sender: str, content: str) -> SendInput:
    return SendInput(content=content, sender_id=sender)


async def test_the_defaults_and_the_bounds() -> None:
    r = await room()
    assert await r.settings.get(WHO, r.agent_id) == MultiplayerConfig(
        agent_id=r.agent_id, org_id=ORG
    )
    for field, value in (
        ("max_participants", 2),
        ("max_participants", 100),
        ("display_name", "x" * 100),
        ("respond_to", "owners"),
    ):
        got = await r.settings.update(WHO, r.agent_id, {field: value})
        assert getattr(got, field) == value
    for field, value in (
        ("max_participants", 1),
        ("max_participants", 101),
        ("display_name", "x" * 101),
        ("display_name", " "),
        ("display_name", "a\x00b"),
        ("respond_to", "nobody"),
    ):
        with pytest.raises(InvalidInput) as refused:
            await r.settings.update(WHO, r.agent_id, {field: value})
        assert refused.value.field == field
    got = await r.settings.update(WHO, r.agent_id, {"display_name": None})
    assert got.display_name is None
    assert (got.respond_to, got.max_participants) == ("owners", 100)
    with pytest.raises(NotFound):
        await r.settings.update(WHO, uuid.uuid4(), {"enabled": False})


async def test_a_disabled_agent_refuses_new_multiplayer_threads() -> None:
    r = await room()
    await r.settings.update(WHO, r.agent_id, {"enabled": False})
    with pytest.raises(Conflict) as refused:
        await r.threads.create(WHO, ThreadDraft(agent_id=r.agent_id, kind="multiplayer"))
    assert refused.value.code == "MULTIPLAYER_DISABLED"
    assert refused.value.detail == (
        "multiplayer threads are disabled for this agent"
        " (PUT /api/agents/{id}/multiplayer with enabled: true)"
    )
    single = await r.threads.create(WHO, ThreadDraft(agent_id=r.agent_id))
    assert single.kind == "single"
    # the thread opened before still takes messages
    turn = await r.conversation.post(WHO, r.thread.id, post("ada", "hi"))
    assert isinstance(turn, Turn)


async def test_participants_up_to_the_most_and_no_further() -> None:
    r = await room(max_participants=3, people={"ada": "owner", "bob": "member"})
    await r.threads.add_participant(WHO, r.thread.id, "cy", None, "member")
    with pytest.raises(Conflict) as refused:
        await r.threads.add_participant(WHO, r.thread.id, "dan", None, "member")
    assert refused.value.code == "TOO_MANY_PARTICIPANTS"
    assert refused.value.detail == (
        "the thread has its 3 participants, the most the agent's multiplayer"
        " configuration allows (max_participants)"
    )
    changed = await r.threads.add_participant(WHO, r.thread.id, "cy", "Cy", "owner")
    assert changed.role == "owner"
    await r.threads.remove_participant(WHO, r.thread.id, "cy")
    await r.threads.add_participant(WHO, r.thread.id, "dan", None, "member")
    names = [p.user_id for p in await r.threads.participants(WHO, r.thread.id)]
    assert names == ["ada", "bob", "dan"]


async def test_without_settings_threads_have_no_limits() -> None:
    storage = MemoryStorage()
    threads = Threads(storage.threads, storage.agents, storage.conversations, Clock())
    agent = agent_in(ORG)
    await storage.agents.add(agent)
    thread = await threads.create(WHO, ThreadDraft(agent_id=agent.id, kind="multiplayer"))
    for i in range(25):
        await threads.add_participant(WHO, thread.id, f"u{i}", None, "member")
    assert len(await threads.participants(WHO, thread.id)) == 25


# --- posts ----------------------------------------------------------------------------


async def test_a_message_that_does_not_call_the_agent_is_stored_alone() -> None:
    r = await room(respond_to="mentions", display_name="Helpy")
    source = await r.conversation.post(WHO, r.thread.id, post("bob", "lunch?"))
    assert isinstance(source, Unanswered)
    assert await read_all(source) == [NOT_CALLED]
    assert Done(ok=True, content="", replied=False) == NOT_CALLED
    assert msgspec.json.encode(NOT_CALLED) == b'{"ok":true,"content":"","replied":false}'
    stored, _ = await r.storage.conversations.history(ORG, r.thread.id, offset=0, limit=5)
    assert [(m.role, m.content, m.sender_id, m.sender_name, m.run_id) for m in stored] == [
        ("user", "lunch?", "bob", "Bob", None)
    ]
    assert stored[0].created_at == r.clock.now()
    assert r.model.requests == []  # the agent was not called
    assert r.heard == [r.thread.id]
    assert await r.storage.conversations.latest_run(ORG, r.thread.id) is None
    [event] = r.published.events  # told as a message that calls the agent is
    assert (event.type, event.thread_id) == ("message.created", r.thread.id)
    assert (event.data["content"], event.data["sender_id"]) == ("lunch?", "bob")
    assert event.data["message_id"] == str(stored[0].id)


async def test_a_given_sender_name_wins_over_the_participants() -> None:
    r = await room(respond_to="owners")
    await r.conversation.post(
        WHO, r.thread.id, SendInput(content="hi", sender_id="bob", sender_name="Robert")
    )
    stored, _ = await r.storage.conversations.history(ORG, r.thread.id, offset=0, limit=5)
    assert stored[0].sender_name == "Robert"


async def test_it_is_taken_while_a_reply_runs() -> None:
    r = await room(Script([HANG]), respond_to="mentions")
    asked = await r.conversation.post(WHO, r.thread.id, post("ada", "@Helper think"))
    assert isinstance(asked, Turn)
    await r.model.waiting.wait()
    # another mention is busy, as in any thread; a plain message is not
    with pytest.raises(ThreadBusy):
        await r.conversation.post(WHO, r.thread.id, post("bob", "@helper me too"))
    quiet = await r.conversation.post(WHO, r.thread.id, post("bob", "meanwhile"))
    assert await read_all(quiet) == [NOT_CALLED]
    stored, _ = await r.storage.conversations.history(ORG, r.thread.id, offset=0, limit=5)
    assert [m.content for m in stored] == ["@Helper think", "meanwhile"]
    await r.conversation.stop(WHO, r.thread.id)
    await read_all(asked)


async def test_a_mention_calls_the_agent_and_the_followers_hear_twice() -> None:
    r = await room(respond_to="mentions", display_name="Helpy")
    turn = await r.conversation.post(WHO, r.thread.id, post("ada", "@helpy hi"))
    assert isinstance(turn, Turn)
    assert r.heard == [r.thread.id]  # the message, and the reply begun
    events = await read_all(turn)
    assert isinstance(events[-1], Done)
    assert events[-1].replied is None
    for _ in range(50):
        if len(r.heard) == 2:
            break
        await asyncio.sleep(0)
    assert r.heard == [r.thread.id, r.thread.id]  # ... and the reply stored


async def test_tool_results_always_call_the_agent() -> None:
    r = await room(respond_to="owners")
    with pytest.raises(InvalidInput, match="no reply is waiting"):
        await r.conversation.post(
            WHO,
            r.thread.id,
            SendInput(
                content="",
                sender_id="bob",
                tool_results=[ToolResultIn(tool_call_id="c1", output="x")],
            ),
        )


async def test_only_a_post_obeys_the_rules_and_single_threads_never_read_them() -> None:
    r = await room(respond_to="owners")
    # a runner's step or an agent's ask (send) calls the agent in any case
    turn = await r.conversation.send(WHO, r.thread.id, post("bob", "hi"))
    assert isinstance(turn, Turn)
    await read_all(turn)
    for _ in range(50):
        if len(r.heard) == 2:
            break
        await asyncio.sleep(0)
    assert r.heard == [r.thread.id, r.thread.id]
    single = await r.threads.create(WHO, ThreadDraft(agent_id=r.agent_id))
    heard = len(r.heard)
    turn2 = await r.conversation.post(WHO, single.id, SendInput(content="hi"))
    assert isinstance(turn2, Turn)
    await read_all(turn2)
    await asyncio.sleep(0)
    assert len(r.heard) == heard  # no news for a single thread


async def test_news_that_cannot_be_sent_is_not_the_senders_problem() -> None:
    r = await room(respond_to="owners")

    class Broken(LocalThreadNews):
        async def publish_news(self, thread_id: UUID) -> None:
            raise NotFound("the bus is down")

    posts = MultiplayerPosts(r.settings, r.storage.conversations, Broken(), r.clock)
    await posts.tell(r.thread.id)  # logged, not raised
    agent = await r.storage.agents.get(ORG, r.agent_id)
    got = await posts.unanswered(WHO, r.thread, agent, ("bob", "Bob", "member"), "x")
    assert isinstance(got, Unanswered)


async def test_a_non_participant_may_not_post() -> None:
    r = await room(respond_to="owners")
    with pytest.raises(PermissionDenied):
        await r.conversation.post(WHO, r.thread.id, post("zed", "hi"))


# --- live events ------------------------------------------------------------------------


def summary(events: list[ThreadEvent]) -> list[tuple[int | None, str, str]]:
    return [
        (e.id, e.name, getattr(e.data, "content", "") or getattr(e.data, "sender_id", ""))
        for e in events
    ]


async def test_a_follower_reads_messages_and_replies_with_their_positions() -> None:
    r = await room(respond_to="mentions")
    await r.conversation.post(WHO, r.thread.id, post("bob", "first"))
    feed = await r.events.follow(WHO, r.thread.id, 0)
    got = await feed.read(1.0)
    assert got is not None
    assert summary(got) == [(1, "message", "first")]
    data = got[0].data
    assert isinstance(data, MessageEvent)
    assert (data.sender_id, data.sender_name) == ("bob", "Bob")
    assert data.created_at == r.clock.now()
    assert await feed.read(0.05) is None  # nothing new
    turn = await r.conversation.post(WHO, r.thread.id, post("ada", "@helper go"))
    done = (await read_all(turn))[-1]
    assert isinstance(done, Done)
    got = []
    while len([e for e in got if e.id is not None]) < 2:
        more = await feed.read(1.0)
        assert more is not None
        got += more
    assert [(e.id, e.name) for e in got if e.id is not None] == [(2, "message"), (3, "reply")]
    reply = next(e.data for e in got if e.name == "reply")
    assert isinstance(reply, ReplyEvent)
    assert (reply.content, reply.status) == (done.content, "complete")
    assert reply.id == done.message_id
    assert feed.seen == 3
    feed.close()
    feed.close()  # twice is harmless


async def test_from_now_and_from_a_position() -> None:
    r = await room(respond_to="owners")
    for text in ("one", "two", "three"):
        await r.conversation.post(WHO, r.thread.id, post("bob", text))
    now = await r.events.follow(WHO, r.thread.id, None)
    assert now.seen == 3
    assert await now.read(0.05) is None
    after = await r.events.follow(WHO, r.thread.id, 1)
    got = await after.read(1.0)
    assert got is not None
    assert summary(got) == [(2, "message", "two"), (3, "message", "three")]
    await r.conversation.post(WHO, r.thread.id, post("bob", "four"))
    for feed in (now, after):
        got = await feed.read(1.0)
        assert got is not None
        assert summary(got) == [(4, "message", "four")]
        feed.close()


async def test_news_wakes_a_follower_before_the_poll() -> None:
    r = await room(respond_to="owners")
    r.events.poll_s = 60.0  # only news wakes it
    feed = await r.events.follow(WHO, r.thread.id, None)
    reading = asyncio.create_task(feed.read(30.0))
    await asyncio.sleep(0.01)
    assert not reading.done()
    await r.conversation.post(WHO, r.thread.id, post("bob", "wake up"))
    got = await asyncio.wait_for(reading, 2.0)
    assert got is not None
    assert summary(got) == [(1, "message", "wake up")]
    # news of another thread wakes nobody here
    other = await r.threads.create(WHO, ThreadDraft(agent_id=r.agent_id, kind="multiplayer"))
    reading = asyncio.create_task(feed.read(0.3))
    await r.news.publish_news(other.id)
    assert await reading is None
    feed.close()


async def test_a_running_reply_is_announced_once() -> None:
    r = await room(Script([HANG]))
    feed = await r.events.follow(WHO, r.thread.id, None)
    turn = await r.conversation.post(WHO, r.thread.id, post("ada", "think"))
    await r.model.waiting.wait()
    got: list[ThreadEvent] = []
    while not any(e.name == "reply_started" for e in got):
        more = await feed.read(1.0)
        assert more is not None
        got += more
    assert [(e.id, e.name) for e in got] == [(1, "message"), (None, "reply_started")]
    started = got[1].data
    assert isinstance(started, ReplyStarted)
    assert isinstance(turn, Turn)
    assert started.run_id == turn.run_id
    assert started.started_at == r.clock.now()
    assert await feed.read(0.1) is None  # not announced again
    # a follower that comes now hears of it at once
    late = await r.events.follow(WHO, r.thread.id, None)
    now = await late.read(1.0)
    assert now is not None
    assert [e.name for e in now] == ["reply_started"]
    # a reply whose heartbeat went stale is not announced
    r.clock.advance(46)
    stale = await r.events.follow(WHO, r.thread.id, None)
    assert await stale.read(0.1) is None
    r.clock.advance(-46)
    await r.conversation.stop(WHO, r.thread.id)
    await read_all(turn)
    for f in (feed, late, stale):
        f.close()


async def test_who_may_follow() -> None:
    r = await room()
    single = await r.threads.create(WHO, ThreadDraft(agent_id=r.agent_id))
    with pytest.raises(InvalidInput) as refused:
        await r.events.follow(WHO, single.id, None)
    assert refused.value.field == "kind"
    bob = Principal(org_id=ORG, method="jwt", user_id="bob")
    zed = Principal(org_id=ORG, method="jwt", user_id="zed")
    feed = await r.events.follow(bob, r.thread.id, None)
    feed.close()
    with pytest.raises(PermissionDenied):
        await r.events.follow(zed, r.thread.id, None)
    with pytest.raises(NotFound):
        await r.events.follow(Principal(org_id="other", method="api_key"), r.thread.id, None)


async def test_followers_are_forgotten_when_they_leave() -> None:
    r = await room()
    feeds = [await r.events.follow(WHO, r.thread.id, None) for _ in range(2)]
    assert len(r.events._followers[r.thread.id]) == 2
    feeds[0].close()
    assert len(r.events._followers[r.thread.id]) == 1
    feeds[1].close()
    assert r.thread.id not in r.events._followers
    r.events.leave(r.thread.id, asyncio.Event())  # unknown: nothing to do


async def test_a_long_history_comes_in_pages() -> None:
    r = await room(respond_to="owners")
    for i in range(105):
        await r.storage.conversations.add_message(
            msgspec.structs.replace(
                (await r.storage.conversations.history(ORG, r.thread.id, offset=0, limit=1))[0][0]
                if i
                else _message(r, "m0"),
                id=uuid.uuid4(),
                content=f"m{i}",
            )
        )
    feed = await r.events.follow(WHO, r.thread.id, 0)
    first = await feed.read(1.0)
    second = await feed.read(1.0)
    assert first is not None
    assert second is not None
    assert [e.id for e in first] == list(range(1, 101))
    assert [e.id for e in second] == list(range(101, 106))
    feed.close()


def _message(r: Room, content: str) -> Any:
    from agentsvc_core.entities import Message  # noqa: PLC0415

    return Message(
        id=uuid.uuid4(),
        org_id=ORG,
        thread_id=r.thread.id,
        role="user",
        content=content,
        created_at=r.clock.now(),
    )


def test_participant_type_is_the_entitys() -> None:
    assert Participant.__struct_fields__[:3] == ("org_id", "thread_id", "user_id")


async def test_shutting_down_ends_the_feeds_and_refuses_new_ones() -> None:
    r = await room()
    feed = await r.events.follow(WHO, r.thread.id, None)
    r.events.poll_s = 60.0
    reading = asyncio.create_task(feed.read(30.0))
    await asyncio.sleep(0.01)
    r.events.close()
    assert await asyncio.wait_for(reading, 2.0) == []
    assert await feed.read(1.0) == []
    with pytest.raises(Unavailable):
        await r.events.follow(WHO, r.thread.id, None)
    feed.close()


# --- what the mutants showed ---------------------------------------------------------


async def test_the_configuration_is_its_own_kind_and_says_what_is_wrong() -> None:
    r = await room()
    assert r.settings.kind == "multiplayer"
    with pytest.raises(InvalidInput) as refused:
        await r.settings.update(WHO, r.agent_id, {"respond_to": "x"})
    assert refused.value.problem == "must be all, mentions or owners"
    with pytest.raises(InvalidInput) as refused:
        await r.settings.update(WHO, r.agent_id, {"max_participants": 0})
    assert refused.value.problem == "must be between 2 and 100"


async def test_an_owners_plain_message_calls_the_agent_under_owners() -> None:
    r = await room(respond_to="owners")
    turn = await r.conversation.post(WHO, r.thread.id, post("ada", "no mention at all"))
    assert isinstance(turn, Turn)
    await read_all(turn)


async def test_the_stored_message_and_its_event_carry_its_id() -> None:
    r = await room(respond_to="owners")
    await r.conversation.post(WHO, r.thread.id, post("bob", "x"))
    stored, _ = await r.storage.conversations.history(ORG, r.thread.id, offset=0, limit=5)
    assert isinstance(stored[0].id, UUID)
    feed = await r.events.follow(WHO, r.thread.id, 0)
    got = await feed.read(1.0)
    assert got is not None
    assert isinstance(got[0].data, MessageEvent)
    assert got[0].data.id == stored[0].id
    feed.close()


async def test_a_reply_event_carries_its_run_and_time() -> None:
    r = await room()
    feed = await r.events.follow(WHO, r.thread.id, 0)
    turn = await r.conversation.post(WHO, r.thread.id, post("ada", "hi"))
    assert isinstance(turn, Turn)
    await read_all(turn)
    got: list[ThreadEvent] = []
    while not any(e.name == "reply" for e in got):
        more = await feed.read(1.0)
        assert more is not None
        got += more
    reply = next(e.data for e in got if e.name == "reply")
    assert isinstance(reply, ReplyEvent)
    assert reply.run_id == turn.run_id
    assert reply.created_at == r.clock.now()
    feed.close()


async def test_news_that_fails_is_logged_with_the_thread_and_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    r = await room()

    class Broken(LocalThreadNews):
        async def publish_news(self, thread_id: UUID) -> None:
            raise NotFound("the bus is down")

    posts = MultiplayerPosts(r.settings, r.storage.conversations, Broken(), r.clock)
    with caplog.at_level("WARNING", logger="agentsvc.multiplayer"):
        await posts.tell(r.thread.id)
    assert caplog.messages == [f"thread {r.thread.id} news not sent: the bus is down"]


async def test_the_news_of_a_reply_done_leaves_nothing_behind() -> None:
    r = await room()
    posts = MultiplayerPosts(r.settings, r.storage.conversations, r.news, r.clock)
    assert posts._telling == set()

    async def reply() -> None:
        await asyncio.sleep(0)

    task = asyncio.create_task(reply())
    posts.tell_when_done(r.thread.id, task)
    await task
    await asyncio.sleep(0)  # the done callback: the news task
    assert len(posts._telling) == 1
    await asyncio.gather(*posts._telling)
    await asyncio.sleep(0)
    assert posts._telling == set()
    assert r.heard[-1] == r.thread.id


async def test_a_follow_refusal_says_why() -> None:
    r = await room()
    assert r.events.closed is False
    assert ThreadEvents(r.threads, r.storage.conversations, r.news, r.clock).poll_s == 5.0
    single = await r.threads.create(WHO, ThreadDraft(agent_id=r.agent_id))
    with pytest.raises(InvalidInput) as refused:
        await r.events.follow(WHO, single.id, None)
    assert refused.value.problem == "live events belong to multiplayer threads"
    r.events.close()
    assert r.events.closed is True
    with pytest.raises(Unavailable) as closed:
        await r.events.follow(WHO, r.thread.id, None)
    assert closed.value.detail == "the service is shutting down; follow again in a moment"


async def test_a_wake_without_news_goes_on_waiting_to_the_end() -> None:
    r = await room(respond_to="owners")
    r.events.poll_s = 60.0
    feed = await r.events.follow(WHO, r.thread.id, None)
    reading = asyncio.create_task(feed.read(0.9))
    await asyncio.sleep(0.02)
    await r.news.publish_news(r.thread.id)  # nothing new: it waits on
    await asyncio.sleep(0.02)
    assert not reading.done()
    await r.conversation.post(WHO, r.thread.id, post("bob", "now"))
    got = await reading
    assert got is not None
    assert summary(got) == [(1, "message", "now")]
    feed.close()


@pytest.mark.parametrize("keys", [False, True])
async def test_a_send_with_an_idempotency_key_obeys_the_rules_too(keys: bool) -> None:
    r = await room(keys=keys, respond_to="owners")
    key = RequestKey(f"key-{uuid.uuid4()}", b"fingerprint")
    quiet = await r.conversation.send_once(WHO, r.thread.id, post("bob", "hi"), key)
    assert await read_all(quiet) == [NOT_CALLED]
    other = RequestKey(f"key-{uuid.uuid4()}", b"fingerprint")
    turn = await r.conversation.send_once(WHO, r.thread.id, post("ada", "hi"), other)
    assert isinstance(turn, Turn)
    await read_all(turn)
