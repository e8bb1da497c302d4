"""Who may use a thread, and the profile a thread may name, pinned against the
memory adapters. Written for ``agentsvc_core.use_cases.threads``, whose mutants
had almost no unit test (docs/development.md); the web suite covers the rest."""

from __future__ import annotations

from uuid import UUID

import pytest

from agentsvc_adapters.clock import SystemClock
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_core.entities import Principal, ToolProfile
from agentsvc_core.errors import InvalidInput, NotFound, PermissionDenied
from agentsvc_core.use_cases import AgentDraft, Agents
from agentsvc_core.use_cases.threads import ThreadChanges, ThreadDraft, Threads

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
