"""An agent's memories (use_cases/memories/memories.py, docs/memory.md): the memory
configuration and its bounds, the save and search the tools use, and the list,
recall and delete of the HTTP routes with who sees what, over the memory storage
and a clock the test moves."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta
from uuid import UUID

import msgspec
import pytest

from agentsvc_adapters.memory import MemoryStorage
from agentsvc_core.entities import Agent, Principal
from agentsvc_core.entities.memory import Memory, MemoryScope
from agentsvc_core.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from agentsvc_core.use_cases.memories.memories import (
    Memories,
    MemoryConfig,
    MemoryPage,
    MemorySettings,
)
from tests.contract.test_agents_contract import agent_in
from tests.contract.test_conversations_contract import a_thread
from tests.unit.turn_world import BOX, T0, Clock

ORG = "acme"
KEY = Principal(org_id=ORG, method="api_key")
ALICE = Principal(org_id=ORG, method="jwt", user_id="alice")
ADMIN_CAROL = Principal(org_id=ORG, method="jwt", role="admin", user_id="carol")
NOBODY = Principal(org_id=ORG, method="jwt")  # a JWT without a user id
OUTSIDER = Principal(org_id="other", method="api_key")
THREAD = str(uuid.uuid4())


@dataclass
class Mind:
    storage: MemoryStorage
    clock: Clock
    memories: Memories
    settings: MemorySettings
    agent: Agent

    async def keep(
        self,
        content: str,
        scope: MemoryScope = "agent",
        scope_id: str | None = None,
        *,
        key: str | None = None,
        max_active: int = 1000,
    ) -> Memory:
        """Save a fact (one second after the last), as the tools do."""
        self.clock.advance(1)
        saved = await self.memories.save(
            ORG, self.agent.id, scope, scope_id, content, key, max_active=max_active
        )
        assert saved.memory is not None
        return saved.memory


async def mind() -> Mind:
    storage = MemoryStorage()
    clock = Clock()
    agent = agent_in(ORG)
    await storage.agents.add(agent)
    settings = MemorySettings(storage.secrets, storage.agents, BOX)
    return Mind(
        storage,
        clock,
        Memories(storage.memories, storage.agents, clock, settings, storage.threads),
        settings,
        agent,
    )


async def places(m: Mind) -> dict[str, Memory]:
    """One fact in each place: the agent's, Alice's, Carol's and a thread's, each
    with the word ``tea``."""
    return {
        "agent": await m.keep("The agent serves tea"),
        "alice": await m.keep("Alice drinks tea", "user", "alice"),
        "carol": await m.keep("Carol hates tea", "user", "carol"),
        "thread": await m.keep("This thread is about tea", "thread", THREAD),
    }


def ids(found: list[tuple[Memory, float]] | list[Memory]) -> set[UUID]:
    return {f[0].id if isinstance(f, tuple) else f.id for f in found}


# --- the configuration -------------------------------------------------------------


async def test_the_configuration_starts_off_with_every_scope_and_a_thousand() -> None:
    m = await mind()
    config = await m.settings.get(KEY, m.agent.id)
    assert m.settings.kind == "memory"
    assert (config.enabled, config.scopes, config.max_memories, config.auto_collect) == (
        False,
        ("agent", "thread", "user"),
        1000,
        False,
    )


async def test_an_update_changes_only_the_fields_given_and_keeps_scopes_as_a_tuple() -> None:
    m = await mind()
    first = await m.settings.update(KEY, m.agent.id, {"enabled": True})
    assert (first.enabled, first.scopes) == (True, ("agent", "thread", "user"))
    second = await m.settings.update(
        KEY, m.agent.id, {"scopes": ["user", "agent"], "max_memories": 5}
    )
    assert second.scopes == ("user", "agent")
    assert (second.enabled, second.max_memories) == (True, 5)
    assert await m.settings.get(KEY, m.agent.id) == second
    with pytest.raises(NotFound):
        await m.settings.update(OUTSIDER, m.agent.id, {"enabled": False})


@pytest.mark.parametrize(
    ("changes", "field", "problem"),
    [
        ({"scopes": []}, "scopes", "must name at least one scope"),
        ({"scopes": ["agent", "user", "agent"]}, "scopes", "must not repeat a scope"),
        ({"max_memories": 0}, "maxMemories", "must be between 1 and 10000"),
        ({"max_memories": 10_001}, "maxMemories", "must be between 1 and 10000"),
    ],
)
async def test_a_configuration_out_of_bounds_is_refused_and_not_stored(
    changes: dict[str, object], field: str, problem: str
) -> None:
    m = await mind()
    await m.settings.update(KEY, m.agent.id, {"max_memories": 7})
    with pytest.raises(InvalidInput) as refused:
        await m.settings.update(KEY, m.agent.id, changes)
    assert (refused.value.field, refused.value.problem) == (field, problem)
    assert (await m.settings.get(KEY, m.agent.id)).max_memories == 7


@pytest.mark.parametrize("cap", [1, 10_000])
async def test_the_cap_may_be_one_or_ten_thousand(cap: int) -> None:
    m = await mind()
    config = await m.settings.update(KEY, m.agent.id, {"max_memories": cap, "scopes": ["user"]})
    assert (config.max_memories, config.scopes) == (cap, ("user",))


# --- save ----------------------------------------------------------------------------


async def test_a_save_stores_the_fact_trimmed_with_its_key_folded_at_the_clocks_time() -> None:
    m = await mind()
    m.clock.advance(30)
    saved = await m.memories.save(
        ORG, m.agent.id, "user", "alice", "  Likes green tea \n", "  Hot   TEA ", max_active=10
    )
    assert saved.outcome == "saved"
    assert saved.superseded is None
    assert saved.memory is not None
    stored = await m.storage.memories.get(ORG, m.agent.id, saved.memory.id)
    assert stored == saved.memory
    assert (stored.content, stored.key, stored.scope, stored.scope_id) == (
        "Likes green tea",
        "hot tea",
        "user",
        "alice",
    )
    assert (stored.org_id, stored.agent_id, stored.status) == (ORG, m.agent.id, "active")
    assert stored.created_at == stored.updated_at == T0 + timedelta(seconds=30)
    assert stored.created_at == m.clock.now()


async def test_the_agent_scope_has_no_id_and_a_blank_key_is_no_key() -> None:
    m = await mind()
    one = await m.keep("Open on Sundays", "agent", "ignored", key="   ")
    assert (one.scope, one.scope_id, one.key) == ("agent", None, None)
    two = await m.keep("Closed on Mondays", "thread", THREAD, key="")
    assert (two.scope_id, two.key) == (THREAD, None)
    three = await m.keep("Two ids differ", "thread", THREAD)
    assert three.id != two.id


async def test_a_save_supersedes_by_key_and_keeps_an_identical_fact_once() -> None:
    m = await mind()
    first = await m.keep("Likes green tea", key="tea")
    same = await m.memories.save(
        ORG, m.agent.id, "agent", None, "likes  GREEN tea", None, max_active=5
    )
    assert (same.outcome, same.memory) == ("existing", first)
    newer = await m.memories.save(
        ORG, m.agent.id, "agent", None, "Likes black tea", "TEA", max_active=5
    )
    assert newer.outcome == "saved"
    assert newer.superseded == first.id


@pytest.mark.parametrize(
    ("content", "key", "field"),
    [
        ("   ", None, "content"),
        ("", None, "content"),
        ("x" * 2001, None, "content"),
        ("nul \x00", None, "content"),
        ("fine", "k" * 101, "key"),
        ("fine", "nul \x00", "key"),
    ],
)
async def test_a_bad_text_is_refused_under_its_field(
    content: str, key: str | None, field: str
) -> None:
    m = await mind()
    with pytest.raises(InvalidInput) as refused:
        await m.memories.save(ORG, m.agent.id, "agent", None, content, key, max_active=5)
    assert refused.value.field == field
    assert (
        await m.storage.memories.page(
            ORG, m.agent.id, scopes=None, status=None, before=None, limit=10
        )
        == []
    )


async def test_the_longest_text_and_key_are_kept() -> None:
    m = await mind()
    memory = await m.keep("x" * 2000, key="k" * 100)
    assert (len(memory.content), memory.key) == (2000, "k" * 100)


async def test_a_save_beyond_the_cap_is_refused_saying_the_cap() -> None:
    m = await mind()
    await m.keep("first fact", max_active=2)
    await m.keep("second fact", max_active=2)
    with pytest.raises(InvalidInput) as refused:
        await m.keep("third fact", max_active=2)
    assert refused.value.field == "memory"
    assert refused.value.problem == ("the agent keeps at most 2 active memories (maxMemories)")


async def test_a_save_for_an_agent_that_is_gone_is_not_found() -> None:
    m = await mind()
    with pytest.raises(NotFound):
        await m.memories.save(ORG, uuid.uuid4(), "agent", None, "a fact", None, max_active=5)


# --- search --------------------------------------------------------------------------


async def test_a_search_finds_any_word_of_the_query_best_first_within_top_k() -> None:
    m = await mind()
    both = await m.keep("Green tea, then coffee")
    one = await m.keep("Black coffee at night")
    await m.keep("Nothing to see")
    found = await m.memories.search(ORG, m.agent.id, "GREEN, coffee!", None, 5)
    assert [f.id for f, _ in found] == [both.id, one.id]
    assert [s for _, s in found] == [1.0, 0.5]
    top = await m.memories.search(ORG, m.agent.id, "green coffee", None, 1)
    assert [f.id for f, _ in top] == [both.id]
    assert await m.memories.search(ORG, m.agent.id, "green", [("user", "alice")], 5) == []


@pytest.mark.parametrize(
    ("query", "top_k", "field", "problem"),
    [
        ("   ", 5, "query", "must not be empty"),
        ("q" * 1001, 5, "query", "must be at most 1000 characters"),
        ("tea", 0, "topK", "must be between 1 and 50"),
        ("tea", 51, "topK", "must be between 1 and 50"),
    ],
)
async def test_a_search_out_of_bounds_is_refused(
    query: str, top_k: int, field: str, problem: str
) -> None:
    m = await mind()
    with pytest.raises(InvalidInput) as refused:
        await m.memories.search(ORG, m.agent.id, query, None, top_k)
    assert (refused.value.field, refused.value.problem) == (field, problem)


@pytest.mark.parametrize(("query", "top_k"), [("tea " * 250, 1), ("tea", 50)])
async def test_a_search_at_its_bounds_is_answered(query: str, top_k: int) -> None:
    m = await mind()
    kept = await m.keep("tea")
    assert len(query) == 1000 or top_k == 50
    found = await m.memories.search(ORG, m.agent.id, query, None, top_k)
    assert [f.id for f, _ in found] == [kept.id]


# --- the HTTP routes: who sees what --------------------------------------------------


async def test_an_api_key_recalls_every_scope_and_any_one_it_names() -> None:
    m = await mind()
    p = await places(m)
    every = await m.memories.recall(KEY, m.agent.id, "tea", 10, None, None)
    assert ids(every) == {f.id for f in p.values()}
    # a scope id without a scope, or with the agent scope, counts for nothing
    assert ids(await m.memories.recall(KEY, m.agent.id, "tea", 10, None, "alice")) == ids(every)
    assert ids(await m.memories.recall(KEY, m.agent.id, "tea", 10, "agent", "alice")) == {
        p["agent"].id
    }
    users = await m.memories.recall(KEY, m.agent.id, "tea", 10, "user", None)
    assert ids(users) == {p["alice"].id, p["carol"].id}
    carols = await m.memories.recall(KEY, m.agent.id, "tea", 10, "user", "carol")
    assert ids(carols) == {p["carol"].id}
    threads = await m.memories.recall(KEY, m.agent.id, "tea", 10, "thread", THREAD)
    assert ids(threads) == {p["thread"].id}


async def test_a_user_recalls_the_agent_scope_and_its_own() -> None:
    m = await mind()
    p = await places(m)
    mine = {p["agent"].id, p["alice"].id}
    assert ids(await m.memories.recall(ALICE, m.agent.id, "tea", 10, None, None)) == mine
    assert ids(await m.memories.recall(ALICE, m.agent.id, "tea", 10, None, "carol")) == mine
    assert ids(await m.memories.recall(ALICE, m.agent.id, "tea", 10, "user", None)) == {
        p["alice"].id
    }
    assert ids(await m.memories.recall(ALICE, m.agent.id, "tea", 10, "user", "alice")) == {
        p["alice"].id
    }
    assert ids(await m.memories.recall(ALICE, m.agent.id, "tea", 10, "agent", "carol")) == {
        p["agent"].id
    }
    assert await m.memories.recall(ALICE, m.agent.id, "tea", 10, "user", "carol") == []
    assert await m.memories.recall(ALICE, m.agent.id, "tea", 10, "thread", THREAD) == []
    # an admin user is a user like any other
    assert ids(await m.memories.recall(ADMIN_CAROL, m.agent.id, "tea", 10, None, None)) == {
        p["agent"].id,
        p["carol"].id,
    }
    # without a user id, only the agent scope
    assert ids(await m.memories.recall(NOBODY, m.agent.id, "tea", 10, None, None)) == {
        p["agent"].id
    }


async def test_recall_checks_the_agent_and_its_bounds() -> None:
    m = await mind()
    await places(m)
    with pytest.raises(NotFound):
        await m.memories.recall(OUTSIDER, m.agent.id, "tea", 10, None, None)
    with pytest.raises(InvalidInput):
        await m.memories.recall(KEY, m.agent.id, "tea", 51, None, None)
    assert len(await m.memories.recall(KEY, m.agent.id, "tea", 2, None, None)) == 2


async def test_the_list_is_newest_first_by_pages_with_a_cursor() -> None:
    m = await mind()
    kept = [await m.keep(f"fact number {i}") for i in range(5)]
    newest = list(reversed(kept))
    first = await m.memories.page(KEY, m.agent.id, scope=None, status=None, cursor=None, limit=2)
    assert [x.id for x in first.memories] == [x.id for x in newest[:2]]
    assert first.next_cursor == (newest[1].created_at, newest[1].id)
    second = await m.memories.page(
        KEY, m.agent.id, scope=None, status=None, cursor=first.next_cursor, limit=2
    )
    assert [x.id for x in second.memories] == [x.id for x in newest[2:4]]
    assert second.next_cursor == (newest[3].created_at, newest[3].id)
    # the last page, exactly full: no cursor
    last = await m.memories.page(
        KEY, m.agent.id, scope=None, status=None, cursor=second.next_cursor, limit=1
    )
    assert last == MemoryPage(memories=[newest[4]], next_cursor=None)
    whole = await m.memories.page(KEY, m.agent.id, scope=None, status=None, cursor=None, limit=5)
    assert (len(whole.memories), whole.next_cursor) == (5, None)
    three = await m.memories.page(KEY, m.agent.id, scope=None, status=None, cursor=None, limit=3)
    assert three.next_cursor == (newest[2].created_at, newest[2].id)


async def test_the_list_shows_what_the_caller_may_see_in_the_scope_and_status_asked() -> None:
    m = await mind()
    p = await places(m)
    newer = await m.keep("The agent serves green tea now", key="serves")
    await m.keep("The agent serves black tea", key="serves")

    async def listed(who: Principal, scope: MemoryScope | None, status: str | None) -> set[UUID]:
        page = await m.memories.page(
            who,
            m.agent.id,
            scope=scope,
            status="active" if status == "active" else None,
            cursor=None,
            limit=50,
        )
        return ids(page.memories)

    assert len(await listed(KEY, None, None)) == 6
    assert newer.id not in await listed(KEY, None, "active")
    assert await listed(KEY, "user", None) == {p["alice"].id, p["carol"].id}
    assert await listed(ALICE, "user", None) == {p["alice"].id}
    assert await listed(ALICE, "thread", None) == set()
    assert p["carol"].id not in await listed(ALICE, None, None)
    assert p["alice"].id in await listed(ALICE, None, None)
    with pytest.raises(NotFound):
        await listed(OUTSIDER, None, None)


async def test_a_user_deletes_only_what_it_sees_an_api_key_anything() -> None:
    m = await mind()
    p = await places(m)
    for hidden in ("carol", "thread"):
        with pytest.raises(NotFound, match=r"^memory not found$"):
            await m.memories.delete(ALICE, m.agent.id, p[hidden].id)
        assert await m.storage.memories.get(ORG, m.agent.id, p[hidden].id) == p[hidden]
    await m.memories.delete(ALICE, m.agent.id, p["alice"].id)
    await m.memories.delete(ALICE, m.agent.id, p["agent"].id)
    await m.memories.delete(KEY, m.agent.id, p["thread"].id)
    await m.memories.delete(KEY, m.agent.id, p["carol"].id)
    for gone in p.values():
        with pytest.raises(NotFound):
            await m.storage.memories.get(ORG, m.agent.id, gone.id)
    with pytest.raises(NotFound):
        await m.memories.delete(KEY, m.agent.id, p["agent"].id)


async def test_a_delete_in_another_organization_is_not_found_and_deletes_nothing() -> None:
    m = await mind()
    p = await places(m)
    with pytest.raises(NotFound):
        await m.memories.delete(OUTSIDER, m.agent.id, p["agent"].id)
    assert await m.storage.memories.get(ORG, m.agent.id, p["agent"].id) == p["agent"]


async def test_the_defaults_of_a_configuration_need_only_the_agent() -> None:
    config = MemoryConfig(agent_id=uuid.uuid4(), org_id=ORG)
    assert config.scopes == ("agent", "thread", "user")


# --- added and edited by hand ---------------------------------------------------------


async def test_a_memory_added_by_hand_is_saved_trimmed_at_the_clocks_time() -> None:
    m = await mind()
    m.clock.advance(5)
    saved = await m.memories.add(KEY, m.agent.id, "agent", None, "  Likes tea ", " Drink ")
    assert (saved.outcome, saved.superseded) == ("saved", None)
    memory = saved.memory
    assert memory is not None
    assert (memory.org_id, memory.agent_id, memory.scope, memory.scope_id) == (
        ORG,
        m.agent.id,
        "agent",
        None,
    )
    assert (memory.content, memory.key, memory.status) == ("Likes tea", "drink", "active")
    assert memory.created_at == memory.updated_at == m.clock.now()
    assert await m.storage.memories.get(ORG, m.agent.id, memory.id) == memory
    found = await m.memories.recall(KEY, m.agent.id, "tea", 5, None, None)
    assert [f.id for f, _ in found] == [memory.id]
    # the same fact is the stored one; its key supersedes
    again = await m.memories.add(KEY, m.agent.id, "agent", None, "likes TEA", None)
    assert (again.outcome, again.memory) == ("existing", memory)
    newer = await m.memories.add(KEY, m.agent.id, "agent", None, "Likes coffee", "drink")
    assert newer.superseded == memory.id


async def test_a_memory_added_by_hand_names_its_thread_by_uuid_and_its_user_as_given() -> None:
    m = await mind()
    await m.storage.threads.add(a_thread(ORG, m.agent.id, id=UUID(THREAD)))
    thread = await m.memories.add(KEY, m.agent.id, "thread", THREAD.upper(), "On a trip", None)
    assert thread.memory is not None
    assert (thread.memory.scope, thread.memory.scope_id) == ("thread", THREAD)
    # a thread that is not there, or another agent's, has no memories to add
    elsewhere = await m.storage.threads.add(a_thread(ORG))
    for other in (str(uuid.uuid4()), str(elsewhere.id)):
        with pytest.raises(InvalidInput) as refused:
            await m.memories.add(KEY, m.agent.id, "thread", other, "On a trip", None)
        assert (refused.value.field, refused.value.problem) == (
            "scopeId",
            "no thread of this agent has that id",
        )
    user = await m.memories.add(KEY, m.agent.id, "user", " Alice-7 ", "Vegan", None)
    assert user.memory is not None
    assert (user.memory.scope, user.memory.scope_id) == ("user", " Alice-7 ")
    longest = await m.memories.add(KEY, m.agent.id, "user", "u" * 200, "Vegan", None)
    assert longest.memory is not None
    assert longest.memory.scope_id == "u" * 200


@pytest.mark.parametrize(
    ("scope", "scope_id", "problem"),
    [
        ("agent", "alice", "the agent scope has no id"),
        ("agent", "", "the agent scope has no id"),
        ("user", None, "the user scope needs the user's id"),
        ("user", "  ", "the user scope needs the user's id"),
        ("thread", None, "the thread scope needs the thread's id"),
        ("thread", "", "the thread scope needs the thread's id"),
        ("thread", "t-1", "a thread's id is a UUID"),
        ("user", "u" * 201, "must be at most 200 characters"),
        ("user", "a\x00b", "must not contain NUL characters"),
    ],
)
async def test_a_memory_added_by_hand_has_a_place_that_exists(
    scope: MemoryScope, scope_id: str | None, problem: str
) -> None:
    m = await mind()
    with pytest.raises(InvalidInput) as refused:
        await m.memories.add(KEY, m.agent.id, scope, scope_id, "fact", None)
    assert (refused.value.field, refused.value.problem) == ("scopeId", problem)
    assert (
        await m.memories.page(KEY, m.agent.id, scope=None, status=None, cursor=None, limit=5)
    ).memories == []


async def test_a_memory_added_by_hand_counts_against_the_agents_cap() -> None:
    m = await mind()
    await m.settings.update(KEY, m.agent.id, {"max_memories": 2})
    await m.memories.add(KEY, m.agent.id, "agent", None, "one", "k")
    await m.memories.add(KEY, m.agent.id, "user", "alice", "two", None)
    with pytest.raises(InvalidInput) as refused:
        await m.memories.add(KEY, m.agent.id, "agent", None, "three", None)
    assert (refused.value.field, refused.value.problem) == (
        "memory",
        "the agent keeps at most 2 active memories (maxMemories)",
    )
    # a supersede does not grow the count
    assert (await m.memories.add(KEY, m.agent.id, "agent", None, "one again", "k")).outcome == (
        "saved"
    )


async def test_a_memory_added_by_hand_checks_its_text_like_a_saved_one() -> None:
    m = await mind()
    for content in ("", "   ", "x" * 2001, "a\x00b"):
        with pytest.raises(InvalidInput) as refused:
            await m.memories.add(KEY, m.agent.id, "agent", None, content, None)
        assert refused.value.field == "content"
    with pytest.raises(InvalidInput) as refused:
        await m.memories.add(KEY, m.agent.id, "agent", None, "fact", "k" * 101)
    assert refused.value.field == "key"


async def test_a_user_adds_to_the_agent_scope_and_its_own_only() -> None:
    m = await mind()
    for who in (ALICE, ADMIN_CAROL):
        assert (
            await m.memories.add(who, m.agent.id, "agent", None, f"by {who.user_id}", None)
        ).memory
    mine = await m.memories.add(ALICE, m.agent.id, "user", "alice", "Alice's", None)
    assert mine.outcome == "saved"
    for who, scope, sid in (
        (ALICE, "user", "carol"),
        (ALICE, "thread", THREAD),
        (ADMIN_CAROL, "user", "alice"),
        (NOBODY, "user", "alice"),
    ):
        with pytest.raises(PermissionDenied) as refused:
            await m.memories.add(who, m.agent.id, scope, sid, "not theirs", None)  # type: ignore[arg-type]
        assert refused.value.detail == (
            "a user adds memories of the agent scope or its own user scope"
        )
    with pytest.raises(NotFound):
        await m.memories.add(OUTSIDER, m.agent.id, "agent", None, "x", None)
    with pytest.raises(NotFound):
        await m.memories.add(KEY, uuid.uuid4(), "agent", None, "x", None)


async def test_an_edit_changes_the_content_trimmed_at_the_clocks_time() -> None:
    m = await mind()
    tea = await m.keep("Drinks green tea", "user", "alice", key="drink")
    m.clock.advance(60)
    edited = await m.memories.edit(KEY, m.agent.id, tea.id, "  Drinks espresso ")
    assert edited == msgspec.structs.replace(
        tea, content="Drinks espresso", updated_at=m.clock.now()
    )
    assert edited.updated_at - tea.created_at == timedelta(seconds=60)
    assert await m.storage.memories.get(ORG, m.agent.id, tea.id) == edited
    assert await m.memories.recall(KEY, m.agent.id, "green", 5, None, None) == []
    assert ids(await m.memories.recall(KEY, m.agent.id, "espresso", 5, None, None)) == {tea.id}
    longest = await m.memories.edit(KEY, m.agent.id, tea.id, "x" * 2000)
    assert longest.content == "x" * 2000


async def test_an_edit_checks_its_text() -> None:
    m = await mind()
    tea = await m.keep("Drinks tea")
    for content, problem in (
        ("", "must not be empty"),
        ("  ", "must not be empty"),
        ("x" * 2001, "must be at most 2000 characters"),
        ("a\x00b", "must not contain NUL characters"),
    ):
        with pytest.raises(InvalidInput) as refused:
            await m.memories.edit(KEY, m.agent.id, tea.id, content)
        assert (refused.value.field, refused.value.problem) == ("content", problem)
    assert await m.storage.memories.get(ORG, m.agent.id, tea.id) == tea


async def test_an_edit_to_a_fact_its_place_has_is_a_conflict_naming_it() -> None:
    m = await mind()
    lyon = await m.keep("Lives in Lyon")
    paris = await m.keep("Works in Paris")
    with pytest.raises(Conflict) as refused:
        await m.memories.edit(KEY, m.agent.id, paris.id, "lives in LYON")
    assert refused.value.detail == f"memory {lyon.id} of the same scope says this already"
    assert await m.storage.memories.get(ORG, m.agent.id, paris.id) == paris


async def test_a_user_edits_what_it_sees_an_api_key_anything() -> None:
    m = await mind()
    p = await places(m)
    for who, place in ((ALICE, "agent"), (ALICE, "alice"), (ADMIN_CAROL, "carol")):
        edited = await m.memories.edit(
            who, m.agent.id, p[place].id, f"{place} edited by {who.user_id}"
        )
        assert edited.content == f"{place} edited by {who.user_id}"
    for who, place in ((ALICE, "carol"), (ALICE, "thread"), (NOBODY, "alice"), (OUTSIDER, "agent")):
        with pytest.raises(NotFound):
            await m.memories.edit(who, m.agent.id, p[place].id, "not theirs")
        assert (await m.storage.memories.get(ORG, m.agent.id, p[place].id)).content != "not theirs"
    assert (await m.memories.edit(KEY, m.agent.id, p["thread"].id, "by key")).content == "by key"
    with pytest.raises(NotFound):
        await m.memories.edit(KEY, m.agent.id, uuid.uuid4(), "x")
    with pytest.raises(NotFound):
        await m.memories.edit(KEY, uuid.uuid4(), p["agent"].id, "x")
