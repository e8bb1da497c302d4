"""Agent use cases on the in-memory adapter, checked against a plain model."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from agentsvc_adapters.clock import SystemClock
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_core.entities import Principal, ToolProfile
from agentsvc_core.errors import InvalidInput, NotFound
from agentsvc_core.use_cases import AgentChanges, AgentDraft, Agents

ORG_A = Principal(org_id="org-a", method="api_key")
ORG_B = Principal(org_id="org-b", method="api_key")

# Any text but NUL (which the domain refuses) and lone surrogates (not encodable).
text = st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"]))
names = text.filter(lambda s: s.strip()).map(lambda s: s[:256])
# Long text, drawn cheaply: Hypothesis draws a text one character at a time, and
# 5,000-9,000 of them cost some 40 ms an example (most of this file's time). A drawn
# piece of any characters (the same alphabet as ``text``) repeated to a drawn length
# is as long, and holds what the piece holds.
long_text = st.builds(
    lambda piece, size: (piece * (size // len(piece) + 1))[:size],
    st.text(
        st.characters(exclude_characters="\x00", exclude_categories=["Cs"]),
        min_size=1,
        max_size=300,
    ),
    st.integers(min_value=5000, max_value=9000),
)
models = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,40}", fullmatch=True)
profiles = st.dictionaries(
    st.text(
        st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=10
    ).filter(lambda s: s.strip()),
    st.builds(
        ToolProfile,
        tools=st.lists(st.from_regex(r"[a-z][a-z0-9_]{0,20}", fullmatch=True), max_size=4).map(
            tuple
        ),
        description=st.text(max_size=30).filter(lambda s: "\x00" not in s),
    ),
    max_size=3,
)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def agents() -> Agents:
    return Agents(MemoryStorage().agents, SystemClock(), default_model="local")


@given(name=names, description=text.map(lambda s: s[:10_000]), model=models)
def test_create_round_trips_text_exactly(name: str, description: str, model: str) -> None:
    uc = agents()

    async def go() -> None:
        created = await uc.create(
            ORG_A, AgentDraft(name=name, description=description, default_model=model)
        )
        got = await uc.get(ORG_A, created.id)
        assert (got.name, got.description, got.default_model) == (name, description, model)

    run(go())


@given(description=long_text)
def test_long_unicode_descriptions_round_trip(description: str) -> None:
    uc = agents()

    async def go() -> None:
        created = await uc.create(ORG_A, AgentDraft(name="n", description=description))
        assert (await uc.get(ORG_A, created.id)).description == description

    run(go())


def test_default_model_applies_when_omitted() -> None:
    uc = agents()
    created = run(uc.create(ORG_A, AgentDraft(name="n")))
    assert created.default_model == "local"


@pytest.mark.parametrize(
    ("draft", "field"),
    [
        (AgentDraft(name="   "), "name"),
        (AgentDraft(name="a\x00b"), "name"),
        (AgentDraft(name="n", description="x\x00"), "description"),
        (AgentDraft(name="n", stable_preamble="\x00"), "stable_preamble"),
        (AgentDraft(name="x" * 257), "name"),
        (AgentDraft(name="n", default_model="has space"), "default_model"),
        (AgentDraft(name="n", default_profile="p"), "default_profile"),
        (AgentDraft(name="n", runtime_provider="other"), "runtime_provider"),
    ],
)
def test_invalid_drafts_name_the_field(draft: AgentDraft, field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        run(agents().create(ORG_A, draft))
    assert err.value.field == field


def test_other_orgs_agent_is_not_found() -> None:
    uc = agents()

    async def go() -> None:
        created = await uc.create(ORG_A, AgentDraft(name="mine"))
        with pytest.raises(NotFound):
            await uc.get(ORG_B, created.id)
        with pytest.raises(NotFound):
            await uc.update(ORG_B, created.id, AgentChanges(name="stolen"))
        with pytest.raises(NotFound):
            await uc.delete(ORG_B, created.id)
        assert await uc.list(ORG_B) == []
        assert (await uc.get(ORG_A, created.id)).name == "mine"

    run(go())


def test_failed_update_changes_nothing() -> None:
    uc = agents()

    async def go() -> None:
        created = await uc.create(ORG_A, AgentDraft(name="keep"))
        with pytest.raises(InvalidInput):
            await uc.update(ORG_A, created.id, AgentChanges(name="new", default_profile="nope"))
        assert await uc.get(ORG_A, created.id) == created

    run(go())


changes = st.builds(
    AgentChanges,
    name=st.one_of(st.just(msgspec.UNSET), names),
    description=st.one_of(st.just(msgspec.UNSET), text.map(lambda s: s[:200])),
    stable_preamble=st.one_of(st.just(msgspec.UNSET), text.map(lambda s: s[:200])),
    default_model=st.one_of(st.just(msgspec.UNSET), models),
    tool_profiles=st.one_of(st.just(msgspec.UNSET), st.none(), profiles),
    default_profile=st.just(msgspec.UNSET),
    runtime_provider=st.one_of(
        st.just(msgspec.UNSET), st.none(), st.sampled_from(["native", "alternative"])
    ),
)


class AgentLifecycle(RuleBasedStateMachine):
    """Random create / patch / delete sequences; a dict of expected fields is the model."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.uc = agents()
        self.model: dict[UUID, dict[str, Any]] = {}

    def teardown(self) -> None:
        self.loop.close()

    def do(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    @initialize()
    def start(self) -> None:
        assert self.do(self.uc.list(ORG_A)) == []

    @rule(name=names, model_id=models)
    def create(self, name: str, model_id: str) -> None:
        agent = self.do(self.uc.create(ORG_A, AgentDraft(name=name, default_model=model_id)))
        self.model[agent.id] = {
            "name": name,
            "description": "",
            "stable_preamble": "",
            "default_model": model_id,
            "tool_profiles": None,
            "default_profile": None,
            "runtime_provider": None,
        }

    @rule(data=st.data(), change=changes)
    def patch(self, data: st.DataObject, change: AgentChanges) -> None:
        if not self.model:
            return
        agent_id = data.draw(st.sampled_from(list(self.model)))
        expected = dict(self.model[agent_id])
        expected.update(change.supplied())
        if expected["tool_profiles"] is None or expected["default_profile"] not in (
            expected["tool_profiles"] or {}
        ):
            expected["default_profile"] = None
            # A default profile dropped with its profiles is an error, not a silent clear.
            if self.model[agent_id]["default_profile"] is not None:
                with pytest.raises(InvalidInput):
                    self.do(self.uc.update(ORG_A, agent_id, change))
                return
        self.do(self.uc.update(ORG_A, agent_id, change))
        self.model[agent_id] = expected

    @rule(data=st.data())
    def set_default_profile(self, data: st.DataObject) -> None:
        candidates = [i for i, m in self.model.items() if m["tool_profiles"]]
        if not candidates:
            return
        agent_id = data.draw(st.sampled_from(candidates))
        profile = data.draw(st.sampled_from(sorted(self.model[agent_id]["tool_profiles"])))
        self.do(self.uc.update(ORG_A, agent_id, AgentChanges(default_profile=profile)))
        self.model[agent_id]["default_profile"] = profile

    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        if not self.model:
            return
        agent_id = data.draw(st.sampled_from(list(self.model)))
        self.do(self.uc.delete(ORG_A, agent_id))
        del self.model[agent_id]
        with pytest.raises(NotFound):
            self.do(self.uc.get(ORG_A, agent_id))

    @invariant()
    def storage_matches_model(self) -> None:
        stored = {a.id: a for a in self.do(self.uc.list(ORG_A))}
        assert set(stored) == set(self.model)
        for agent_id, fields in self.model.items():
            agent = stored[agent_id]
            for field, value in fields.items():
                assert getattr(agent, field) == value, field


TestAgentLifecycle = AgentLifecycle.TestCase
