"""Published chats' core, pinned where mutation testing found it loose: the exact
refusals (field and wording), every bound at its edge, what the owner's and the
visitors' use cases hand to storage, and the listing's paging. Over the memory
storage, a clock the test moves and a store that records the listing's calls."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import msgspec
import pytest

from agentsvc_adapters.crypto import AesGcmBox
from agentsvc_core.entities import Principal
from agentsvc_core.entities.published_chat import ListedChat
from agentsvc_core.errors import InvalidInput, NotFound, RateLimited, Unauthenticated
from agentsvc_core.use_cases.publishing import ChatChanges, ChatDraft, Identity, Publishing
from agentsvc_core.use_cases.publishing.chats import check_chat, day_start
from agentsvc_core.use_cases.publishing.identity import (
    new_identity_secret,
    new_visitor_id,
    signed_by,
)
from agentsvc_core.use_cases.publishing.listing import PublicListing
from tests.contract.test_agents_contract import agent_in
from tests.unit.test_publishing import ADMIN, Chats, sign
from tests.unit.turn_world import ORG, T0, world


@pytest.fixture
async def c() -> Chats:
    return Chats(await world())


def refused(err: pytest.ExceptionInfo[InvalidInput]) -> tuple[str, str]:
    return err.value.field, err.value.problem


# --- identity ---------------------------------------------------------------------


def test_new_secrets_and_visitor_ids() -> None:
    secret = new_identity_secret()
    assert secret.startswith("pcs_")
    assert len(secret) == 4 + 43  # 32 random bytes, URL-safe base64
    visitor = new_visitor_id()
    assert visitor.startswith("anon-")
    assert len(visitor) == 5 + 24
    int(visitor[5:], 16)


def test_a_match_with_the_first_secret_is_kept_past_the_others() -> None:
    expires = int(T0.timestamp()) + 60
    assert signed_by(["k", "other"], "v", expires, sign("k", "v", expires), T0)


# --- the chat's rules --------------------------------------------------------------


def test_a_day_starts_at_midnight_utc_whatever_the_zone() -> None:
    late = datetime(2026, 11, 1, 1, 30, 45, 500, tzinfo=timezone(timedelta(hours=2)))
    assert day_start(late) == datetime(2026, 10, 31, tzinfo=UTC)
    assert day_start(late).tzinfo == UTC
    assert day_start(datetime(2026, 11, 1, 23, 59, 59, 999, tzinfo=UTC)) == datetime(
        2026, 11, 1, tzinfo=UTC
    )


async def test_the_rules_at_their_edges(c: Chats) -> None:
    chat, _ = await c.publish()

    def ok(**over: Any) -> None:
        assert check_chat(msgspec.structs.replace(chat, **over)) is not None

    def bad(**over: Any) -> tuple[str, str]:
        with pytest.raises(InvalidInput) as err:
            check_chat(msgspec.structs.replace(chat, **over))
        return refused(err)

    must_slug = "must be 3-48 lowercase letters, digits or '-'"
    assert bad(slug="a_b") == ("slug", must_slug)
    assert bad(visibility="hidden") == ("visibility", "must be public, unlisted or private")
    assert bad(description="d" * 2001) == ("description", "must be at most 2000 characters")
    assert bad(welcome_message="w" * 4001) == (
        "welcome_message",
        "must be at most 4000 characters",
    )
    ok(starter_prompts=("p",) * 8)
    assert bad(starter_prompts=("p",) * 9) == ("starter_prompts", "at most 8")
    ok(allowed_domains=tuple(f"d{n}.example" for n in range(50)))
    many = tuple(f"d{n}.example" for n in range(51))
    assert bad(allowed_domains=many) == ("allowed_domains", "at most 50")
    assert bad(allowed_domains=("a" * 254,)) == (
        "allowed_domains",
        "must be at most 253 characters",
    )
    assert bad(allowed_domains=("not a host",))[0] == "allowed_domains"
    ok(rate_limit_per_min=1)
    ok(rate_limit_per_min=600)
    for rate in (0, 601):
        assert bad(rate_limit_per_min=rate) == ("rate_limit_per_min", "must be between 1 and 600")
    for cap in (0.0, 0.5, 1_000_000.0, None):
        ok(daily_cost_cap_usd=cap)
    for cap in (-0.01, 1_000_000.01):
        assert bad(daily_cost_cap_usd=cap) == ("daily_cost_cap_usd", "must be between 0 and 1e+06")


# --- the owner's resource ---------------------------------------------------------


async def test_not_published_and_no_such_agent_are_told_apart(c: Chats) -> None:
    agent, nobody = c.w.agent.id, uuid.uuid4()
    for call in (
        lambda a: c.owner.get(ADMIN, a),
        lambda a: c.owner.update(ADMIN, a, ChatChanges(title="t")),
        lambda a: c.owner.unpublish(ADMIN, a),
    ):
        with pytest.raises(NotFound) as unpublished:
            await call(agent)
        assert unpublished.value.detail == "the agent is not published"
        with pytest.raises(NotFound) as unknown:
            await call(nobody)
        assert unknown.value.detail == "agent not found"


async def test_what_publish_and_update_store(c: Chats) -> None:
    chat, _ = await c.publish(allowed_domains=["a.example"], starter_prompts=["x"])
    assert chat.allowed_domains == ("a.example",)
    assert (chat.created_at, chat.updated_at) == (T0, T0)
    c.w.clock.advance(3)
    changed = await c.owner.update(ADMIN, c.w.agent.id, ChatChanges(starter_prompts=["y", "z"]))
    assert changed.chat.starter_prompts == ("y", "z")
    stored = await c.w.storage.publishing.get(ORG, c.w.agent.id)
    assert stored is not None
    assert stored == changed.chat
    assert isinstance(stored.starter_prompts, tuple)
    assert changed.chat.updated_at == T0 + timedelta(seconds=3)


async def test_a_rotation_of_one_organization_only() -> None:
    w = await world()
    old = AesGcmBox([("k1", b"\x01" * 32)])
    owner = Publishing(w.storage.publishing, w.storage.agents, old, w.clock)
    await owner.publish(ADMIN, w.agent.id, ChatDraft(slug="mine-chat"))
    elsewhere = agent_in("org-else")
    await w.storage.agents.add(elsewhere)
    someone = Principal(org_id="org-else", method="api_key")
    await owner.publish(someone, elsewhere.id, ChatDraft(slug="their-chat"))
    both = AesGcmBox([("k2", b"\x02" * 32), ("k1", b"\x01" * 32)])
    rotated = Publishing(w.storage.publishing, w.storage.agents, both, w.clock)
    assert await rotated.rotate_secrets(ORG) == 1
    assert await rotated.rotate_secrets() == 1  # the other organization's, left until now


async def test_visitor_threads_page_by_creation(c: Chats) -> None:
    chat, _ = await c.publish()
    who = c.public.visitor(chat, c.public.start(chat, None).token)
    made = []
    for _ in range(3):
        made.append(await c.public.create_thread(who, None))
        c.w.clock.advance(1)
    page, more = await c.owner.visitor_threads(ADMIN, c.w.agent.id, before=None, limit=2)
    assert [v.thread_id for v in page] == [made[2].id, made[1].id]
    assert more == made[1].created_at
    rest, end = await c.owner.visitor_threads(ADMIN, c.w.agent.id, before=more, limit=2)
    assert [v.thread_id for v in rest] == [made[0].id]
    assert end is None
    whole, none = await c.owner.visitor_threads(ADMIN, c.w.agent.id, before=None, limit=3)
    assert (len(whole), none) == (3, None)
    with pytest.raises(NotFound):
        await c.owner.visitor_threads(ADMIN, uuid.uuid4(), before=None, limit=3)


# --- visitors ---------------------------------------------------------------------


async def test_the_face_and_an_unknown_chat(c: Chats) -> None:
    chat, _ = await c.publish(
        title="T", description="D", welcome_message="W", starter_prompts=["S"]
    )
    face = c.public.face(chat)
    assert (face.title, face.description, face.welcome_message, face.starter_prompts) == (
        "T",
        "D",
        "W",
        ("S",),
    )
    assert face.identity_required is False
    assert c.public.face(msgspec.structs.replace(chat, visibility="private")).identity_required
    with pytest.raises(NotFound) as unknown:
        await c.public.chat("nope")
    assert unknown.value.detail == "no such chat"


async def test_the_refusals_of_sessions_and_tokens(c: Chats) -> None:
    chat, secret = await c.publish(visibility="private")

    def says(call: Any) -> str:
        with pytest.raises(Unauthenticated) as err:
            call()
        return err.value.detail

    only_signed = "this chat admits only visitors its site signed in"
    assert says(lambda: c.public.start(chat, None)) == only_signed
    expires = int(T0.timestamp()) + 60
    wrong = Identity(visitor_id="u", expires_at=expires, signature="0" * 64)
    assert says(lambda: c.public.start(chat, wrong)) == (
        "the visitor's identity is not signed, or has expired"
    )
    assert says(lambda: c.public.visitor(chat, None)) == (
        "send the visitor token: Authorization: Bearer vt_..."
    )
    assert says(lambda: c.public.visitor(chat, "vt_nonsense")) == "unknown visitor token"
    good = Identity(visitor_id="u", expires_at=expires, signature=sign(secret, "u", expires))
    token = c.public.start(chat, good).token
    other = msgspec.structs.replace(chat, agent_id=uuid.uuid4())
    assert says(lambda: c.public.visitor(other, token)) == "this visitor token is another chat's"
    public = msgspec.structs.replace(chat, visibility="public")
    anonymous = c.public.start(public, None).token
    assert says(lambda: c.public.visitor(chat, anonymous)) == only_signed
    c.w.clock.advance(60)
    assert says(lambda: c.public.visitor(chat, token)) == (
        "the visitor token has expired: start a new session"
    )


async def test_the_previous_secret_signs_for_an_hour(c: Chats) -> None:
    chat, old = await c.publish(visibility="private")
    c.w.clock.advance(10)
    rotated = await c.owner.update(ADMIN, c.w.agent.id, ChatChanges(rotate_identity_secret=True))
    chat = rotated.chat
    assert rotated.identity_secret is not None

    def signed(secret: str) -> Identity:
        expires = int(c.w.clock.now().timestamp()) + 60
        return Identity(visitor_id="u", expires_at=expires, signature=sign(secret, "u", expires))

    assert c.public.start(chat, signed(old)).identified
    assert c.public.start(chat, signed(rotated.identity_secret)).identified
    c.w.clock.advance(3600 - 1)
    assert c.public.start(chat, signed(old)).identified
    c.w.clock.advance(1)
    with pytest.raises(Unauthenticated):
        c.public.start(chat, signed(old))
    assert c.public.start(chat, signed(rotated.identity_secret)).identified


async def test_threads_sends_and_their_refusals(c: Chats) -> None:
    chat, _ = await c.publish(daily_cost_cap_usd=0)
    alice = c.public.visitor(chat, c.public.start(chat, None).token)
    bob = c.public.visitor(chat, c.public.start(chat, None).token)
    thread = await c.public.create_thread(alice, "Hello")
    assert thread.title == "Hello"
    (listed,), _ = await c.owner.visitor_threads(ADMIN, c.w.agent.id, before=None, limit=5)
    assert listed.created_at == thread.created_at
    with pytest.raises(NotFound) as theirs:
        await c.public.stop(bob, thread.id)
    assert theirs.value.detail == "thread not found"
    # the content is checked before anything is read
    with pytest.raises(InvalidInput) as blank:
        await c.public.send(bob, thread.id, "  ")
    assert refused(blank) == ("content", "must not be empty")
    with pytest.raises(InvalidInput) as long:
        await c.public.send(bob, thread.id, "x" * 8001)
    assert refused(long) == ("content", "must be at most 8000 characters")
    with pytest.raises(RateLimited) as capped:
        await c.public.send(alice, thread.id, "hi")
    assert capped.value.detail == (
        "this chat has reached its daily cost cap; it opens again at midnight UTC"
    )


# --- the listing ------------------------------------------------------------------


class Recorded:
    def __init__(self, rows: int) -> None:
        self.rows = rows
        self.calls: list[dict[str, Any]] = []

    async def listed(self, **asked: Any) -> list[ListedChat]:
        self.calls.append(asked)
        return [
            ListedChat(
                agent_id=uuid.uuid4(),
                slug=f"s{n}",
                handle=None,
                display_name="",
                tagline="",
                description="",
                categories=(),
                capabilities=(),
                avatar_sha256=None,
                published_at=T0,
            )
            for n in range(min(self.rows, asked["limit"]))
        ]


async def test_the_listing_asks_storage_for_one_more_than_a_page() -> None:
    store = Recorded(rows=3)
    listing = PublicListing(store)  # type: ignore[arg-type]
    rows, more = await listing.page(q="  tea  ", category=" food ", before=T0, limit=2)
    assert (len(rows), more) == (2, True)
    assert store.calls[-1] == {"q": "tea", "category": "food", "before": T0, "limit": 3}
    rows, more = await listing.page(q="   ", category="  ", before=None, limit=3)
    assert (len(rows), more) == (3, False)
    assert store.calls[-1] == {"q": None, "category": None, "before": None, "limit": 4}
    await listing.page(q=None, category=None, before=None, limit=1)
    await listing.page(q="q" * 200, category="c" * 40, before=None, limit=100)
    assert store.calls[-1]["limit"] == 101
    for limit in (0, 101):
        with pytest.raises(InvalidInput) as err:
            await listing.page(q=None, category=None, before=None, limit=limit)
        assert refused(err) == ("limit", "must be between 1 and 100")
    with pytest.raises(InvalidInput) as long_q:
        await listing.page(q="q" * 201, category=None, before=None, limit=5)
    assert refused(long_q) == ("q", "must be at most 200 characters")
    with pytest.raises(InvalidInput) as long_c:
        await listing.page(q=None, category="c" * 41, before=None, limit=5)
    assert refused(long_c) == ("category", "must be at most 40 characters")


async def test_today_lists_the_organizations_chats_or_one_agents(c: Chats) -> None:
    chat, _ = await c.publish(daily_cost_cap_usd=0)
    (view,) = await c.owner.today(ADMIN)
    assert (view.chat, view.cost_today_usd, view.cap_reached) == (chat, 0.0, True)
    assert [v.chat for v in await c.owner.today(ADMIN, c.w.agent.id)] == [chat]
    assert await c.owner.today(ADMIN, uuid.uuid4()) == []
    assert await c.owner.today(Principal(org_id="org-else", method="api_key")) == []


async def test_a_page_ends_at_its_last_thread(c: Chats) -> None:
    chat, _ = await c.publish()
    who = c.public.visitor(chat, c.public.start(chat, None).token)
    for _ in range(4):
        await c.public.create_thread(who, None)
        c.w.clock.advance(1)
    page, more = await c.owner.visitor_threads(ADMIN, c.w.agent.id, before=None, limit=3)
    assert len(page) == 3
    assert more == page[2].created_at


async def test_the_visitors_calls_act_for_the_visitor_in_its_organization(
    c: Chats, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat, _ = await c.publish(daily_cost_cap_usd=None)
    who = c.public.visitor(chat, c.public.start(chat, None).token)
    thread = await c.public.create_thread(who, None)
    seen: list[Principal] = []
    conversation, threads = c.w.conversation, c.w.conversation._threads
    real_stop, real_history = conversation.stop, threads.history

    async def stop(p: Principal, thread_id: uuid.UUID) -> bool:
        seen.append(p)
        return await real_stop(p, thread_id)

    async def history(p: Principal, thread_id: uuid.UUID, **kw: Any) -> Any:
        seen.append(p)
        return await real_history(p, thread_id, **kw)

    monkeypatch.setattr(conversation, "stop", stop)
    monkeypatch.setattr(threads, "history", history)
    await c.public.stop(who, thread.id)
    await c.public.history(who, thread.id, offset=0, limit=5)
    assert seen == [Principal.for_visitor(ORG, who.visitor_id)] * 2
