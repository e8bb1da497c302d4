"""Marketplace profiles (docs/marketplace.md) over the memory storage, the real
picture check (Pillow) and a clock the test moves: the defaults, each field's
bounds on both sides, a handle one agent's across the service, the avatar
stored re-encoded under its digest, the suggestions that store nothing, and who
may do what."""

from __future__ import annotations

import hashlib
import io
import uuid
from typing import Any, cast
from uuid import UUID

import pytest
from PIL import Image

from agentsvc_adapters.images import PillowImages
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_core.entities import Principal
from agentsvc_core.entities.marketplace import MarketplaceProfile
from agentsvc_core.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from agentsvc_core.ports.images import ImageRefused
from agentsvc_core.use_cases import AgentDraft, Agents
from agentsvc_core.use_cases.capabilities import AgentCapabilities
from agentsvc_core.use_cases.marketplace import Marketplace, avatar_path
from tests.unit.turn_world import T0, Clock

ADMIN = Principal(org_id="org-a", method="api_key")
MEMBER = Principal(org_id="org-a", method="jwt", user_id="mia")
OTHER = Principal(org_id="org-b", method="api_key")


def png(size: tuple[int, int] = (16, 8)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (1, 2, 3)).save(out, format="PNG")
    return out.getvalue()


class World:
    def __init__(self, *found: list[str]) -> None:
        self.storage = s = MemoryStorage()
        self.clock = Clock()
        self.agents = Agents(s.agents, self.clock, "local")
        self.asked: list[tuple[str, UUID, str]] = []
        self.answer = "  A helpful agent.  "

        async def ask(org: str, agent: UUID, prompt: str) -> str:
            self.asked.append((org, agent, prompt))
            return self.answer

        self.sourced: list[tuple[Principal, UUID]] = []

        async def source(who: Principal, agent_id: UUID, names: list[str]) -> list[str]:
            self.sourced.append((who, agent_id))
            return names

        sources = [lambda who, a, n=names: source(who, a, n) for names in found]
        self.market = Marketplace(
            s.marketplace, s.agents, PillowImages(), self.clock, ask=ask, sources=sources
        )

    async def agent(self, who: Principal = ADMIN, **fields: Any) -> UUID:
        return (await self.agents.create(who, AgentDraft(name="Scout", **fields))).id


async def test_a_profile_is_its_defaults_until_saved() -> None:
    w = World()
    agent = await w.agent()
    assert await w.market.get(MEMBER, agent) == MarketplaceProfile(agent_id=agent, org_id="org-a")
    with pytest.raises(NotFound):
        await w.market.get(OTHER, agent)
    with pytest.raises(NotFound):
        await w.market.get(ADMIN, uuid.uuid4())


async def test_put_changes_the_given_fields_and_keeps_the_rest() -> None:
    w = World()
    agent = await w.agent()
    w.clock.advance(5)
    first = await w.market.update(
        ADMIN,
        agent,
        {"handle": "scout", "tagline": "t", "categories": ["b", "a", "b", " a "]},
    )
    assert (first.handle, first.tagline, first.categories) == ("scout", "t", ("b", "a"))
    assert first.updated_at == w.clock.now() != T0
    assert await w.market.get(ADMIN, agent) == first
    second = await w.market.update(ADMIN, agent, {"description": "d", "listed": True})
    assert (second.handle, second.tagline, second.description, second.listed) == (
        "scout",
        "t",
        "d",
        True,
    )
    caps = await w.market.set_capabilities(ADMIN, agent, ["x", "y", "x"])
    assert caps.capabilities == ("x", "y")
    assert caps.description == "d"
    freed = await w.market.update(ADMIN, agent, {"handle": None})
    assert freed.handle is None


@pytest.mark.parametrize(
    ("field", "good", "bad"),
    [
        ("handle", "abc", "ab"),
        ("handle", "a" * 48, "a" * 49),
        ("handle", "a-1", "A-1"),
        ("handle", "0-9", "a_b"),
        ("display_name", "d" * 80, "d" * 81),
        ("tagline", "t" * 160, "t" * 161),
        ("description", "x" * 4000, "x" * 4001),
        ("description", "ok", "nul\x00"),
        ("categories", ["c"] * 5, [str(i) for i in range(6)]),
        ("categories", ["c" * 40], ["c" * 41]),
        ("categories", ["c"], [" "]),
        ("capabilities", [str(i) for i in range(30)], [str(i) for i in range(31)]),
        ("capabilities", ["c" * 80], ["c" * 81]),
        ("capabilities", ["c"], ["a\x00"]),
    ],
)
async def test_each_bound_on_both_sides(field: str, good: Any, bad: Any) -> None:
    w = World()
    agent = await w.agent()
    saved = await w.market.update(ADMIN, agent, {field: good})
    with pytest.raises(InvalidInput) as err:
        await w.market.update(ADMIN, agent, {field: bad})
    assert err.value.field == field
    if field == "handle":
        assert err.value.problem == "3 to 48 of a-z, 0-9 and -"
    if isinstance(bad, list) and len(bad) > len(good):
        assert err.value.problem == f"at most {len(good)}"
    assert await w.market.get(ADMIN, agent) == saved


async def test_a_handle_is_one_agents_across_organizations() -> None:
    w = World()
    mine, theirs = await w.agent(), await w.agent(OTHER)
    await w.market.update(ADMIN, mine, {"handle": "shared"})
    with pytest.raises(Conflict) as err:
        await w.market.update(OTHER, theirs, {"handle": "shared"})
    assert (err.value.code, err.value.detail) == ("HANDLE_TAKEN", "the handle is taken")
    # the same agent may keep or set it again
    assert (await w.market.update(ADMIN, mine, {"handle": "shared"})).handle == "shared"


async def test_only_admins_change_a_profile() -> None:
    w = World()
    agent = await w.agent()
    calls = [
        w.market.update(MEMBER, agent, {"tagline": "x"}),
        w.market.set_capabilities(MEMBER, agent, ["x"]),
        w.market.delete(MEMBER, agent),
        w.market.set_avatar(MEMBER, agent, png()),
        w.market.delete_avatar(MEMBER, agent),
        w.market.generate_description(MEMBER, agent),
    ]
    for call in calls:
        with pytest.raises(PermissionDenied) as err:
            await call
        assert err.value.detail == "marketplace profiles are managed by the organization's admins"
    assert (await w.market.get(ADMIN, agent)).updated_at is None
    assert w.asked == []


async def test_delete_removes_the_profile_and_its_avatar() -> None:
    w = World()
    agent = await w.agent()
    with_avatar = await w.market.set_avatar(ADMIN, agent, png())
    assert with_avatar.avatar is not None
    assert await w.market.delete(ADMIN, agent) is True
    assert await w.market.delete(ADMIN, agent) is False
    assert await w.market.get(ADMIN, agent) == MarketplaceProfile(agent_id=agent, org_id="org-a")
    assert await w.market.public_avatar(agent, with_avatar.avatar.sha256) is None
    with pytest.raises(NotFound):
        await w.market.delete(OTHER, agent)


async def test_an_avatar_is_stored_reencoded_under_its_digest() -> None:
    w = World()
    agent = await w.agent()
    await w.market.update(ADMIN, agent, {"tagline": "kept"})
    w.clock.advance(7)
    profile = await w.market.set_avatar(ADMIN, agent, png())
    assert profile.avatar is not None
    assert profile.tagline == "kept"
    assert profile.updated_at == w.clock.now()
    found = await w.market.public_avatar(agent, profile.avatar.sha256)
    assert found is not None
    content_type, data = found
    assert (content_type, profile.avatar.content_type) == ("image/png", "image/png")
    assert hashlib.sha256(data).hexdigest() == profile.avatar.sha256
    assert avatar_path(profile) == f"/api/public/avatars/{agent}/{profile.avatar.sha256}"
    assert avatar_path(MarketplaceProfile(agent_id=agent, org_id="org-a")) is None
    assert await w.market.public_avatar(agent, "0" * 64) is None
    assert await w.market.public_avatar(uuid.uuid4(), profile.avatar.sha256) is None
    # refused pictures change nothing
    for bad in (b"text", png((1025, 1)), png((1, 1025))):
        with pytest.raises(ImageRefused):
            await w.market.set_avatar(ADMIN, agent, bad)
    assert await w.market.get(ADMIN, agent) == profile
    largest = await w.market.set_avatar(ADMIN, agent, png((1024, 1024)))
    assert largest.avatar is not None
    w.clock.advance(1)
    gone = await w.market.delete_avatar(ADMIN, agent)
    assert (gone.avatar, gone.updated_at, gone.tagline) == (None, w.clock.now(), "kept")
    assert await w.market.public_avatar(agent, largest.avatar.sha256) is None
    w.clock.advance(1)
    assert await w.market.delete_avatar(ADMIN, agent) == gone  # none: nothing changes


async def test_capabilities_found_are_once_each_in_order_and_at_most_thirty() -> None:
    w = World(["a", "b"], ["b", "c"], [f"n{i}" for i in range(40)])
    agent = await w.agent()
    found = await w.market.detect_capabilities(MEMBER, agent)
    assert w.sourced == [(MEMBER, agent)] * 3  # each source asked of this agent, as its caller
    assert found[:4] == ["a", "b", "c", "n0"]
    assert len(found) == 30
    assert (await w.market.get(ADMIN, agent)).capabilities == ()
    with pytest.raises(NotFound):
        await w.market.detect_capabilities(OTHER, agent)


async def test_a_description_is_asked_of_the_agents_model_and_not_stored() -> None:
    w = World(["Plans and tracks tasks", "Reads web pages"])
    agent = await w.agent(description="Finds books", stable_preamble="P" * 5000)
    text = await w.market.generate_description(ADMIN, agent)
    assert text == "A helpful agent."
    [(org, asked_agent, prompt)] = w.asked
    assert (org, asked_agent) == ("org-a", agent)
    assert "Name: Scout" in prompt
    assert "What its owner says of it: Finds books" in prompt
    assert "Its capabilities: Plans and tracks tasks, Reads web pages\n" in prompt
    assert "P" * 4000 in prompt
    assert "P" * 4001 not in prompt
    assert (await w.market.get(ADMIN, agent)).description == ""
    bare = await w.agent()
    w.answer = "x" * 5000
    assert await w.market.generate_description(ADMIN, bare) == "x" * 4000
    prompt = w.asked[-1][2]
    assert "What its owner says of it: (none)" in prompt
    assert "Its instructions:\n(none)" in prompt
    w2 = World()
    lone = await w2.agent()
    await w2.market.generate_description(ADMIN, lone)
    assert "Its capabilities: (none found)" in w2.asked[0][2]


class _Config:
    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


class _Named:
    def __init__(self, name: str) -> None:
        self.name = name
        self.server = self


class _Doc:
    def __init__(self, scope: str, agent_id: UUID | None) -> None:
        self.scope, self.agent_id = scope, agent_id


def _capabilities(**over: Any) -> tuple[AgentCapabilities, dict[str, Any]]:
    state: dict[str, Any] = {
        "web": _Config(fetch_enabled=False, search_enabled=False),
        "docs": [],
        "memory": _Config(enabled=False),
        "plan": _Config(enabled=False),
        "databases": [],
        "servers": [],
        "tools": [],
        "skills": [],
        **over,
    }

    def seen(who: Any, agent_id: Any) -> None:
        state.setdefault("asked", []).append((who, agent_id))

    class Reads:
        async def get(self, who: Principal, agent_id: UUID) -> Any:
            seen(who, agent_id)
            return state[self.key]

        def __init__(self, key: str) -> None:
            self.key = key

    class Docs:
        async def list_documents(self, who: Principal, *, status: str) -> Any:
            assert status == "ready"
            seen(who, None)
            return state["docs"]

    class Databases:
        async def attached(self, who: Principal, agent_id: UUID) -> Any:
            seen(who, agent_id)
            return state["databases"]

    class Servers:
        async def attached(self, who: Principal, kind: str, agent_id: UUID) -> Any:
            assert kind == "agent"
            seen(who, agent_id)
            return state["servers"]

    class Tools:
        async def delegated(self, who: Principal, agent_id: UUID) -> Any:
            seen(who, agent_id)
            return None, state["tools"]

    class Skills:
        async def attached(self, who: Principal, agent_id: UUID) -> Any:
            seen(who, agent_id)
            return state["skills"]

    source = AgentCapabilities(
        web=cast("Any", Reads("web")),
        knowledge=cast("Any", Docs()),
        memory=cast("Any", Reads("memory")),
        plan=cast("Any", Reads("plan")),
        integrations=cast("Any", Databases()),
        mcps=cast("Any", Servers()),
        webhook_tools=cast("Any", Tools()),
        skills=cast("Any", Skills()),
    )
    return source, state


async def test_capabilities_name_what_the_agent_is_given() -> None:
    agent = uuid.uuid4()
    source, state = _capabilities()
    assert await source(MEMBER, agent) == []
    # each read made as the caller, of this agent (the documents: the organization's list)
    assert state["asked"] == [(MEMBER, agent), (MEMBER, None)] + [(MEMBER, agent)] * 6
    state.update(
        web=_Config(fetch_enabled=True, search_enabled=True),
        memory=_Config(enabled=True),
        plan=_Config(enabled=True),
        databases=[_Named("shop"), _Named("crm")],
        servers=[_Named("GitHub"), _Named("GitHub")],
        tools=[_Named("lookup_order")],
        docs=[_Doc("agent", agent)],
        skills=[_Named("tea"), _Named("code-review")],
    )
    assert await source(ADMIN, agent) == [
        "Reads web pages",
        "Searches the web",
        "Answers from documents",
        "Remembers across conversations",
        "Plans and tracks tasks",
        "Queries the shop database",
        "Queries the crm database",
        "Uses GitHub",
        "Uses the lookup_order tool",
        "Has the code-review skill",
        "Has the tea skill",
    ]


@pytest.mark.parametrize(
    ("docs", "answers"),
    [
        ([], False),
        ([("org", None)], True),
        ([("agent", "other")], False),
        ([("thread", "other")], False),
        ([("agent", "this")], True),
        ([("thread", "this")], False),
    ],
)
async def test_documents_count_when_the_agent_may_search_them(
    docs: list[tuple[str, str | None]], answers: bool
) -> None:
    agent = uuid.uuid4()
    ids = {"this": agent, "other": uuid.uuid4(), None: None}
    source, _ = _capabilities(docs=[_Doc(scope, ids[a]) for scope, a in docs])
    assert ("Answers from documents" in await source(ADMIN, agent)) is answers
    only_search, _ = _capabilities(web=_Config(fetch_enabled=False, search_enabled=True))
    assert await only_search(ADMIN, agent) == ["Searches the web"]
