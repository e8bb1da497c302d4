"""Memories: the memory and PostgreSQL adapters agree on the rules of
docs/memory.md (an identical fact is stored once, a key supersedes, the cap, the
search ranks the matching memory first, organizations and agents are apart)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentsvc_adapters.clock import SystemClock
from agentsvc_adapters.crypto import AesGcmBox
from agentsvc_core.entities import Principal
from agentsvc_core.entities.memory import Memory, MemoryScope, MemoryStatus
from agentsvc_core.errors import InvalidInput, NotFound
from agentsvc_core.ports.memories import Saved
from agentsvc_core.use_cases.memories.memories import Memories, MemorySettings
from tests.contract.conftest import Backend
from tests.contract.test_agents_contract import agent_in

BOX = AesGcmBox([("k1", b"\x02" * 32)])


def _setup(backend: Backend) -> tuple[Memories, str, uuid.UUID]:
    org = backend.fresh_org()
    agent = agent_in(org)
    backend.run(backend.storage.agents.add, agent)
    settings = MemorySettings(backend.storage.secrets, backend.storage.agents, BOX)
    memories = Memories(
        backend.storage.memories,
        backend.storage.agents,
        SystemClock(),
        settings,
        backend.storage.threads,
    )
    return memories, org, agent.id


def _save(
    backend: Backend,
    memories: Memories,
    org: str,
    agent: uuid.UUID,
    content: str,
    key: str | None = None,
    scope: MemoryScope = "agent",
    scope_id: str | None = None,
    cap: int = 1000,
) -> Saved:
    async def go() -> Saved:
        return await memories.save(org, agent, scope, scope_id, content, key, max_active=cap)

    return backend.run(go)


def _m(saved: Saved) -> Memory:
    assert saved.memory is not None
    return saved.memory


def saved_at(saved: Saved) -> datetime:
    return _m(saved).created_at


def _who(org: str, user: str | None = None) -> Principal:
    if user is None:
        return Principal(org_id=org, method="api_key")
    return Principal(org_id=org, method="jwt", user_id=user)


def test_an_identical_fact_is_stored_once(backend: Backend) -> None:
    memories, org, agent = _setup(backend)
    first = _save(backend, memories, org, agent, "The user likes green tea")
    again = _save(backend, memories, org, agent, "  the USER likes   green tea ")
    assert first.outcome == "saved"
    assert again.outcome == "existing"
    assert again.memory == first.memory
    # the same text in another place is another memory
    other = _save(backend, memories, org, agent, "The user likes green tea", None, "user", "u1")
    assert other.outcome == "saved"
    page = _page(backend, memories, org, agent)
    assert len(page) == 2


def _page(
    backend: Backend,
    memories: Memories,
    org: str,
    agent: uuid.UUID,
    status: MemoryStatus | None = None,
) -> list[Memory]:
    async def go() -> list[Memory]:
        page = await memories.page(
            _who(org), agent, scope=None, status=status, cursor=None, limit=100
        )
        return page.memories

    return backend.run(go)


def test_the_same_key_supersedes_and_keeps_the_old_one(backend: Backend) -> None:
    memories, org, agent = _setup(backend)
    old = _save(backend, memories, org, agent, "Prefers green tea", "Tea")
    new = _save(backend, memories, org, agent, "Prefers black tea now", " tea ")
    assert new.outcome == "saved"
    assert new.superseded == _m(old).id
    assert _m(new).key == "tea"
    stored = backend.run(backend.storage.memories.get, org, agent, _m(old).id)
    assert stored.status == "superseded"
    assert stored.superseded_by == _m(new).id
    active = _page(backend, memories, org, agent, status="active")
    assert [m.id for m in active] == [_m(new).id]
    # only active memories are found
    found = backend.run(memories.search, org, agent, "green tea", None, 5)
    assert [m.id for m, _ in found] == [_m(new).id]
    # a key of another scope id supersedes nothing there
    third = _save(backend, memories, org, agent, "Tea with milk", "tea", "user", "u1")
    assert third.superseded is None


def test_the_cap_counts_active_memories(backend: Backend) -> None:
    memories, org, agent = _setup(backend)
    _save(backend, memories, org, agent, "one", "k", cap=2)
    _save(backend, memories, org, agent, "two", cap=2)
    with pytest.raises(InvalidInput):
        _save(backend, memories, org, agent, "three", cap=2)
    # a supersede does not grow the count; an identical fact is answered
    assert _save(backend, memories, org, agent, "one again", "k", cap=2).outcome == "saved"
    assert _save(backend, memories, org, agent, "two", cap=2).outcome == "existing"
    assert len(_page(backend, memories, org, agent, status="active")) == 2


def test_concurrent_saves_respect_the_rules(backend: Backend) -> None:
    memories, org, agent = _setup(backend)

    async def many() -> list[Saved]:
        tasks = [
            *(
                memories.save(org, agent, "agent", None, "same fact", None, max_active=5)
                for _ in range(4)
            ),
            *(
                memories.save(org, agent, "agent", None, f"v{i}", "k", max_active=5)
                for i in range(4)
            ),
        ]
        return list(await asyncio.gather(*tasks))

    backend.run(many)
    active = _page(backend, memories, org, agent, status="active")
    assert sorted(m.content for m in active if m.key is None) == ["same fact"]
    assert len([m for m in active if m.key == "k"]) == 1


def test_search_ranks_the_matching_memory_first_and_filters(backend: Backend) -> None:
    memories, org, agent = _setup(backend)
    tea = _save(backend, memories, org, agent, "The user drinks green tea every morning")
    _save(backend, memories, org, agent, "The office is in Lyon")
    _save(backend, memories, org, agent, "Green is the favourite colour")
    mine = _save(backend, memories, org, agent, "Tea time at five", None, "user", "u1")
    found = backend.run(memories.search, org, agent, "green tea morning", None, 5)
    assert found[0][0].id == _m(tea).id
    assert all(score > 0 for _, score in found)
    assert "The office is in Lyon" not in [m.content for m, _ in found]
    # scopes: only the places asked for
    only_user = backend.run(memories.search, org, agent, "tea", [("user", "u1")], 5)
    assert [m.id for m, _ in only_user] == [_m(mine).id]
    assert backend.run(memories.search, org, agent, "tea", [("user", "u2")], 5) == []
    assert backend.run(memories.search, org, agent, "tea", [], 5) == []
    assert len(backend.run(memories.search, org, agent, "tea", None, 1)) == 1
    # a JWT user sees the agent scope and its own memories, not another user's
    u2 = backend.run(memories.recall, _who(org, "u2"), agent, "tea", 5, None, None)
    assert [m.id for m, _ in u2] == [_m(tea).id]
    with pytest.raises(NotFound):
        backend.run(memories.delete, _who(org, "u2"), agent, _m(mine).id)


def test_an_edit_is_searched_by_its_new_words_and_keeps_its_place(backend: Backend) -> None:
    memories, org, agent = _setup(backend)
    store = backend.storage.memories
    tea = _m(_save(backend, memories, org, agent, "Drinks green tea", "drink", "user", "u1"))
    later = tea.created_at + timedelta(minutes=5)
    edited = backend.run(store.edit, org, agent, tea.id, "Drinks espresso", later)
    assert edited.outcome == "saved"
    changed = _m(edited)
    assert (changed.id, changed.content, changed.updated_at) == (tea.id, "Drinks espresso", later)
    assert (changed.scope, changed.scope_id, changed.key, changed.status) == (
        "user",
        "u1",
        "drink",
        "active",
    )
    assert changed.created_at == tea.created_at
    assert backend.run(store.get, org, agent, tea.id) == changed
    assert backend.run(memories.search, org, agent, "espresso", None, 5)[0][0].id == tea.id
    assert backend.run(memories.search, org, agent, "green", None, 5) == []
    # the identical-fact rule reads its new text
    assert _save(backend, memories, org, agent, "drinks ESPRESSO", None, "user", "u1").outcome == (
        "existing"
    )


def test_an_edit_to_a_fact_its_place_has_is_refused(backend: Backend) -> None:
    memories, org, agent = _setup(backend)
    store = backend.storage.memories
    one = _m(_save(backend, memories, org, agent, "Lives in Lyon"))
    two = _m(_save(backend, memories, org, agent, "Works in Paris"))
    now = two.created_at + timedelta(seconds=1)
    same = backend.run(store.edit, org, agent, two.id, "lives in  LYON", now)
    assert (same.outcome, _m(same).id) == ("existing", one.id)
    assert backend.run(store.get, org, agent, two.id) == two  # nothing changed
    # the same text in another place, or its own text again, is an edit
    elsewhere = _m(_save(backend, memories, org, agent, "Works in Paris", None, "user", "u1"))
    assert backend.run(store.edit, org, agent, elsewhere.id, "Lives in Lyon", now).outcome == (
        "saved"
    )
    assert backend.run(store.edit, org, agent, two.id, "works in paris", now).outcome == "saved"
    # a superseded memory is not an active fact: its edit is never refused
    old = _m(_save(backend, memories, org, agent, "Tea", "drink"))
    _save(backend, memories, org, agent, "Coffee", "drink")
    assert backend.run(store.edit, org, agent, old.id, "Coffee", now).outcome == "saved"
    assert backend.run(store.get, org, agent, old.id).status == "superseded"


def test_organizations_and_agents_are_apart(backend: Backend) -> None:
    memories, org, agent = _setup(backend)
    saved = _save(backend, memories, org, agent, "secret plan")
    mid = _m(saved).id
    other, other_agent = backend.fresh_org(), agent_in("x")
    store = backend.storage.memories
    with pytest.raises(NotFound):
        backend.run(store.get, other, agent, mid)
    with pytest.raises(NotFound):
        backend.run(store.delete, other, agent, mid)
    with pytest.raises(NotFound):
        backend.run(store.edit, other, agent, mid, "changed", saved_at(saved))
    assert backend.run(store.search, other, agent, ["secret"], None, 5) == []

    async def other_page() -> list[Memory]:
        return await store.page(other, agent, scopes=None, status=None, before=None, limit=5)

    assert backend.run(other_page) == []
    # another agent of the same organization
    with pytest.raises(NotFound):
        backend.run(store.get, org, other_agent.id, mid)
    with pytest.raises(NotFound):
        backend.run(store.edit, org, other_agent.id, mid, "changed", saved_at(saved))
    assert backend.run(store.get, org, agent, mid).content == "secret plan"
    # a saving for an agent that does not exist is refused
    with pytest.raises(NotFound):
        _save(backend, memories, other, uuid.uuid4(), "x")
    # the memories go with their agent
    backend.run(backend.storage.agents.delete, org, agent)
    with pytest.raises(NotFound):
        backend.run(store.get, org, agent, mid)


def test_pages_are_newest_first_and_complete(backend: Backend) -> None:
    memories, org, agent = _setup(backend)
    ids = [_m(_save(backend, memories, org, agent, f"fact {i}")).id for i in range(5)]

    async def all_pages() -> list[uuid.UUID]:
        seen: list[uuid.UUID] = []
        cursor = None
        while True:
            page = await memories.page(
                _who(org), agent, scope=None, status=None, cursor=cursor, limit=2
            )
            seen += [m.id for m in page.memories]
            if page.next_cursor is None:
                return seen
            cursor = page.next_cursor

    assert backend.run(all_pages) == list(reversed(ids))


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    facts=st.lists(
        st.tuples(
            st.sampled_from(["tea", "coffee", "green tea", "Tea", "city"]),
            st.sampled_from([None, "a", "b"]),
        ),
        max_size=8,
    )
)
def test_saves_agree_with_a_model(backend: Backend, facts: list[tuple[str, str | None]]) -> None:
    """Whatever the order of saves: one active memory per key, one per fact."""
    memories, org, agent = _setup(backend)
    model: dict[str, str | None] = {}  # fingerprint text -> key
    for content, key in facts:
        _save(backend, memories, org, agent, content, key)
        norm = content.casefold()
        if norm in model:
            continue
        for text, k in list(model.items()):
            if key is not None and k == key:
                del model[text]
        model[norm] = key
    active = _page(backend, memories, org, agent, status="active")
    assert sorted(m.content.casefold() for m in active) == sorted(model)
