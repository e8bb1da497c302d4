from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentsvc_adapters.clock import SystemClock
from agentsvc_core.entities import Agent, Principal, ToolProfile
from agentsvc_core.entities.agent import TemplateRef
from agentsvc_core.entities.model_params import JsonSchemaFormat, ModelParams, ResponseFormat
from agentsvc_core.errors import InvalidInput, NotFound
from agentsvc_core.use_cases import AgentChanges, AgentDraft, Agents
from tests.contract.conftest import Backend, now

text = st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"]))
# 20,000-30,000 characters, drawn cheaply: Hypothesis draws a text one character at a
# time (and 25,000 of them cost more than the round trip they test), so a drawn piece
# of any characters is repeated to a drawn length
long_text = st.builds(
    lambda piece, size: (piece * (size // len(piece) + 1))[:size],
    st.text(
        st.characters(exclude_characters="\x00", exclude_categories=["Cs"]),
        min_size=1,
        max_size=300,
    ),
    st.integers(min_value=20_000, max_value=30_000),
)
profiles = st.dictionaries(
    text.filter(lambda s: s.strip()).map(lambda s: s[:64]),
    st.builds(
        ToolProfile,
        tools=st.lists(text.filter(lambda s: s.strip()).map(lambda s: s[:50]), max_size=3).map(
            tuple
        ),
        description=text.map(lambda s: s[:100]),
    ),
    max_size=3,
)


def agent_in(org: str, **over: object) -> Agent:
    t = now()
    base = Agent(
        id=uuid.uuid4(),
        org_id=org,
        name="n",
        description="",
        stable_preamble="",
        default_model="local",
        created_at=t,
        updated_at=t,
    )
    return msgspec.structs.replace(base, **over)


@given(
    name=text.filter(lambda s: s.strip()).map(lambda s: s[:256]),
    description=text,
    preamble=st.one_of(text, long_text),
    tool_profiles=st.one_of(st.none(), profiles),
    runtime=st.sampled_from([None, "native", "alternative"]),
    approval_minutes=st.integers(min_value=1, max_value=10_080),
)
def test_agents_round_trip_exactly(
    backend: Backend,
    name: str,
    description: str,
    preamble: str,
    tool_profiles: dict[str, ToolProfile] | None,
    runtime: str | None,
    approval_minutes: int,
) -> None:
    org = backend.fresh_org()
    agent = agent_in(
        org,
        name=name,
        description=description,
        stable_preamble=preamble,
        tool_profiles=tool_profiles,
        default_profile=next(iter(tool_profiles), None) if tool_profiles else None,
        runtime_provider=runtime,
        approval_timeout_minutes=approval_minutes,
    )
    repo = backend.storage.agents
    backend.run(repo.add, agent)
    got = backend.run(repo.get, org, agent.id)
    assert got == agent
    # profile order is kept, not only the mapping
    assert list((got.tool_profiles or {}).items()) == list((tool_profiles or {}).items())
    assert backend.run(repo.list, org) == [agent]


model_params = st.one_of(
    st.none(),
    st.builds(
        ModelParams,
        temperature=st.one_of(st.none(), st.floats(0, 2)),
        top_p=st.one_of(st.none(), st.floats(0, 1)),
        max_output_tokens=st.one_of(st.none(), st.integers(1, 128_000)),
        stop=st.one_of(
            st.none(), st.lists(text.filter(bool).map(lambda s: s[:200]), max_size=4).map(tuple)
        ),
        response_format=st.one_of(
            st.none(),
            st.just(ResponseFormat(type="text")),
            st.builds(
                lambda name, title, strict: ResponseFormat(
                    type="json_schema",
                    json_schema=JsonSchemaFormat(
                        name=name,
                        schema={"type": "object", "title": title, "properties": {title: {}}},
                        strict=strict,
                    ),
                ),
                st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True),
                text.map(lambda s: s[:100]),
                st.one_of(st.none(), st.booleans()),
            ),
        ),
    ),
)


@given(params=model_params)
def test_an_agents_model_parameters_round_trip_and_change(
    backend: Backend, params: ModelParams | None
) -> None:
    org = backend.fresh_org()
    agent = agent_in(org, model_params=params)
    repo = backend.storage.agents
    backend.run(repo.add, agent)
    assert backend.run(repo.get, org, agent.id) == agent
    changed = ModelParams(temperature=0.5) if params is None else None
    got = backend.run(
        lambda: repo.modify(
            org, agent.id, lambda a: msgspec.structs.replace(a, model_params=changed)
        )
    )
    assert got.model_params == changed
    assert backend.run(repo.get, org, agent.id).model_params == changed


def test_timestamps_keep_microseconds_and_utc(backend: Backend) -> None:
    org = backend.fresh_org()
    t = now().replace(microsecond=123456)
    agent = agent_in(org, created_at=t, updated_at=t + timedelta(microseconds=1))
    backend.run(backend.storage.agents.add, agent)
    got = backend.run(backend.storage.agents.get, org, agent.id)
    assert got.created_at == t
    assert got.created_at.utcoffset() == timedelta(0)
    assert got.updated_at - got.created_at == timedelta(microseconds=1)


def test_other_orgs_agents_are_invisible(backend: Backend) -> None:
    repo = backend.storage.agents
    org, other = backend.fresh_org(), backend.fresh_org()
    agent = agent_in(org)
    backend.run(repo.add, agent)
    for call in (repo.get, repo.delete):
        with pytest.raises(NotFound):
            backend.run(call, other, agent.id)
    with pytest.raises(NotFound):
        backend.run(repo.modify, other, agent.id, lambda a: a)
    assert backend.run(repo.list, other) == []
    assert backend.run(repo.get, org, agent.id) == agent


def test_list_is_oldest_first(backend: Backend) -> None:
    repo = backend.storage.agents
    org = backend.fresh_org()
    t = now()
    made = [agent_in(org, name=f"a{i}", created_at=t + timedelta(seconds=i)) for i in (2, 0, 1)]
    for a in made:
        backend.run(repo.add, a)
    assert [a.name for a in backend.run(repo.list, org)] == ["a0", "a1", "a2"]


def test_delete_then_not_found(backend: Backend) -> None:
    repo = backend.storage.agents
    org = backend.fresh_org()
    agent = agent_in(org)
    backend.run(repo.add, agent)
    backend.run(repo.delete, org, agent.id)
    with pytest.raises(NotFound):
        backend.run(repo.get, org, agent.id)
    with pytest.raises(NotFound):
        backend.run(repo.delete, org, agent.id)


def test_a_failing_change_stores_nothing(backend: Backend) -> None:
    repo = backend.storage.agents
    org = backend.fresh_org()
    agent = agent_in(org)
    backend.run(repo.add, agent)

    def boom(a: Agent) -> Agent:
        raise InvalidInput("name", "no")

    with pytest.raises(InvalidInput):
        backend.run(repo.modify, org, agent.id, boom)
    assert backend.run(repo.get, org, agent.id) == agent


def test_concurrent_writers_lose_no_update(backend: Backend) -> None:
    """Thirty concurrent PATCHes of one agent, each appending one mark: all land."""
    repo = backend.storage.agents
    org = backend.fresh_org()
    agent = agent_in(org)
    backend.run(repo.add, agent)

    async def race() -> None:
        async def append(i: int) -> None:
            await repo.modify(
                org,
                agent.id,
                lambda a: msgspec.structs.replace(a, description=a.description + f"[{i}]"),
            )

        await asyncio.gather(*(append(i) for i in range(30)))

    backend.run(race)
    final = backend.run(repo.get, org, agent.id).description
    assert sorted(final.strip("[]").split("][")) == sorted(str(i) for i in range(30))


@pytest.mark.parametrize(
    "draft",
    [
        AgentDraft(name="nul\x00name"),
        AgentDraft(name="ok", description="nul \x00 here"),
        AgentDraft(name="ok", stable_preamble="\x00"),
        AgentDraft(
            name="ok",
            tool_profiles={"p": ToolProfile(tools=("t\x00",))},
        ),
    ],
)
def test_the_domain_refuses_nul_before_any_adapter_sees_it(
    backend: Backend, draft: AgentDraft
) -> None:
    uc = Agents(backend.storage.agents, SystemClock(), "local")
    who = Principal(org_id=backend.fresh_org(), method="api_key")
    with pytest.raises(InvalidInput):
        backend.run(uc.create, who, draft)
    assert backend.run(uc.list, who) == []


def test_use_case_patch_over_both_adapters(backend: Backend) -> None:
    uc = Agents(backend.storage.agents, SystemClock(), "local")
    who = Principal(org_id=backend.fresh_org(), method="api_key")
    a = backend.run(uc.create, who, AgentDraft(name="x", description="keep"))
    b = backend.run(uc.update, who, a.id, AgentChanges(name="y"))
    assert (b.name, b.description, b.created_at) == ("y", "keep", a.created_at)
    assert backend.run(uc.get, who, a.id) == b


def test_the_template_an_agent_was_made_from_round_trips(backend: Backend) -> None:
    org = backend.fresh_org()
    made = agent_in(org, template=TemplateRef(id="sql-analyst", version=2))
    backend.run(backend.storage.agents.add, made)
    assert backend.run(backend.storage.agents.get, org, made.id) == made
    changed = backend.run(
        backend.storage.agents.modify,
        org,
        made.id,
        lambda a: msgspec.structs.replace(a, name="renamed"),
    )
    assert changed.template == TemplateRef(id="sql-analyst", version=2)
    assert backend.run(backend.storage.agents.get, org, made.id) == changed
    plain = agent_in(org)
    backend.run(backend.storage.agents.add, plain)
    assert backend.run(backend.storage.agents.get, org, plain.id).template is None
