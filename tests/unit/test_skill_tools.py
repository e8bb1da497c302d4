"""Skills in a turn (use_cases/skills/bindings.py): an agent's bindings, checked and
replaced whole; the catalogue of its attached skills in the system prompt after the
stable preamble and before the overlays, sorted by name; ``load_skill`` answering a
skill's body, its files and one file; a runner's skills added for its agent steps;
an agent with no skills reads nothing more."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
import pytest

from agentsvc_core.entities import Principal, ToolCall, ToolProfile, Usage
from agentsvc_core.entities.skill import SkillBinding
from agentsvc_core.errors import InvalidInput, NotFound, PermissionDenied
from agentsvc_core.ports import Finished, ToolCallContext, ToolCallRequested, ToolSetup, UsageReport
from agentsvc_core.use_cases.server_tools import ToolHub
from agentsvc_core.use_cases.skills.bindings import LOAD_SKILL, SkillBindings, SkillTools
from agentsvc_core.use_cases.skills.content import content_of
from agentsvc_core.use_cases.turn.conversation import SendInput
from agentsvc_core.use_cases.turn.events import ToolResult
from tests.unit.skill_helpers import inline_skill, skill_md
from tests.unit.turn_world import BOX, ORG, WHO, Script, Tools, World, read_all, says, world

MEMBER = Principal(org_id=ORG, user_id="u", role="member", method="jwt")


class Counting:
    """The skill store, counting its reads."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.reads: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name in ("entries", "version", "get"):

            async def counted(*args: Any) -> Any:
                self.reads.append(name)
                return await attr(*args)

            return counted
        return attr


async def skill_world(*steps: list[Any], agent: dict[str, Any] | None = None) -> Any:
    """A turn world whose tools are the skills' source beside a plain ``other`` tool,
    over the world's storage: the world, the bindings, the source and the store
    that counts its reads."""
    made: dict[str, Any] = {}

    def tools_of(storage: Any) -> ToolHub:
        store = made["store"] = Counting(storage.skills)
        bindings = made["bindings"] = SkillBindings(storage.secrets, storage.agents, BOX, store)
        made["tools"] = SkillTools(bindings, store)
        return ToolHub([made["tools"], Tools("other")])  # Tools owns every name: last

    w = await world(Script(*steps) if steps else None, agent=agent, tools_of=tools_of)
    return w, made["bindings"], made["tools"], made["store"]


async def add(w: World, name: str, description: str = "does a thing", body: str = "steps") -> Any:
    skill = inline_skill(ORG, name, description, body)
    await w.storage.skills.add(skill)
    return skill


def system_of(w: World, n: int = 0) -> str:
    return w.model.requests[n].system or ""


async def turn(w: World, content: str = "hi", **msg: Any) -> list[Any]:
    return await read_all(
        await w.conversation.send(WHO, w.thread.id, SendInput(content=content, **msg))
    )


def load(arguments: dict[str, Any]) -> list[Any]:
    call = ToolCall(id="c1", name=LOAD_SKILL, arguments=arguments)
    return [ToolCallRequested(call), UsageReport(Usage()), Finished("tool_calls")]


# --- bindings ---------------------------------------------------------------------------


async def test_an_agents_bindings_are_checked_and_replaced_whole() -> None:
    w, bindings, _, _ = await skill_world()
    tea, mint = await add(w, "tea"), await add(w, "mint")
    assert (await bindings.get(MEMBER, w.agent.id)).skills == ()
    got = await bindings.set(
        WHO,
        w.agent.id,
        [
            SkillBinding(skill_id=mint.id, enabled=False),
            SkillBinding(skill_id=tea.id, pinned_version=1),
        ],
    )
    assert got.skills == (
        SkillBinding(skill_id=mint.id, pinned_version=None, enabled=False),
        SkillBinding(skill_id=tea.id, pinned_version=1, enabled=True),
    )
    assert (await bindings.get(MEMBER, w.agent.id)).skills == got.skills
    assert (await bindings.set(WHO, w.agent.id, [SkillBinding(skill_id=tea.id)])).skills == (
        SkillBinding(skill_id=tea.id),
    )
    for refused, error in (
        ([SkillBinding(skill_id=uuid.uuid4())], NotFound),
        ([SkillBinding(skill_id=tea.id, pinned_version=2)], InvalidInput),
        ([SkillBinding(skill_id=tea.id), SkillBinding(skill_id=tea.id)], InvalidInput),
        ([SkillBinding(skill_id=tea.id)] * 101, InvalidInput),
    ):
        with pytest.raises(error):
            await bindings.set(WHO, w.agent.id, refused)
    with pytest.raises(PermissionDenied):
        await bindings.set(MEMBER, w.agent.id, [])
    with pytest.raises(NotFound):
        await bindings.set(WHO, uuid.uuid4(), [])
    assert (await bindings.get(MEMBER, w.agent.id)).skills == (SkillBinding(skill_id=tea.id),)


async def test_another_organizations_skill_cannot_be_bound() -> None:
    w, bindings, _, _ = await skill_world()
    theirs = inline_skill("another-org", "tea")
    await w.storage.skills.add(theirs)
    with pytest.raises(NotFound):
        await bindings.set(WHO, w.agent.id, [SkillBinding(skill_id=theirs.id)])


# --- the catalogue ----------------------------------------------------------------------


async def test_no_skill_no_catalogue_no_tool_and_no_read() -> None:
    w, _, _, store = await skill_world(
        agent={"default_model": "local", "stable_preamble": "Be kind."}
    )
    await turn(w)
    assert system_of(w) == "Be kind."
    assert [t.name for t in w.model.requests[0].tools] == ["other"]
    assert store.reads == []  # the record came with the thread: nothing more was read


async def test_the_catalogue_follows_the_preamble_sorted_and_before_the_overlays() -> None:
    w, bindings, _, _ = await skill_world(
        agent={"default_model": "local", "stable_preamble": "Be kind."},
    )
    tea = await add(w, "tea", "Brew tea. Use for hot drinks.")
    coffee = await add(w, "coffee", "Brew coffee.")
    off = await add(w, "off-skill", "never shown")
    await bindings.set(
        WHO,
        w.agent.id,
        [
            SkillBinding(skill_id=tea.id),
            SkillBinding(skill_id=off.id, enabled=False),
            SkillBinding(skill_id=coffee.id),
        ],
    )
    await turn(w, system_prompt_overlay="Today is Friday.")
    system = system_of(w)
    assert system.startswith("Be kind.\n\n# Skills\n")
    assert system.endswith("\n\nToday is Friday.")
    catalogue_text = system.removeprefix("Be kind.\n\n").removesuffix("\n\nToday is Friday.")
    assert catalogue_text.startswith("# Skills\n")
    assert "call load_skill with its name" in catalogue_text
    assert catalogue_text.endswith("- coffee: Brew coffee.\n- tea: Brew tea. Use for hot drinks.")
    assert "never shown" not in system
    spec = next(t for t in w.model.requests[0].tools if t.name == LOAD_SKILL)
    assert spec.parameters["properties"]["name"]["enum"] == ["coffee", "tea"]
    assert spec.parameters["required"] == ["name"]
    # the next turn's prompt starts the same: the prompt cache holds
    await turn(w, "again")
    assert system_of(w, 1) == system.removesuffix("\n\nToday is Friday.")


async def test_a_disabled_skill_leaves_the_catalogue_and_a_profile_can_hide_it() -> None:
    w, bindings, _, _ = await skill_world(
        agent={
            "default_model": "local",
            "tool_profiles": {"plain": ToolProfile(tools=("other",))},
        }
    )
    tea = await add(w, "tea")
    await bindings.set(WHO, w.agent.id, [SkillBinding(skill_id=tea.id)])
    await turn(w, tool_profile="plain")
    assert "# Skills" not in system_of(w)  # load_skill is not offered, nor its catalogue
    await w.storage.skills.modify(
        ORG, tea.id, lambda s: msgspec.structs.replace(s, status="disabled")
    )
    await turn(w)
    assert "# Skills" not in system_of(w, 1)
    assert LOAD_SKILL not in [t.name for t in w.model.requests[1].tools]


# --- load_skill -------------------------------------------------------------------------


async def test_load_skill_answers_the_body_and_lists_the_files() -> None:
    w, bindings, _, _ = await skill_world(load({"name": "tea"}), says("done"))
    tea = inline_skill(ORG, "tea", "Brew tea.")
    content = content_of(
        {
            "SKILL.md": b"---\nname: tea\ndescription: Brew tea.\nallowed-tools: [web_fetch]\n"
            b"---\n# Tea\nSteep for 3 minutes.",
            "ref/temps.md": b"green: 80C",
        }
    )
    await w.storage.skills.add(msgspec.structs.replace(tea, content=content))
    await bindings.set(WHO, w.agent.id, [SkillBinding(skill_id=tea.id)])
    events = await turn(w)
    result = next(e for e in events if isinstance(e, ToolResult)).result
    assert result.startswith("# Skill tea (version 1)\nTools it expects: web_fetch\n")
    assert "# Tea\nSteep for 3 minutes." in result
    assert "- ref/temps.md (10 bytes)" in result
    # the model read it: the next call carries the result
    assert any("Steep for 3 minutes." in str(m.content) for m in w.model.requests[1].messages)


async def _call(
    w: World, tools: SkillTools, arguments: dict[str, Any], who: Principal = WHO
) -> str:
    return await tools.call(
        who, w.agent, LOAD_SKILL, arguments, ToolCallContext(tool_call_id="t", setup=None)
    )


async def test_load_skill_reads_a_file_and_refuses_what_is_not_there() -> None:
    w, bindings, tools, _ = await skill_world()
    tea = inline_skill(ORG, "tea")
    content = content_of(
        {
            "SKILL.md": skill_md("tea"),
            "a.md": b"alpha",
            "bin": b"\xff\xfe",
            "big.txt": b"x" * 100_001,
        }
    )
    await w.storage.skills.add(msgspec.structs.replace(tea, content=content))
    await bindings.set(WHO, w.agent.id, [SkillBinding(skill_id=tea.id)])
    assert await _call(w, tools, {"name": "tea", "path": "a.md"}) == "alpha"
    assert (
        await _call(w, tools, {"name": "tea", "path": "bin"}) == "error: bin is not text (2 bytes)"
    )
    big = await _call(w, tools, {"name": "tea", "path": "big.txt"})
    assert big == "x" * 100_000 + "\n[cut: the file has 100001 characters]"
    assert await _call(w, tools, {"name": "tea", "path": "no.md"}) == (
        "error: the skill 'tea' has no file 'no.md'"
    )
    assert await _call(w, tools, {"name": "mint"}) == "error: you have no skill named 'mint'"
    said = await _call(w, tools, {"name": "tea", "extra": 1})
    assert said.startswith("error: invalid arguments")
    assert (await _call(w, tools, {})).startswith("error: invalid arguments")
    assert (
        await tools.call(WHO, w.agent, "other", {}, ToolCallContext(tool_call_id="t"))
        == "error: no skill tool named 'other'"
    )


async def test_a_pinned_binding_loads_its_version_after_a_newer_one() -> None:
    w, bindings, tools, _ = await skill_world()
    tea = await add(w, "tea", body="version one")
    newer = content_of({"SKILL.md": skill_md("tea", "newer", "version two")})
    await w.storage.skills.modify(
        ORG, tea.id, lambda s: msgspec.structs.replace(s, version=2, content=newer)
    )
    await bindings.set(WHO, w.agent.id, [SkillBinding(skill_id=tea.id, pinned_version=1)])
    assert "version one" in await _call(w, tools, {"name": "tea"})
    await bindings.set(WHO, w.agent.id, [SkillBinding(skill_id=tea.id)])
    loaded = await _call(w, tools, {"name": "tea"})
    assert loaded.startswith("# Skill tea (version 2)")
    assert "version two" in loaded


async def test_a_skill_deleted_meanwhile_is_no_longer_offered() -> None:
    w, bindings, tools, _ = await skill_world()
    tea = await add(w, "tea")
    await bindings.set(WHO, w.agent.id, [SkillBinding(skill_id=tea.id)])
    await w.storage.skills.delete(ORG, tea.id)
    assert await tools.list_tools(WHO, w.agent) == []
    assert await _call(w, tools, {"name": "tea"}) == "error: you have no skill named 'tea'"


# --- a runner's skills ------------------------------------------------------------------


async def test_an_agent_step_gets_its_runners_skills_beside_the_agents_which_win() -> None:
    w, bindings, _, _ = await skill_world()
    tea, mint = await add(w, "tea", "agent's tea"), await add(w, "mint", "runner's mint")
    await bindings.set(WHO, w.agent.id, [SkillBinding(skill_id=tea.id)])
    turn_ = await w.conversation.send(
        WHO,
        w.thread.id,
        SendInput(content="hi"),
        # the runner's own binding of tea (disabled) gives way to the agent's
        extra_skills=(SkillBinding(skill_id=tea.id, enabled=False), SkillBinding(skill_id=mint.id)),
    )
    await read_all(turn_)
    assert system_of(w).endswith("- mint: runner's mint\n- tea: agent's tea")
    assert LOAD_SKILL in [t.name for t in w.model.requests[0].tools]


async def test_a_runners_skills_alone_make_the_catalogue() -> None:
    w, _, tools, _ = await skill_world()
    mint = await add(w, "mint", "runner's mint")
    setup = ToolSetup(skills=(SkillBinding(skill_id=mint.id),))
    [spec] = await tools.list_tools(WHO, w.agent, setup)
    assert spec.instructions is not None
    assert spec.instructions.endswith("- mint: runner's mint")
    assert await tools.list_tools(WHO, w.agent, ToolSetup()) == []
