"""Skills given to agents, and the turn's side of them (use_cases/skills/bindings.py,
docs/skills.md "Giving it to an agent" and "How the model sees skills"): the
bounds and refusals of a set of bindings, the catalogue's lines, the ``load_skill``
tool's arguments and answers (the header, the tools, the body, the files with their
sizes, one file of at most 100,000 characters) and what it says when it cannot."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
import pytest

from agentsvc_core.entities import Principal
from agentsvc_core.entities.skill import SkillBinding, SkillEntry
from agentsvc_core.errors import InvalidInput, NotFound, PermissionDenied
from agentsvc_core.ports import ToolCallContext, ToolSetup
from agentsvc_core.use_cases.server_tools import ToolHub
from agentsvc_core.use_cases.skills.bindings import (
    LOAD_SKILL,
    SkillBindings,
    SkillTools,
    catalogue,
)
from agentsvc_core.use_cases.skills.content import content_of
from tests.unit.skill_helpers import inline_skill, skill_md, stored_skills
from tests.unit.turn_world import BOX, ORG, WHO, Tools, World, world

MEMBER = Principal(org_id=ORG, user_id="u", role="member", method="jwt")


class Store:
    """The skill store, with versions that can go missing and reads that can fail."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.gone: set[int] = set()  # versions answered as None
        self.failure: Exception | None = None  # raised by version()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def version(self, org_id: str, skill_id: uuid.UUID, version: int) -> Any:
        if self.failure is not None:
            raise self.failure
        if version in self.gone:
            return None
        return await self._store.version(org_id, skill_id, version)


async def skill_world() -> tuple[World, SkillBindings, SkillTools, Store]:
    made: dict[str, Any] = {}

    def tools_of(storage: Any) -> ToolHub:
        store = made["store"] = Store(storage.skills)
        bindings = made["bindings"] = SkillBindings(storage.secrets, storage.agents, BOX, store)
        made["tools"] = SkillTools(bindings, store)
        return ToolHub([made["tools"], Tools("other")])

    w = await world(tools_of=tools_of)
    return w, made["bindings"], made["tools"], made["store"]


async def add(w: World, name: str, files: dict[str, bytes] | None = None, **front: str) -> Any:
    skill = inline_skill(ORG, name)
    head = "".join(f"{k}: {v}\n" for k, v in front.items())
    md = f"---\nname: {name}\ndescription: does {name}\n{head}---\n# {name}\nThe steps.".encode()
    content = content_of({"SKILL.md": md, **(files or {})})
    skill = msgspec.structs.replace(skill, content=content)
    await w.storage.skills.add(skill)
    return skill


async def load(w: World, tools: SkillTools, **arguments: Any) -> str:
    return await tools.call(
        WHO, w.agent, LOAD_SKILL, arguments, ToolCallContext(tool_call_id="t", setup=None)
    )


async def refused(bindings: SkillBindings, w: World, given: Any) -> InvalidInput:
    with pytest.raises(InvalidInput) as caught:
        await bindings.set(WHO, w.agent.id, given)
    return caught.value


# --- bindings ---------------------------------------------------------------------------


async def test_at_most_100_bindings() -> None:
    w, bindings, _, _ = await skill_world()
    ids = await stored_skills(w.storage.skills, ORG, 101)
    hundred = [SkillBinding(skill_id=i) for i in ids[:100]]
    assert len((await bindings.set(WHO, w.agent.id, hundred)).skills) == 100
    error = await refused(bindings, w, [*hundred, SkillBinding(skill_id=ids[100])])
    assert (error.field, error.problem) == ("skills", "at most 100")
    assert len((await bindings.get(WHO, w.agent.id)).skills) == 100


async def test_a_body_without_bindings_and_a_skill_given_twice_are_refused() -> None:
    w, bindings, _, _ = await skill_world()
    tea, mint = await add(w, "tea"), await add(w, "mint")
    error = await refused(bindings, w, None)
    assert (error.field, error.problem) == ("skills", "give either skills or skillIds")
    twice = [
        SkillBinding(skill_id=tea.id),
        SkillBinding(skill_id=mint.id),
        SkillBinding(skill_id=tea.id, pinned_version=1),
    ]
    error = await refused(bindings, w, twice)
    assert (error.field, error.problem) == ("skills", f"skill {tea.id} is given twice")
    assert (await bindings.get(WHO, w.agent.id)).skills == ()


async def test_a_pin_must_name_a_version_the_skill_has() -> None:
    w, bindings, _, store = await skill_world()
    tea = await add(w, "tea")
    newer = content_of({"SKILL.md": skill_md("tea", body="two")})
    await w.storage.skills.modify(
        ORG, tea.id, lambda s: msgspec.structs.replace(s, version=2, content=newer)
    )
    for pin in (1, 2):
        got = await bindings.set(
            WHO, w.agent.id, [SkillBinding(skill_id=tea.id, pinned_version=pin)]
        )
        assert got.skills[0].pinned_version == pin
    for pin in (0, -1, 3):
        error = await refused(bindings, w, [SkillBinding(skill_id=tea.id, pinned_version=pin)])
        assert (error.field, error.problem) == ("pinnedVersion", f"skill tea has no version {pin}")
    store.gone.add(1)  # a version the store no longer has
    error = await refused(bindings, w, [SkillBinding(skill_id=tea.id, pinned_version=1)])
    assert error.problem == "skill tea has no version 1"


async def test_only_admins_set_bindings_and_another_orgs_agent_is_not_found_first() -> None:
    w, bindings, _, _ = await skill_world()
    with pytest.raises(PermissionDenied) as caught:
        await bindings.set(MEMBER, w.agent.id, [])
    assert caught.value.detail == "an agent's skills are set by the organization's admins"
    for given in (None, [SkillBinding(skill_id=uuid.uuid4())]):
        with pytest.raises(NotFound) as not_found:
            await bindings.set(WHO, uuid.uuid4(), given)
        assert "agent" in not_found.value.detail


# --- the catalogue and the tool's spec --------------------------------------------------


def entry(name: str, description: str) -> SkillEntry:
    return SkillEntry(skill_id=uuid.uuid4(), name=name, description=description, version=1)


def test_the_catalogue_is_a_heading_a_line_on_load_skill_and_a_line_per_skill() -> None:
    text = catalogue([entry("tea", "Brew tea."), entry("coffee", "Brew coffee."), entry("b", "B")])
    assert text.split("\n") == [
        "# Skills",
        "You have skills: instructions for particular tasks. When a task matches a"
        " skill's description, call load_skill with its name and follow what it says.",
        "",
        "- b: B",
        "- coffee: Brew coffee.",
        "- tea: Brew tea.",
    ]


async def test_load_skill_takes_a_name_of_the_attached_skills_and_an_optional_path() -> None:
    w, bindings, tools, _ = await skill_world()
    tea, mint = await add(w, "tea"), await add(w, "mint")
    await bindings.set(
        WHO, w.agent.id, [SkillBinding(skill_id=tea.id), SkillBinding(skill_id=mint.id)]
    )
    [spec] = await tools.list_tools(WHO, w.agent)
    assert spec.name == LOAD_SKILL
    assert "path" in spec.description
    params = spec.parameters
    assert params["type"] == "object"
    assert params["properties"]["name"]["type"] == "string"
    assert params["properties"]["name"]["enum"] == ["mint", "tea"]
    assert params["properties"]["path"]["type"] == "string"
    # each argument is described to the model (JSON Schema's `description`)
    for argument in ("name", "path"):
        assert set(params["properties"][argument]) >= {"type", "description"}
        assert params["properties"][argument]["description"].strip()
    assert set(params["properties"]["path"]) == {"type", "description"}
    assert set(params["properties"]["name"]) == {"type", "enum", "description"}
    assert params["required"] == ["name"]
    assert params["additionalProperties"] is False
    assert spec.instructions == catalogue([entry("tea", "does tea"), entry("mint", "does mint")])
    assert tools.owns(LOAD_SKILL)
    assert not tools.owns("other")
    assert not tools.owns("load_skills")
    assert not tools.is_extension(LOAD_SKILL)  # traced as a tool of the service, not MCP
    assert tools.kinds == ("skills",)


# --- load_skill's answers ---------------------------------------------------------------


async def test_load_skill_answers_header_tools_body_and_files_with_sizes() -> None:
    w, bindings, tools, _ = await skill_world()
    tea = await add(
        w,
        "tea",
        {"ref/temps.md": b"green: 80C", "a.md": b"A", "empty.md": b""},
        **{"allowed-tools": "Read Write web_fetch"},
    )
    await bindings.set(WHO, w.agent.id, [SkillBinding(skill_id=tea.id)])
    assert await load(w, tools, name="tea") == (
        "# Skill tea (version 1)\n"
        "Tools it expects: Read, Write, web_fetch\n"
        "\n# tea\nThe steps.\n"
        "\n## Files of this skill (load one with path)"
        "\n- a.md (1 bytes)\n- empty.md (0 bytes)\n- ref/temps.md (10 bytes)\n"
    )


async def test_a_skill_without_tools_or_files_is_its_header_and_body() -> None:
    w, bindings, tools, _ = await skill_world()
    mint = await add(w, "mint")
    await bindings.set(WHO, w.agent.id, [SkillBinding(skill_id=mint.id)])
    assert await load(w, tools, name="mint") == "# Skill mint (version 1)\n\n# mint\nThe steps.\n"


async def test_a_file_of_exactly_100000_characters_is_whole_and_counted_in_characters() -> None:
    w, bindings, tools, _ = await skill_world()
    text = "é" * 100_000  # 200,000 bytes, 100,000 characters
    tea = await add(w, "tea", {"long.md": text.encode(), "longer.md": (text + "e").encode()})
    await bindings.set(WHO, w.agent.id, [SkillBinding(skill_id=tea.id)])
    assert await load(w, tools, name="tea", path="long.md") == text
    assert await load(w, tools, name="tea", path="longer.md") == (
        text + "\n[cut: the file has 100001 characters]"
    )


async def test_a_version_gone_meanwhile_or_a_failed_read_is_said() -> None:
    w, bindings, tools, store = await skill_world()
    tea = await add(w, "tea")
    await bindings.set(WHO, w.agent.id, [SkillBinding(skill_id=tea.id)])
    store.gone.add(1)
    assert await load(w, tools, name="tea") == "error: the skill 'tea' is gone"
    assert await load(w, tools, name="tea", path="a.md") == "error: the skill 'tea' is gone"
    store.gone.clear()
    store.failure = NotFound("skill not found")
    assert await load(w, tools, name="tea") == "error: skill not found"


async def test_invalid_arguments_are_said() -> None:
    w, bindings, tools, _ = await skill_world()
    tea = await add(w, "tea")
    await bindings.set(WHO, w.agent.id, [SkillBinding(skill_id=tea.id)])
    said = await load(w, tools, name=3)
    assert said.startswith("error: invalid arguments: ")
    assert "Expected `str`" in said


async def test_a_runners_skill_is_loaded_in_an_agent_step() -> None:
    w, bindings, tools, _ = await skill_world()
    tea, mint = await add(w, "tea"), await add(w, "mint")
    await bindings.set(WHO, w.agent.id, [SkillBinding(skill_id=tea.id)])
    setup = ToolSetup(skills=(SkillBinding(skill_id=mint.id),))
    ctx = ToolCallContext(tool_call_id="t", setup=setup)
    said = await tools.call(WHO, w.agent, LOAD_SKILL, {"name": "mint"}, ctx)
    assert said.startswith("# Skill mint (version 1)")
    # in a turn the agent's bindings are the turn's own read (none in this one: it
    # holds no record), not read again: only the runner's mint is offered
    [spec] = await tools.list_tools(WHO, w.agent, setup)
    assert spec.parameters["properties"]["name"]["enum"] == ["mint"]
    said = await tools.call(WHO, w.agent, LOAD_SKILL, {"name": "tea"}, ctx)
    assert said == "error: you have no skill named 'tea'"
    # outside a turn (no setup) they are read: tea is the agent's
    assert (await load(w, tools, name="tea")).startswith("# Skill tea (version 1)")
