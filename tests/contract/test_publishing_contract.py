"""Published chats: the memory and PostgreSQL adapters agree on the
PublishingStore contract (agentsvc_core/ports/publishing.py): a chat's fields
round-trip, one chat per agent, a slug is one chat's across organizations (on add
and on a change), a chat goes with its agent, a visitor thread goes with its
thread, the daily cost sums the priced usage of the agent's visitor threads only,
and the public listing holds listed agents with an active public chat."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import msgspec
import pytest

from agentsvc_core.entities import Usage, UsageRecord
from agentsvc_core.entities.marketplace import MarketplaceProfile
from agentsvc_core.entities.published_chat import ListedChat, PublishedChat, VisitorThread
from agentsvc_core.errors import Conflict, NotFound
from tests.contract.conftest import Backend, now
from tests.contract.test_agents_contract import agent_in
from tests.contract.test_conversations_contract import a_thread


def _agent(backend: Backend, org: str | None = None) -> tuple[str, uuid.UUID]:
    org = org or backend.fresh_org()
    agent = agent_in(org)
    backend.run(backend.storage.agents.add, agent)
    return org, agent.id


def a_chat(org: str, agent: uuid.UUID, **over: object) -> PublishedChat:
    t = now()
    base = PublishedChat(
        org_id=org,
        agent_id=agent,
        slug=f"s-{uuid.uuid4().hex[:12]}",
        visibility="public",
        title="Title",
        description="About\nit",
        welcome_message="Hi",
        starter_prompts=("One", "Two"),
        is_active=True,
        allowed_domains=("example.com", "*.shop.example"),
        rate_limit_per_min=20,
        daily_cost_cap_usd=1.5,
        allow_user_grants=False,
        identity_sealed="v1.k.sealed",
        previous_sealed=None,
        rotated_at=None,
        created_at=t,
        updated_at=t,
    )
    return msgspec.structs.replace(base, **over)


def test_a_chat_round_trips_and_changes(backend: Backend) -> None:
    store = backend.storage.publishing
    org, agent = _agent(backend)
    assert backend.run(store.get, org, agent) is None
    chat = a_chat(org, agent)
    assert backend.run(store.add, chat) == chat
    assert backend.run(store.get, org, agent) == chat
    assert backend.run(store.by_slug, chat.slug) == chat
    assert backend.run(store.get, "another-org", agent) is None
    assert backend.run(store.of_agents, org, [agent, uuid.uuid4()]) == {agent: chat}
    assert backend.run(store.of_agents, org, []) == {}
    assert backend.run(store.of_org, org) == [chat]
    assert backend.run(store.of_org, "another-org") == []
    with pytest.raises(Conflict) as again:
        backend.run(store.add, a_chat(org, agent))
    assert again.value.code == "ALREADY_PUBLISHED"
    t = now() + timedelta(seconds=5)
    changed = backend.run(
        store.modify,
        org,
        agent,
        lambda c: msgspec.structs.replace(
            c,
            allowed_domains=None,
            daily_cost_cap_usd=None,
            previous_sealed="v1.k.old",
            rotated_at=t,
            starter_prompts=(),
            updated_at=t,
        ),
    )
    assert backend.run(store.get, org, agent) == changed
    assert (changed.allowed_domains, changed.daily_cost_cap_usd) == (None, None)
    with pytest.raises(NotFound):
        backend.run(store.modify, org, uuid.uuid4(), lambda c: c)
    assert backend.run(store.delete, org, agent) is True
    assert backend.run(store.delete, org, agent) is False
    assert backend.run(store.by_slug, chat.slug) is None


def test_a_slug_is_one_chats_across_organizations(backend: Backend) -> None:
    store = backend.storage.publishing
    org, agent = _agent(backend)
    chat = backend.run(store.add, a_chat(org, agent))
    other_org, other = _agent(backend)
    with pytest.raises(Conflict) as taken:
        backend.run(store.add, a_chat(other_org, other, slug=chat.slug))
    assert taken.value.code == "SLUG_TAKEN"
    mine = backend.run(store.add, a_chat(other_org, other))
    with pytest.raises(Conflict) as moved:
        backend.run(
            store.modify, other_org, other, lambda c: msgspec.structs.replace(c, slug=chat.slug)
        )
    assert moved.value.code == "SLUG_TAKEN"
    assert backend.run(store.get, other_org, other) == mine
    with pytest.raises(NotFound):
        backend.run(store.add, a_chat(org, uuid.uuid4()))  # no such agent


def test_a_chat_goes_with_its_agent(backend: Backend) -> None:
    store = backend.storage.publishing
    org, agent = _agent(backend)
    chat = backend.run(store.add, a_chat(org, agent))
    backend.run(backend.storage.agents.delete, org, agent)
    assert backend.run(store.get, org, agent) is None
    assert backend.run(store.by_slug, chat.slug) is None


def _page(
    backend: Backend, org: str, agent: uuid.UUID, before: datetime | None = None, limit: int = 10
) -> list[VisitorThread]:
    store = backend.storage.publishing
    return backend.run(lambda: store.visitor_threads(org, agent, before=before, limit=limit))


def _listed(
    backend: Backend,
    q: str | None,
    category: str | None = None,
    before: datetime | None = None,
    limit: int = 10,
) -> list[ListedChat]:
    store = backend.storage.publishing
    return backend.run(lambda: store.listed(q=q, category=category, before=before, limit=limit))


def _visitor_thread(backend: Backend, org: str, agent: uuid.UUID, visitor: str) -> VisitorThread:
    thread = backend.run(backend.storage.threads.add, a_thread(org, agent))
    v = VisitorThread(
        org_id=org,
        thread_id=thread.id,
        agent_id=agent,
        visitor_id=visitor,
        identified=visitor.startswith("user"),
        created_at=thread.created_at,
    )
    backend.run(backend.storage.publishing.add_visitor_thread, v)
    return v


def _usage(v: VisitorThread, cost: float | None, at_s: float = 0) -> UsageRecord:
    return UsageRecord(
        id=uuid.uuid4(),
        org_id=v.org_id,
        agent_id=v.agent_id,
        thread_id=v.thread_id,
        run_id=uuid.uuid4(),
        message_id=None,
        provider="local",
        model="local",
        usage=Usage(input_tokens=10, output_tokens=5),
        key_source="platform",
        metadata={},
        created_at=now() + timedelta(seconds=at_s),
        cost_usd=cost,
    )


def test_visitor_threads_and_their_daily_cost(backend: Backend) -> None:
    store = backend.storage.publishing
    org, agent = _agent(backend)
    first = _visitor_thread(backend, org, agent, "anon-1")
    second = _visitor_thread(backend, org, agent, "user-2")
    assert backend.run(store.visitor_thread, org, first.thread_id) == first
    assert backend.run(store.visitor_thread, "another-org", first.thread_id) is None
    assert _page(backend, org, agent) == [second, first]  # newest first
    assert _page(backend, org, agent, before=second.created_at) == [first]
    assert _page(backend, org, agent, limit=1) == [second]
    with pytest.raises(NotFound):
        backend.run(
            store.add_visitor_thread, msgspec.structs.replace(first, thread_id=uuid.uuid4())
        )
    since = now() - timedelta(seconds=1)
    assert backend.run(store.visitor_cost, org, agent, since) == 0.0
    conversations = backend.storage.conversations
    backend.run(conversations.add_usage, [_usage(first, 0.25), _usage(second, 0.5)])
    backend.run(conversations.add_usage, [_usage(second, None), _usage(first, 1.0, at_s=-3600)])
    # an organization thread of the same agent is no visitor's: not counted
    own = backend.run(backend.storage.threads.add, a_thread(org, agent))
    backend.run(
        conversations.add_usage,
        [msgspec.structs.replace(_usage(first, 9.0), thread_id=own.id)],
    )
    assert backend.run(store.visitor_cost, org, agent, since) == pytest.approx(0.75)
    assert backend.run(store.visitor_cost, org, agent, since - timedelta(hours=2)) == (
        pytest.approx(1.75)
    )
    assert backend.run(store.visitor_cost, org, uuid.uuid4(), since) == 0.0


def test_the_public_listing(backend: Backend) -> None:
    store = backend.storage.publishing
    word = uuid.uuid4().hex[:12]

    def listed(org: str, agent: uuid.UUID, name: str, *, on: bool = True) -> None:
        profile = MarketplaceProfile(
            agent_id=agent,
            org_id=org,
            display_name=name,
            tagline=f"tag {word}",
            categories=("travel",),
            listed=on,
            updated_at=now(),
        )
        backend.run(backend.storage.marketplace.put, profile)

    org, a = _agent(backend)
    listed(org, a, "Alpha")
    first = backend.run(store.add, a_chat(org, a))
    other_org, b = _agent(backend)
    listed(other_org, b, "Beta_%")
    later = now() + timedelta(seconds=1)
    second = backend.run(store.add, a_chat(other_org, b, created_at=later, updated_at=later))
    # not listed: a private chat, an inactive one, a profile not listed
    for over, on in (({"visibility": "unlisted"}, True), ({"is_active": False}, True), ({}, False)):
        o, agent = _agent(backend)
        listed(o, agent, "Hidden", on=on)
        backend.run(store.add, a_chat(o, agent, **over))
    rows = _listed(backend, word, None, None, 10)
    assert [(r.agent_id, r.slug) for r in rows] == [(b, second.slug), (a, first.slug)]
    assert rows[1].display_name == "Alpha"
    assert rows[1].categories == ("travel",)
    assert _listed(backend, word, None, None, 1) == rows[:1]
    after = _listed(backend, word, None, rows[0].published_at, 5)
    assert after == rows[1:]
    assert _listed(backend, word, "food", None, 5) == []
    assert _listed(backend, word, "travel", None, 5) == rows
    # q is a substring, in any letter case; LIKE's wildcards are literal
    assert [r.agent_id for r in _listed(backend, "BETA_%", None, None, 50)] == [b]
    assert _listed(backend, "beta%x", None, None, 50) == []


def test_sealed_identities_are_resealed_by_compare_and_set(backend: Backend) -> None:
    store = backend.storage.publishing
    org, agent = _agent(backend)
    backend.run(store.add, a_chat(org, agent, identity_sealed="cur", previous_sealed="prev"))
    other_org, other = _agent(backend)
    backend.run(store.add, a_chat(other_org, other, identity_sealed="only"))
    assert backend.run(store.sealed_identities, org) == [(org, agent, "cur"), (org, agent, "prev")]
    everyone = backend.run(store.sealed_identities, None)
    assert {(org, agent, "cur"), (org, agent, "prev"), (other_org, other, "only")} <= set(everyone)
    assert backend.run(store.reseal, org, agent, "cur", "cur2") is True
    assert backend.run(store.reseal, org, agent, "prev", "prev2") is True
    assert backend.run(store.reseal, org, agent, "cur", "x") is False  # moved on
    assert backend.run(store.reseal, other_org, agent, "cur2", "x") is False
    chat = backend.run(store.get, org, agent)
    assert chat is not None
    assert (chat.identity_sealed, chat.previous_sealed) == ("cur2", "prev2")
