"""Who may use a thread, and the profile a thread may name, pinned against the
memory adapters. Written for ``agentsvc_core.use_cases.threads``, whose mutants
had almost no unit test (docs/development.md); the web suite covers the rest."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest

from agentsvc_adapters.clock import SystemClock
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_core.entities import Principal, ToolProfile
from agentsvc_core.errors import InvalidInput, NotFound, PermissionDenied
from agentsvc_core.use_cases import AgentDraft, Agents
from agentsvc_core.use_cases.threads import (
    MAX_QUERY,
    MAX_QUERY_WORDS,
    ThreadChanges,
    ThreadDraft,
    Threads,
    search_words,
)
from tests.contract.test_conversations_contract import a_message, a_run

KEY = Principal(org_id="acme", method="api_key")
ALICE = Principal(org_id="acme", method="jwt", user_id="alice")
BOB = Principal(org_id="acme", method="jwt", user_id="bob")
ADMIN_CAROL = Principal(org_id="acme", method="jwt", role="admin", user_id="carol")
OUTSIDER = Principal(org_id="other", method="api_key")


async def setup() -> tuple[Threads, Agents]:
    storage = MemoryStorage()
    clock = SystemClock()
    threads = Threads(storage.threads, storage.agents, storage.conversations, clock)
    return threads, Agents(storage.agents, clock, default_model="local")


async def test_a_single_thread_is_its_openers_alone() -> None:
    threads, agents = await setup()
    agent = await agents.create(KEY, AgentDraft(name="a"))
    mine = await threads.create(ALICE, ThreadDraft(agent_id=agent.id))
    assert mine.created_by == "alice"
    assert (await threads.visible(ALICE, mine.id)).id == mine.id
    assert (await threads.visible(KEY, mine.id)).id == mine.id  # an API key acts for the org
    for other in (BOB, ADMIN_CAROL):  # an admin JWT is still one user
        with pytest.raises(PermissionDenied, match=r"^this thread belongs to another user$"):
            await threads.visible(other, mine.id)
    with pytest.raises(NotFound):
        await threads.visible(OUTSIDER, mine.id)


async def test_a_key_made_thread_is_no_users() -> None:
    threads, agents = await setup()
    agent = await agents.create(KEY, AgentDraft(name="a"))
    made = await threads.create(KEY, ThreadDraft(agent_id=agent.id))
    assert made.created_by is None
    with pytest.raises(PermissionDenied):
        await threads.visible(ALICE, made.id)


async def test_a_multiplayer_thread_is_its_participants() -> None:
    threads, agents = await setup()
    agent = await agents.create(KEY, AgentDraft(name="a"))
    shared = await threads.create(ALICE, ThreadDraft(agent_id=agent.id, kind="multiplayer"))
    with pytest.raises(PermissionDenied):
        await threads.visible(BOB, shared.id)
    await threads.add_participant(ALICE, shared.id, "bob", None, "member")
    assert (await threads.visible(BOB, shared.id)).id == shared.id
    with pytest.raises(PermissionDenied):
        await threads.visible(ADMIN_CAROL, shared.id)
    # a single thread's participants list does not open it
    single = await threads.create(ALICE, ThreadDraft(agent_id=agent.id))
    with pytest.raises(PermissionDenied):
        await threads.visible(BOB, single.id)


async def test_a_thread_may_name_only_its_agents_profiles() -> None:
    threads, agents = await setup()
    agent = await agents.create(
        KEY, AgentDraft(name="a", tool_profiles={"reader": ToolProfile(tools=("t",))})
    )
    made = await threads.create(KEY, ThreadDraft(agent_id=agent.id, active_profile="reader"))
    assert made.active_profile == "reader"
    with pytest.raises(InvalidInput) as raised:
        await threads.create(KEY, ThreadDraft(agent_id=agent.id, active_profile="writer"))
    assert (raised.value.field, raised.value.problem) == (
        "active_profile",
        "the agent has no tool profile named 'writer'",
    )
    with pytest.raises(InvalidInput) as raised:
        await threads.update(KEY, made.id, ThreadChanges(active_profile="writer"))
    assert raised.value.field == "active_profile"
    plain = await agents.create(KEY, AgentDraft(name="b"))
    with pytest.raises(InvalidInput):
        await threads.create(KEY, ThreadDraft(agent_id=plain.id, active_profile="reader"))


async def test_updates_change_what_is_given_and_clear_metadata_with_none() -> None:
    threads, agents = await setup()
    agent = await agents.create(KEY, AgentDraft(name="a"))
    made = await threads.create(KEY, ThreadDraft(agent_id=agent.id, metadata={"k": "v"}))
    assert await threads.update(KEY, made.id, ThreadChanges()) == made
    titled = await threads.update(KEY, made.id, ThreadChanges(title="t"))
    assert (titled.title, titled.metadata) == ("t", {"k": "v"})
    assert titled.updated_at >= made.updated_at
    cleared = await threads.update(KEY, made.id, ThreadChanges(metadata=None))
    assert (cleared.title, cleared.metadata) == ("t", {})
    with pytest.raises(PermissionDenied):
        await threads.update(ALICE, made.id, ThreadChanges(title="x"))


async def test_a_new_thread_and_its_owner() -> None:
    threads, agents = await setup()
    agent = await agents.create(KEY, AgentDraft(name="a"))
    draft = ThreadDraft(
        agent_id=agent.id, kind="multiplayer", title="t", system_prompt_overlay="be brief"
    )
    shared = await threads.create(ALICE, draft)
    assert isinstance(shared.id, UUID)
    assert (shared.title, shared.system_prompt_overlay, shared.status, shared.kind) == (
        "t",
        "be brief",
        "active",
        "multiplayer",
    )
    [owner] = await threads.participants(ALICE, shared.id)
    assert (owner.user_id, owner.role, owner.added_at) == ("alice", "owner", shared.created_at)
    assert await threads.participant("acme", shared.id, "alice") == owner
    by_key = await threads.create(KEY, ThreadDraft(agent_id=agent.id, kind="multiplayer"))
    assert await threads.participants(KEY, by_key.id) == []  # no user to make the owner
    single = await threads.create(ALICE, ThreadDraft(agent_id=agent.id))
    assert await threads.participant("acme", single.id, "alice") is None


# --- added with the turn's mutation tests: the operations only tests/web reached ---


class Ticking:
    """A clock a second later at each read: threads get distinct creation times."""

    def __init__(self) -> None:
        self.at = datetime(2026, 11, 1, tzinfo=UTC)

    def now(self) -> datetime:
        self.at += timedelta(seconds=1)
        return self.at


async def ticking() -> tuple[Threads, Agents, MemoryStorage]:
    storage = MemoryStorage()
    clock = Ticking()
    threads = Threads(storage.threads, storage.agents, storage.conversations, clock)
    return threads, Agents(storage.agents, clock, default_model="local"), storage


async def test_a_new_thread_keeps_what_the_draft_says() -> None:
    threads, agents, _ = await ticking()
    agent = await agents.create(KEY, AgentDraft(name="a"))
    bindings = [{"type": "doc", "id": "1"}]
    made = await threads.create(
        KEY, ThreadDraft(agent_id=agent.id, metadata={"k": "v"}, resource_bindings=bindings)
    )
    assert (made.org_id, made.agent_id, made.metadata, made.resource_bindings) == (
        "acme",
        agent.id,
        {"k": "v"},
        bindings,
    )
    assert made.created_at == made.updated_at
    assert (made.kind, made.active_profile, made.title) == ("single", None, None)


async def test_a_new_thread_of_an_unknown_agent_is_not_found() -> None:
    threads, _, _ = await ticking()
    with pytest.raises(NotFound):
        await threads.create(KEY, ThreadDraft(agent_id=UUID(int=7)))


@pytest.mark.parametrize(
    ("draft", "field"),
    [
        ({"title": "x" * 1001}, "title"),
        ({"title": "\x00"}, "title"),
        ({"system_prompt_overlay": "x" * 200_001}, "system_prompt_overlay"),
        ({"metadata": {"k": "\x00"}}, "metadata.k"),
        ({"resource_bindings": [{"x": "\x00"}]}, "resource_bindings"),
        ({"active_profile": ""}, "active_profile"),
        ({"active_profile": "p" * 65}, "active_profile"),
    ],
)
async def test_a_new_thread_is_checked(draft: dict[str, object], field: str) -> None:
    threads, agents, storage = await ticking()
    agent = await agents.create(KEY, AgentDraft(name="a"))
    with pytest.raises(InvalidInput) as raised:
        await threads.create(KEY, ThreadDraft(agent_id=agent.id, **draft))  # type: ignore[arg-type]
    assert raised.value.field == field
    assert await storage.threads.list_for_agent("acme", agent.id, before=None, limit=9) == []


async def test_the_bounds_of_a_new_thread_are_inclusive() -> None:
    threads, agents, _ = await ticking()
    agent = await agents.create(KEY, AgentDraft(name="a"))
    await threads.create(
        KEY,
        ThreadDraft(agent_id=agent.id, title="x" * 1000, system_prompt_overlay="x" * 200_000),
    )


async def test_an_update_is_checked_and_stamped() -> None:
    threads, agents, _ = await ticking()
    agent = await agents.create(
        KEY, AgentDraft(name="a", tool_profiles={"reader": ToolProfile(tools=("t",))})
    )
    made = await threads.create(KEY, ThreadDraft(agent_id=agent.id, title="t"))
    with pytest.raises(InvalidInput) as raised:
        await threads.update(KEY, made.id, ThreadChanges(title="x" * 1001))
    assert raised.value.field == "title"
    changed = await threads.update(
        KEY,
        made.id,
        ThreadChanges(active_profile="reader", system_prompt_overlay="o", metadata={"a": "b"}),
    )
    assert (changed.active_profile, changed.system_prompt_overlay, changed.metadata) == (
        "reader",
        "o",
        {"a": "b"},
    )
    assert changed.updated_at > made.updated_at
    assert changed.title == "t"
    cleared = await threads.update(KEY, made.id, ThreadChanges(active_profile=None, title=None))
    assert (cleared.active_profile, cleared.title) == (None, None)


async def test_a_listing_pages_newest_first_with_a_cursor() -> None:
    threads, agents, _ = await ticking()
    agent = await agents.create(KEY, AgentDraft(name="a"))
    made = [await threads.create(KEY, ThreadDraft(agent_id=agent.id)) for _ in range(5)]
    first = await threads.list_for_agent(KEY, agent.id, cursor=None, limit=2)
    assert [t.id for t in first.threads] == [made[4].id, made[3].id]
    assert first.next_cursor == made[3].created_at
    second = await threads.list_for_agent(KEY, agent.id, cursor=first.next_cursor, limit=2)
    assert [t.id for t in second.threads] == [made[2].id, made[1].id]
    last = await threads.list_for_agent(KEY, agent.id, cursor=second.next_cursor, limit=2)
    assert ([t.id for t in last.threads], last.next_cursor) == ([made[0].id], None)
    exact = await threads.list_for_agent(KEY, agent.id, cursor=None, limit=5)
    assert (len(exact.threads), exact.next_cursor) == (5, None)
    three = await threads.list_for_agent(KEY, agent.id, cursor=None, limit=3)
    assert three.next_cursor == made[2].created_at  # the page's last thread


class Reads:
    """The memory thread repository, recording the limit each listing asks for."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.limits: list[int] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def list_for_agent(self, *args: object, limit: int, **kw: object) -> object:
        self.limits.append(limit)
        return await self.inner.list_for_agent(*args, limit=limit, **kw)  # type: ignore[attr-defined]


async def test_a_listing_reads_one_thread_past_the_page_not_more() -> None:
    storage = MemoryStorage()
    clock = Ticking()
    reads = Reads(storage.threads)
    threads = Threads(reads, storage.agents, storage.conversations, clock)  # type: ignore[arg-type]
    agent = await Agents(storage.agents, clock, default_model="local").create(
        KEY, AgentDraft(name="a")
    )
    await threads.list_for_agent(KEY, agent.id, cursor=None, limit=2)
    assert reads.limits == [3]


async def test_a_user_lists_only_the_threads_it_may_use() -> None:
    threads, agents, _ = await ticking()
    agent = await agents.create(KEY, AgentDraft(name="a"))
    mine = await threads.create(ALICE, ThreadDraft(agent_id=agent.id))
    await threads.create(BOB, ThreadDraft(agent_id=agent.id))
    shared = await threads.create(BOB, ThreadDraft(agent_id=agent.id, kind="multiplayer"))
    await threads.add_participant(BOB, shared.id, "alice", "Alice", "member")
    page = await threads.list_for_agent(ALICE, agent.id, cursor=None, limit=10)
    assert {t.id for t in page.threads} == {mine.id, shared.id}
    everything = await threads.list_for_agent(KEY, agent.id, cursor=None, limit=10)
    assert len(everything.threads) == 3


async def test_history_is_checked_and_only_for_those_who_may_see_it() -> None:
    threads, agents, storage = await ticking()
    agent = await agents.create(KEY, AgentDraft(name="a"))
    mine = await threads.create(ALICE, ThreadDraft(agent_id=agent.id))
    assert await threads.history(ALICE, mine.id, offset=0, limit=10) == ([], 0)
    said = a_message(mine, content="hello")
    await storage.conversations.begin_turn(a_run(mine), [said], said.created_at)
    assert await threads.history(ALICE, mine.id, offset=0, limit=10) == ([said], 1)
    await threads.history(ALICE, mine.id, offset=1_000_000_000, limit=10)
    for offset in (-1, 1_000_000_001):
        with pytest.raises(InvalidInput) as raised:
            await threads.history(ALICE, mine.id, offset=offset, limit=10)
        assert (raised.value.field, raised.value.problem) == (
            "offset",
            "must be between 0 and 1000000000",
        )
    with pytest.raises(PermissionDenied):
        await threads.history(BOB, mine.id, offset=0, limit=10)


async def test_participants_belong_to_multiplayer_threads() -> None:
    threads, agents, _ = await ticking()
    agent = await agents.create(KEY, AgentDraft(name="a"))
    single = await threads.create(KEY, ThreadDraft(agent_id=agent.id))
    with pytest.raises(InvalidInput) as raised:
        await threads.participants(KEY, single.id)
    assert (raised.value.field, raised.value.problem) == (
        "kind",
        "participants belong to multiplayer threads",
    )
    with pytest.raises(InvalidInput):
        await threads.add_participant(KEY, single.id, "bob", None, "member")


async def test_owners_and_api_keys_manage_participants_members_do_not() -> None:
    threads, agents, _ = await ticking()
    agent = await agents.create(KEY, AgentDraft(name="a"))
    shared = await threads.create(ALICE, ThreadDraft(agent_id=agent.id, kind="multiplayer"))
    bob = await threads.add_participant(ALICE, shared.id, "bob", "Bob", "member")
    assert (bob.user_id, bob.display_name, bob.role, bob.thread_id) == (
        "bob",
        "Bob",
        "member",
        shared.id,
    )
    with pytest.raises(
        PermissionDenied, match=r"^only the thread's owners manage its participants$"
    ):
        await threads.add_participant(BOB, shared.id, "dave", None, "member")
    with pytest.raises(PermissionDenied):
        await threads.remove_participant(BOB, shared.id, "alice")
    assert [p.user_id for p in await threads.participants(BOB, shared.id)] == ["alice", "bob"]
    # an owner who did not open the thread manages it too
    await threads.add_participant(KEY, shared.id, "carol", None, "owner")
    await threads.add_participant(ADMIN_CAROL, shared.id, "erin", None, "member")
    await threads.remove_participant(ADMIN_CAROL, shared.id, "bob")
    assert [p.user_id for p in await threads.participants(KEY, shared.id)] == [
        "alice",
        "carol",
        "erin",
    ]


async def test_removing_a_participant_who_is_not_there_is_not_found() -> None:
    threads, agents, _ = await ticking()
    agent = await agents.create(KEY, AgentDraft(name="a"))
    shared = await threads.create(ALICE, ThreadDraft(agent_id=agent.id, kind="multiplayer"))
    with pytest.raises(NotFound, match=r"^no such participant$"):
        await threads.remove_participant(ALICE, shared.id, "nobody")


@pytest.mark.parametrize(
    ("user_id", "name", "field"),
    [("", None, "user_id"), ("u" * 257, None, "user_id"), ("bob", "x" * 1001, "display_name")],
)
async def test_a_participant_is_checked(user_id: str, name: str | None, field: str) -> None:
    threads, agents, _ = await ticking()
    agent = await agents.create(KEY, AgentDraft(name="a"))
    shared = await threads.create(ALICE, ThreadDraft(agent_id=agent.id, kind="multiplayer"))
    with pytest.raises(InvalidInput) as raised:
        await threads.add_participant(ALICE, shared.id, user_id, name, "member")
    assert raised.value.field == field
    await threads.add_participant(ALICE, shared.id, "u" * 256, "x" * 1000, "member")


def test_a_search_is_its_words_lowercased_each_once() -> None:
    assert search_words("Green TEA, green-tea_pot!") == ("green", "tea", "pot")
    assert search_words("  ¿?  ") == ()
    assert search_words("x" * MAX_QUERY) == ("x" * MAX_QUERY,)
    many = " ".join(f"w{i}" for i in range(MAX_QUERY_WORDS))
    assert len(search_words(many)) == MAX_QUERY_WORDS
    with pytest.raises(InvalidInput, match=r"^q: at most 16 words$"):
        search_words(many + " more")
    with pytest.raises(InvalidInput, match=r"^q: must be at most 200 characters$"):
        search_words("x" * (MAX_QUERY + 1))
    with pytest.raises(InvalidInput, match=r"^q: must not contain NUL characters$"):
        search_words("tea\x00")


async def test_a_listing_with_q_keeps_the_threads_holding_its_words() -> None:
    threads, agents = await setup()
    agent = await agents.create(KEY, AgentDraft(name="a"))
    tea = await threads.create(ALICE, ThreadDraft(agent_id=agent.id, title="Green tea"))
    await threads.create(ALICE, ThreadDraft(agent_id=agent.id, title="Coffee"))
    await threads.create(BOB, ThreadDraft(agent_id=agent.id, title="Green tea too"))
    found = await threads.list_for_agent(ALICE, agent.id, cursor=None, limit=10, q="GREEN te")
    assert ([t.id for t in found.threads], found.next_cursor) == ([tea.id], None)
    everything = await threads.list_for_agent(ALICE, agent.id, cursor=None, limit=10, q="!")
    assert len(everything.threads) == 2  # no words: her listing
    assert len((await threads.list_for_agent(KEY, agent.id, cursor=None, limit=10)).threads) == 3
