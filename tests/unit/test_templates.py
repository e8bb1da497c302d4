"""Official templates (docs/templates.md) over the memory storage: every shipped
template makes an agent with exactly its configurations; the list filters by
category and words; overrides go over the template's fields; a refused
configuration deletes the agent made for it; only admins use templates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import msgspec
import pytest

from agentsvc_adapters.memory import MemoryStorage
from agentsvc_adapters.skill_registry import PackagedSkills
from agentsvc_adapters.templates import PackagedTemplates
from agentsvc_core.entities import Principal, ToolProfile
from agentsvc_core.entities.agent import TemplateRef
from agentsvc_core.entities.template import TEMPLATE_CONFIGS, Template, TemplateAgent
from agentsvc_core.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from agentsvc_core.use_cases import AgentChanges, AgentDraft, Agents
from agentsvc_core.use_cases.memories.memories import MemorySettings
from agentsvc_core.use_cases.org_settings import CompactionSettings
from agentsvc_core.use_cases.plan_tools import PlanSettings
from agentsvc_core.use_cases.projects import ProjectDraft, Projects
from agentsvc_core.use_cases.skills.bindings import SkillBindings, registry_giver
from agentsvc_core.use_cases.skills.skills import SkillDraft, Skills
from agentsvc_core.use_cases.templates import TemplateOverrides, Templates
from agentsvc_core.use_cases.web import WebSettings
from tests.unit.turn_world import BOX, Clock

ADMIN = Principal(org_id="org-a", method="api_key")
MEMBER = Principal(org_id="org-a", method="jwt", user_id="mia")
SHIPPED = PackagedTemplates().templates()


class Catalogue:
    def __init__(self, *templates: Template) -> None:
        self._templates = templates

    def templates(self) -> Sequence[Template]:
        return self._templates


class NoSource:
    """Templates install the registry's skills: nothing is ever fetched."""

    async def fetch_git(self, url: str, path: str, ref: str | None) -> Any:
        raise AssertionError("a template fetched a skill")

    async def fetch_url(self, url: str) -> Any:
        raise AssertionError("a template fetched a skill")


class World:
    def __init__(self, catalogue: Any = None) -> None:
        s = self.storage = MemoryStorage()
        clock = Clock()
        self.agents = Agents(s.agents, clock, "local", projects=s.projects)
        self.projects = Projects(s.projects, s.agents, s.runners, clock)
        self.web = WebSettings(s.secrets, s.agents, BOX, search_provider=None)
        self.plan = PlanSettings(s.secrets, s.agents, BOX)
        self.memory = MemorySettings(s.secrets, s.agents, BOX)
        self.compaction = CompactionSettings(s.secrets, s.agents, BOX)
        self.skills = Skills(s.skills, NoSource(), PackagedSkills(), clock)
        self.skill_bindings = SkillBindings(s.secrets, s.agents, BOX, s.skills)
        self.templates = Templates(
            catalogue or PackagedTemplates(),
            self.agents,
            {
                "web": self.web.update,
                "plan": self.plan.update,
                "memory": self.memory.update,
                "compaction": self.compaction.update,
            },
            registry_giver(self.skills, self.skill_bindings),
        )

    async def configs(self, agent_id: UUID) -> dict[str, dict[str, Any]]:
        """Each configuration as stored (or its defaults), without its ids."""
        found = {}
        for kind, settings in (
            ("web", self.web),
            ("plan", self.plan),
            ("memory", self.memory),
            ("compaction", self.compaction),
        ):
            config = msgspec.structs.asdict(await settings.get(ADMIN, agent_id))
            found[kind] = {
                k: list(v) if isinstance(v, tuple) else v  # as JSON has them
                for k, v in config.items()
                if k not in ("agent_id", "org_id")
            }
        return found


def a_template(**over: Any) -> Template:
    base = Template(
        id="t1",
        version=3,
        name="T one",
        description="the first",
        category="Testing",
        tags=("alpha", "beta"),
        agent=TemplateAgent(name="Agent one", description="d", stable_preamble="Be good."),
        configs={"plan": {"enabled": True}},
    )
    return msgspec.structs.replace(base, **over)


def test_at_least_eight_templates_ship_each_complete() -> None:
    assert len(SHIPPED) >= 8
    assert len({t.id for t in SHIPPED}) == len(SHIPPED)
    assert [(t.category, t.name) for t in SHIPPED] == sorted((t.category, t.name) for t in SHIPPED)
    for t in SHIPPED:
        assert t.version >= 1
        assert t.agent.stable_preamble.strip()
        assert set(t.configs) <= set(TEMPLATE_CONFIGS), t.id
        assert t.configs, t.id  # each sets at least one configuration


@pytest.mark.parametrize("template", SHIPPED, ids=[t.id for t in SHIPPED])
async def test_each_shipped_template_makes_its_agent_and_configurations(
    template: Template,
) -> None:
    w = World()
    defaults = await w.configs((await w.agents.create(ADMIN, AgentDraft(name="plain"))).id)
    agent = await w.templates.use(ADMIN, template.id, TemplateOverrides())
    assert agent.template == TemplateRef(id=template.id, version=template.version)
    assert (agent.name, agent.stable_preamble) == (
        template.agent.name,
        template.agent.stable_preamble,
    )
    assert agent.default_model == (template.agent.default_model or "local")
    stored = await w.configs(agent.id)
    for kind in TEMPLATE_CONFIGS:
        expected = {**defaults[kind], **template.configs.get(kind, {})}
        assert stored[kind] == expected, (template.id, kind)
    # its skills: the registry's, installed in the organization and given to the agent
    given = [e.name for e in await w.skill_bindings.attached(ADMIN, agent.id)]
    assert given == list(template.skills), template.id
    assert all(w.skills.in_registry(i) for i in template.skills)


def test_most_shipped_templates_bring_skills() -> None:
    assert sum(1 for t in SHIPPED if t.skills) >= 6


async def test_a_templates_skills_are_installed_once_and_shared() -> None:
    w = World()
    first = await w.templates.use(ADMIN, "code-reviewer", TemplateOverrides())
    second = await w.templates.use(
        ADMIN, "code-reviewer", TemplateOverrides(agent=AgentChanges(name="Two"))
    )
    installed = await w.skills.list(ADMIN)
    assert sorted(s.name for s in installed) == ["code-review", "commit-messages"]
    assert all(s.source.type == "registry" for s in installed)
    ids = {s.name: s.id for s in installed}
    for agent in (first, second):
        bound = (await w.skill_bindings.get(ADMIN, agent.id)).skills
        assert [b.skill_id for b in bound] == [ids["code-review"], ids["commit-messages"]]


async def test_a_skill_name_taken_by_another_skill_leaves_no_agent() -> None:
    w = World()
    mine = "---\nname: code-review\ndescription: our own\n---\nours"
    await w.skills.create(ADMIN, SkillDraft(content=mine))
    with pytest.raises(Conflict) as taken:
        await w.templates.use(ADMIN, "code-reviewer", TemplateOverrides())
    assert taken.value.code == "SKILL_NAME_TAKEN"
    assert await w.agents.list(ADMIN) == []


async def test_a_service_without_skills_refuses_a_template_with_skills() -> None:
    w = World(Catalogue(a_template(skills=("tea",))))
    w.templates._skills = None
    with pytest.raises(InvalidInput, match="templateId: this service has no skills to give"):
        await w.templates.use(ADMIN, "t1", TemplateOverrides())
    assert await w.agents.list(ADMIN) == []


def test_the_list_narrows_by_category_and_every_word() -> None:
    one = a_template()
    two = a_template(
        id="t2", name="Second", description="the next", category="Other", tags=("gamma",)
    )
    w = World(Catalogue(one, two))
    assert w.templates.list() == [one, two]
    assert w.templates.list(category="testing") == [one]
    assert w.templates.list(category="TESTING") == [one]
    assert w.templates.list(category="Test") == []
    assert w.templates.list(query="GAMMA") == [two]  # a tag
    assert w.templates.list(query="first") == [one]  # the description
    assert w.templates.list(query="other") == [two]  # the category
    assert w.templates.list(query="second") == [two]  # the name
    assert w.templates.list(query="alpha beta") == [one]
    assert w.templates.list(query="alpha gamma") == []
    assert w.templates.list(query="xx") == []  # a word in none of the fields
    assert w.templates.list(query="  ") == [one, two]
    assert w.templates.list(category="Other", query="alpha") == []
    assert w.templates.get("t2") == two
    with pytest.raises(NotFound) as missing:
        w.templates.get("t3")
    assert missing.value.detail == "template not found"


async def test_overrides_go_over_the_template() -> None:
    template = a_template(
        agent=TemplateAgent(
            name="Agent one",
            description="d",
            stable_preamble="Be good.",
            default_model="model-a",
            tool_profiles={"all": ToolProfile(tools=("plan_create",))},
            default_profile="all",
        ),
        configs={"plan": {"enabled": True}, "memory": {"enabled": True, "max_memories": 50}},
    )
    w = World(Catalogue(template))
    project = await w.projects.create(ADMIN, ProjectDraft(name="p"))
    agent = await w.templates.use(
        ADMIN,
        "t1",
        TemplateOverrides(
            agent=AgentChanges(
                name="Mine", default_model="local", default_profile=None, project_id=project.id
            ),
            configs={"memory": {"max_memories": 7}, "compaction": {"enabled": True}},
        ),
    )
    assert (agent.name, agent.description, agent.stable_preamble) == ("Mine", "d", "Be good.")
    assert (agent.default_model, agent.default_profile) == ("local", None)
    assert agent.tool_profiles == {"all": ToolProfile(tools=("plan_create",))}
    assert agent.project_id == project.id
    assert agent.template == TemplateRef(id="t1", version=3)
    configs = await w.configs(agent.id)
    assert (configs["memory"]["enabled"], configs["memory"]["max_memories"]) == (True, 7)
    assert configs["plan"]["enabled"] is True
    assert configs["compaction"]["enabled"] is True
    assert configs["web"]["fetch_enabled"] is False  # neither set it
    assert await w.agents.get(ADMIN, agent.id) == agent


async def test_a_refused_configuration_deletes_the_agent_made_for_it() -> None:
    # plan and memory are set before web, whose search the service cannot offer
    template = a_template(
        configs={
            "plan": {"enabled": True},
            "memory": {"enabled": True},
            "web": {"search_enabled": True},
        }
    )
    w = World(Catalogue(template))
    with pytest.raises(InvalidInput) as err:
        await w.templates.use(ADMIN, "t1", TemplateOverrides())
    assert err.value.field == "search_enabled"
    assert await w.agents.list(ADMIN) == []
    assert await w.storage.secrets.every("org-a") == []  # its plan and memory went with it


async def test_unknown_templates_and_configurations_and_members_are_refused() -> None:
    w = World(Catalogue(a_template()))
    with pytest.raises(NotFound, match="template not found"):
        await w.templates.use(ADMIN, "t9", TemplateOverrides())
    with pytest.raises(InvalidInput) as unknown:
        await w.templates.use(ADMIN, "t1", TemplateOverrides(configs={"skills": {}}))
    assert unknown.value.detail == "overrides: no configuration named 'skills'"
    with pytest.raises(PermissionDenied) as denied:
        await w.templates.use(MEMBER, "t1", TemplateOverrides())
    assert denied.value.detail == "agents are made by the organization's admins"
    with pytest.raises(NotFound, match="project not found"):
        await w.templates.use(
            ADMIN, "t1", TemplateOverrides(agent=AgentChanges(project_id=UUID(int=1)))
        )
    assert await w.agents.list(ADMIN) == []


def test_every_configuration_kind_needs_its_update() -> None:
    s = MemoryStorage()
    agents = Agents(s.agents, Clock(), "local")
    with pytest.raises(ValueError, match="compaction"):
        Templates(Catalogue(), agents, {"web": _noop, "plan": _noop, "memory": _noop})


async def _noop(who: Principal, agent_id: UUID, fields: dict[str, Any]) -> None:
    return None
