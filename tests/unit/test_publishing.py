"""Published chats' core (docs/publishing.md) over the memory storage and a clock
the test moves: the owner's resource (publish, change, rotate, unpublish), the
identity proofs (HMAC, expiry, the 24-hour bound, the rotation's hour), visitor
tokens (one chat's, until they expire), visitors' threads (each its own), the
daily cost cap (reached at the cap, midnight UTC), and a visitor's turn, which
runs as the organization with no user's grant unless the owner allows it."""

from __future__ import annotations

import hashlib
import hmac
import uuid
from datetime import timedelta
from typing import Any

import msgspec
import pytest

from agentsvc_core.entities import Principal, Usage, UsageRecord
from agentsvc_core.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    RateLimited,
    Unauthenticated,
)
from agentsvc_core.use_cases.org_settings import OrgSettings
from agentsvc_core.use_cases.publishing import (
    ChatChanges,
    ChatDraft,
    Identity,
    PublicChats,
    Publishing,
)
from agentsvc_core.use_cases.publishing.chats import check_chat, day_start
from agentsvc_core.use_cases.publishing.identity import (
    MAX_IDENTITY_S,
    ROTATION_GRACE,
    accepted_secrets,
    identity_signature,
    signed_by,
)
from agentsvc_core.use_cases.publishing.listing import PublicListing
from agentsvc_core.use_cases.publishing.visitors import TOKEN_PREFIX
from tests.unit.turn_world import BOX, ORG, T0, NoRefusals, World, read_all, world

ADMIN = Principal(org_id=ORG, method="api_key")
STRANGER = Principal(org_id="org-other", method="api_key")


def sign(secret: str, visitor: str, expires: int) -> str:
    return hmac.new(secret.encode(), f"{visitor}.{expires}".encode(), hashlib.sha256).hexdigest()


class Chats:
    def __init__(self, w: World) -> None:
        s = w.storage
        self.w = w
        self.owner = Publishing(s.publishing, s.agents, BOX, w.clock)
        settings = OrgSettings(s.secrets, s.agents, BOX, NoRefusals(), w.clock, allow_http=False)
        self.public = PublicChats(
            s.publishing, w.conversation._threads, w.conversation, settings, BOX, w.clock
        )
        self.settings = settings

    async def publish(self, **fields: Any) -> tuple[Any, str]:
        draft = msgspec.convert({"slug": f"s-{uuid.uuid4().hex[:8]}", **fields}, ChatDraft)
        view = await self.owner.publish(ADMIN, self.w.agent.id, draft)
        assert view.identity_secret is not None
        return view.chat, view.identity_secret


@pytest.fixture
async def c() -> Chats:
    return Chats(await world())


# --- identity -------------------------------------------------------------------


def test_a_signature_proves_the_visitor_until_it_expires() -> None:
    now_s = int(T0.timestamp())
    good = sign("k", "user-1", now_s + 60)
    assert identity_signature("k", "user-1", now_s + 60) == good
    assert signed_by(["k"], "user-1", now_s + 60, good, T0)
    assert signed_by(["k"], "user-1", now_s + 60, good.upper(), T0)  # hex in any case
    assert signed_by(["other", "k"], "user-1", now_s + 60, good, T0)
    assert not signed_by(["other"], "user-1", now_s + 60, good, T0)
    assert not signed_by(["k"], "user-2", now_s + 60, good, T0)
    assert not signed_by(["k"], "user-1", now_s + 61, good, T0)
    assert not signed_by(["k"], "user-1", now_s + 60, good[:-1], T0)
    assert not signed_by(["k"], "user-1", now_s + 60, "z" * 64, T0)
    assert not signed_by([], "user-1", now_s + 60, good, T0)
    # the bounds: expired at its second, at most 24 hours ahead
    assert not signed_by(["k"], "u", now_s, sign("k", "u", now_s), T0)
    assert signed_by(["k"], "u", now_s + 1, sign("k", "u", now_s + 1), T0)
    edge = now_s + MAX_IDENTITY_S
    assert signed_by(["k"], "u", edge, sign("k", "u", edge), T0)
    assert not signed_by(["k"], "u", edge + 1, sign("k", "u", edge + 1), T0)
    # a visitor id of the allowed characters only
    assert not signed_by(["k"], "a b", now_s + 60, sign("k", "a b", now_s + 60), T0)
    assert not signed_by(["k"], "", now_s + 60, sign("k", "", now_s + 60), T0)
    long_id = "x" * 129
    assert not signed_by(["k"], long_id, now_s + 60, sign("k", long_id, now_s + 60), T0)


def test_the_previous_secret_signs_for_an_hour_after_a_rotation() -> None:
    assert accepted_secrets("new", None, None, T0) == ["new"]
    assert accepted_secrets("new", "old", T0, T0) == ["new", "old"]
    almost = T0 + ROTATION_GRACE - timedelta(microseconds=1)
    assert accepted_secrets("new", "old", T0, almost) == ["new", "old"]
    assert accepted_secrets("new", "old", T0, T0 + ROTATION_GRACE) == ["new"]
    assert accepted_secrets("new", "old", None, T0) == ["new"]


# --- the owner's resource ---------------------------------------------------------


async def test_publish_shows_the_secret_once_and_seals_it(c: Chats) -> None:
    chat, secret = await c.publish(title="", description="d")
    assert chat.title == c.w.agent.name  # an empty title: the agent's name
    assert secret not in chat.identity_sealed
    read = await c.owner.get(ADMIN, c.w.agent.id)
    assert read.identity_secret is None
    assert (read.cost_today_usd, read.cap_reached) == (0.0, False)
    with pytest.raises(NotFound):
        await c.owner.get(STRANGER, c.w.agent.id)
    with pytest.raises(Conflict):
        await c.publish()
    assert await c.owner.summaries(ADMIN, [c.w.agent.id]) == {c.w.agent.id: chat}


async def test_changes_and_a_rotation(c: Chats) -> None:
    chat, secret = await c.publish(starter_prompts=["a"])
    c.w.clock.advance(10)
    changed = await c.owner.update(
        ADMIN, c.w.agent.id, ChatChanges(title="T", allowed_domains=["x.example"])
    )
    assert changed.identity_secret is None
    assert (changed.chat.title, changed.chat.allowed_domains) == ("T", ("x.example",))
    assert changed.chat.starter_prompts == ("a",)
    assert changed.chat.identity_sealed == chat.identity_sealed
    assert changed.chat.updated_at == c.w.clock.at
    rotated = await c.owner.update(ADMIN, c.w.agent.id, ChatChanges(rotate_identity_secret=True))
    assert rotated.identity_secret not in (None, secret)
    assert rotated.chat.previous_sealed == chat.identity_sealed
    assert rotated.chat.rotated_at == c.w.clock.at
    cleared = await c.owner.update(ADMIN, c.w.agent.id, ChatChanges(allowed_domains=None))
    assert cleared.chat.allowed_domains is None
    with pytest.raises(InvalidInput):
        await c.owner.update(ADMIN, c.w.agent.id, ChatChanges(allowed_domains=["no spaces"]))
    with pytest.raises(NotFound):
        await c.owner.update(ADMIN, uuid.uuid4(), ChatChanges(title="x"))
    await c.owner.unpublish(ADMIN, c.w.agent.id)
    with pytest.raises(NotFound):
        await c.owner.unpublish(ADMIN, c.w.agent.id)
    with pytest.raises(NotFound):
        await c.owner.update(ADMIN, c.w.agent.id, ChatChanges(title="x"))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("slug", "ab"),
        ("slug", "Upper"),
        ("visibility", "secret"),
        ("title", "x\x00"),
        ("starter_prompts", ("",)),
        ("starter_prompts", ("p",) * 9),
        ("rate_limit_per_min", 0),
        ("rate_limit_per_min", 601),
        ("daily_cost_cap_usd", -0.01),
    ],
)
async def test_the_rules_of_a_chat(c: Chats, field: str, value: Any) -> None:
    chat, _ = await c.publish()
    assert check_chat(chat) == chat
    with pytest.raises(InvalidInput) as refused:
        check_chat(msgspec.structs.replace(chat, **{field: value}))
    assert refused.value.field == field


def test_a_day_starts_at_midnight_utc() -> None:
    assert day_start(T0 + timedelta(hours=11, minutes=59)).isoformat() == (
        "2026-11-01T00:00:00+00:00"
    )


# --- visitors ---------------------------------------------------------------------


async def test_a_visitor_token_is_one_chats_until_it_expires(c: Chats) -> None:
    chat, _ = await c.publish()
    session = c.public.start(chat, None)
    assert session.token.startswith(TOKEN_PREFIX)
    assert session.visitor_id.startswith("anon-")
    assert session.expires_at == T0 + timedelta(hours=24)
    who = c.public.visitor(chat, session.token)
    assert (who.visitor_id, who.identified) == (session.visitor_id, False)
    other = msgspec.structs.replace(chat, agent_id=uuid.uuid4())
    for token in (None, "", "vt_garbage", session.token[3:], session.token + "x"):
        with pytest.raises(Unauthenticated):
            c.public.visitor(chat, token)
    with pytest.raises(Unauthenticated):
        c.public.visitor(other, session.token)
    c.w.clock.advance(24 * 3600 - 1)
    assert c.public.visitor(chat, session.token).visitor_id == session.visitor_id
    c.w.clock.advance(1)
    with pytest.raises(Unauthenticated):
        c.public.visitor(chat, session.token)


async def test_a_private_chat_admits_signed_visitors_only(c: Chats) -> None:
    chat, secret = await c.publish(visibility="private")
    with pytest.raises(Unauthenticated):
        c.public.start(chat, None)
    expires = int(T0.timestamp()) + 600
    identity = Identity(
        visitor_id="user-9", expires_at=expires, signature=sign(secret, "user-9", expires)
    )
    session = c.public.start(chat, identity)
    assert (session.visitor_id, session.identified) == ("user-9", True)
    assert int(session.expires_at.timestamp()) == expires
    with pytest.raises(Unauthenticated):
        c.public.start(chat, msgspec.structs.replace(identity, signature="0" * 64))
    # a token made while the chat was public stops when it turns private
    public = msgspec.structs.replace(chat, visibility="public")
    anon = c.public.start(public, None)
    assert c.public.visitor(public, anon.token).identified is False
    with pytest.raises(Unauthenticated):
        c.public.visitor(chat, anon.token)


async def test_visitors_use_their_own_threads_only(c: Chats) -> None:
    chat, _ = await c.publish(daily_cost_cap_usd=None)
    alice = c.public.visitor(chat, c.public.start(chat, None).token)
    bob = c.public.visitor(chat, c.public.start(chat, None).token)
    thread = await c.public.create_thread(alice, "hello")
    assert (thread.agent_id, thread.created_by, thread.kind) == (c.w.agent.id, None, "single")
    assert thread.metadata == {"visitor_id": alice.visitor_id, "published_chat": chat.slug}
    for theirs in (bob, msgspec.structs.replace(alice, identified=True)):
        with pytest.raises(NotFound):
            await c.public.history(theirs, thread.id, offset=0, limit=10)
        with pytest.raises(NotFound):
            await c.public.send(theirs, thread.id, "hi")
        with pytest.raises(NotFound):
            await c.public.stop(theirs, thread.id)
    with pytest.raises(NotFound):  # the organization's own thread
        await c.public.history(alice, c.w.thread.id, offset=0, limit=10)
    assert await c.public.stop(alice, thread.id) is False
    messages, total = await c.public.history(alice, thread.id, offset=0, limit=10)
    assert (messages, total) == ([], 0)
    listed, more = await c.owner.visitor_threads(ADMIN, c.w.agent.id, before=None, limit=10)
    assert [(v.thread_id, v.visitor_id) for v in listed] == [(thread.id, alice.visitor_id)]
    assert more is None


async def _spent(c: Chats, thread_id: uuid.UUID, cost: float | None, at_s: float = 0) -> None:
    record = UsageRecord(
        id=uuid.uuid4(),
        org_id=ORG,
        agent_id=c.w.agent.id,
        thread_id=thread_id,
        run_id=uuid.uuid4(),
        message_id=None,
        provider="local",
        model="local",
        usage=Usage(input_tokens=1),
        key_source="platform",
        metadata={},
        created_at=c.w.clock.at + timedelta(seconds=at_s),
        cost_usd=cost,
    )
    await c.w.storage.conversations.add_usage([record])


async def test_the_daily_cost_cap_is_reached_at_the_cap_until_midnight(c: Chats) -> None:
    chat, _ = await c.publish(daily_cost_cap_usd=1.0)
    who = c.public.visitor(chat, c.public.start(chat, None).token)
    thread = await c.public.create_thread(who, None)
    await c.public.check_budget(chat)
    await _spent(c, thread.id, 0.5)
    await _spent(c, thread.id, None)
    await _spent(c, thread.id, 5.0, at_s=-13 * 3600)  # yesterday (UTC)
    await c.public.check_budget(chat)
    await _spent(c, thread.id, 0.5)
    with pytest.raises(RateLimited) as capped:
        await c.public.check_budget(chat)
    assert capped.value.code == "DAILY_COST_CAP_REACHED"
    assert capped.value.retry_after_s == 12 * 3600 + 1  # T0 is noon UTC
    with pytest.raises(RateLimited):
        await c.public.send(who, thread.id, "hi")
    view = await c.owner.get(ADMIN, c.w.agent.id)
    assert (view.cost_today_usd, view.cap_reached) == (1.0, True)
    await c.public.check_budget(msgspec.structs.replace(chat, daily_cost_cap_usd=1.01))
    await c.public.check_budget(msgspec.structs.replace(chat, daily_cost_cap_usd=None))
    c.w.clock.advance(12 * 3600)  # midnight: a new day
    await c.public.check_budget(chat)


async def test_a_visitors_turn_runs_with_no_users_grant(c: Chats) -> None:
    chat, secret = await c.publish(daily_cost_cap_usd=None)
    who = c.public.visitor(chat, c.public.start(chat, None).token)
    thread = await c.public.create_thread(who, None)
    await read_all(await c.public.send(who, thread.id, "hello"))
    messages, _ = await c.public.history(who, thread.id, offset=0, limit=10)
    assert messages[0].sender_id is None
    assert messages[0].sender_name == "visitor"
    with pytest.raises(InvalidInput):
        await c.public.send(who, thread.id, "   ")
    with pytest.raises(InvalidInput):
        await c.public.send(who, thread.id, "x" * 8001)
    # the owner allows grants: a signed visitor's id is the turn's user
    await c.owner.update(ADMIN, c.w.agent.id, ChatChanges(allow_user_grants=True))
    chat = (await c.owner.get(ADMIN, c.w.agent.id)).chat
    anonymous = c.public.visitor(chat, c.public.start(chat, None).token)
    other = await c.public.create_thread(anonymous, None)
    await read_all(await c.public.send(anonymous, other.id, "hi"))
    assert (await c.public.history(anonymous, other.id, offset=0, limit=1))[0][0].sender_id is None
    expires = int(T0.timestamp()) + 60
    signed = Identity(
        visitor_id="user-7", expires_at=expires, signature=sign(secret, "user-7", expires)
    )
    known = c.public.visitor(chat, c.public.start(chat, signed).token)
    mine = await c.public.create_thread(known, None)
    await read_all(await c.public.send(known, mine.id, "hi"))
    assert (await c.public.history(known, mine.id, offset=0, limit=1))[0][0].sender_id == "user-7"


async def test_chat_and_domains(c: Chats) -> None:
    chat, _ = await c.publish(allowed_domains=None)
    assert await c.public.chat(chat.slug) == chat
    assert await c.public.domains(chat) == ()
    await c.settings.update(ADMIN, domains=["shop.example"], rotate=False)
    assert await c.public.domains(chat) == ("shop.example",)
    own = msgspec.structs.replace(chat, allowed_domains=("a.example",))
    assert await c.public.domains(own) == ("a.example",)
    face = c.public.face(chat)
    assert (face.slug, face.identity_required) == (chat.slug, False)
    await c.owner.update(ADMIN, c.w.agent.id, ChatChanges(is_active=False))
    with pytest.raises(NotFound):
        await c.public.chat(chat.slug)
    with pytest.raises(NotFound):
        await c.public.chat("no-such-chat")


async def test_the_listing_pages(c: Chats) -> None:
    listing = PublicListing(c.w.storage.publishing)
    rows, more = await listing.page(q="  ", category="", before=None, limit=5)
    assert (rows, more) == ([], False)
    for limit in (0, 101):
        with pytest.raises(InvalidInput):
            await listing.page(q=None, category=None, before=None, limit=limit)
    with pytest.raises(InvalidInput):
        await listing.page(q="\x00", category=None, before=None, limit=5)


async def test_a_key_rotation_reseals_the_identity_secrets() -> None:
    from agentsvc_adapters.crypto import AesGcmBox  # noqa: PLC0415

    w = await world()
    old_box = AesGcmBox([("k1", b"\x01" * 32)])
    owner = Publishing(w.storage.publishing, w.storage.agents, old_box, w.clock)
    draft = msgspec.convert({"slug": "rotating"}, ChatDraft)
    secret = (await owner.publish(ADMIN, w.agent.id, draft)).identity_secret
    await owner.update(ADMIN, w.agent.id, ChatChanges(rotate_identity_secret=True))
    both = AesGcmBox([("k2", b"\x02" * 32), ("k1", b"\x01" * 32)])
    rotated = Publishing(w.storage.publishing, w.storage.agents, both, w.clock)
    assert await rotated.rotate_secrets() == 2
    assert await rotated.rotate_secrets(ORG) == 0  # all current now
    chat = (await rotated.get(ADMIN, w.agent.id)).chat
    assert both.is_current(chat.identity_sealed)
    assert chat.previous_sealed is not None
    assert both.is_current(chat.previous_sealed)
    where = f"{ORG}:published_chat:{w.agent.id}"
    assert both.open(chat.previous_sealed, where).decode() == secret
