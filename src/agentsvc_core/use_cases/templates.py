"""Official templates (docs/templates.md): the complete agent configurations the
service ships (``TemplateCatalogue``), listed and searched, and turned into an
agent of the organization in one call (``use``): the agent, with the template's
preamble, model and tool profiles, then each configuration the template sets (web,
plan, memory, compaction), the caller's overrides applied over the template's, and
the template's skills (the registry's, installed in the organization when it has
not got them yet). The agent records the template and its version. Nothing is left
half made: when a configuration or a skill is refused, the agent made for it is
deleted again (with whatever configurations it had got) and the refusal is the
answer (a skill installed on the way stays: it is the organization's, and the next
use finds it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_core.entities import Agent, Principal
from agentsvc_core.entities.template import TEMPLATE_CONFIGS, Template
from agentsvc_core.errors import InvalidInput, NotFound, PermissionDenied
from agentsvc_core.ports.templates import TemplateCatalogue
from agentsvc_core.use_cases.agents import AgentChanges, AgentDraft, Agents

__all__ = ["ConfigUpdate", "TemplateOverrides", "Templates"]

# a configuration kind's update: (who, agent id, the fields given) -> the stored configuration
ConfigUpdate = Callable[[Principal, UUID, dict[str, Any]], Awaitable[object]]
# gives an agent the registry's skills of these ids: (who, agent id, ids) -> None
GiveSkills = Callable[[Principal, UUID, tuple[str, ...]], Awaitable[None]]


class TemplateOverrides(msgspec.Struct, frozen=True, kw_only=True):
    """What the caller changes of the template's agent (a PATCH's fields over the
    template's, the project it joins among them), and configuration fields by
    kind, given over the template's own."""

    agent: AgentChanges = AgentChanges()
    configs: dict[str, dict[str, Any]] = {}


def _words(text: str) -> list[str]:
    return text.casefold().split()


def _matches(template: Template, words: list[str]) -> bool:
    """Every word of the query is in the name, description, category or a tag."""
    haystack = " ".join(
        (template.name, template.description, template.category, *template.tags)
    ).casefold()
    return all(word in haystack for word in words)


class Templates:
    def __init__(
        self,
        catalogue: TemplateCatalogue,
        agents: Agents,
        configs: Mapping[str, ConfigUpdate],
        skills: GiveSkills | None = None,
    ) -> None:
        """``configs``: the update of each kind of ``TEMPLATE_CONFIGS``;
        ``skills``: what gives the agent the template's skills (without it, a
        template with skills is refused)."""
        missing = set(TEMPLATE_CONFIGS) - set(configs)
        if missing:
            raise ValueError(f"no update for the configurations {sorted(missing)}")
        self._catalogue = catalogue
        self._agents = agents
        self._configs = configs
        self._skills = skills

    def list(self, *, category: str | None = None, query: str | None = None) -> list[Template]:
        """The templates, by category then name; ``category`` the one of that name
        (any case), ``query`` those holding every one of its words."""
        words = _words(query or "")
        return [
            t
            for t in self._catalogue.templates()
            if (category is None or t.category.casefold() == category.casefold())
            and _matches(t, words)
        ]

    def get(self, template_id: str) -> Template:
        for template in self._catalogue.templates():
            if template.id == template_id:
                return template
        raise NotFound("template not found")

    async def use(self, who: Principal, template_id: str, overrides: TemplateOverrides) -> Agent:
        """A new agent of the organization from the template, with its
        configurations; the template's id and version recorded on it."""
        if not who.is_admin:
            raise PermissionDenied("agents are made by the organization's admins")
        template = self.get(template_id)
        unknown = sorted(set(overrides.configs) - set(TEMPLATE_CONFIGS))
        if unknown:
            raise InvalidInput("overrides", f"no configuration named {unknown[0]!r}")
        draft = AgentDraft(
            **{**msgspec.structs.asdict(template.agent), **overrides.agent.supplied()},
            template=template.ref,
        )
        agent = await self._agents.create(who, draft)
        try:
            for kind in TEMPLATE_CONFIGS:
                fields = {**template.configs.get(kind, {}), **overrides.configs.get(kind, {})}
                if fields:
                    await self._configs[kind](who, agent.id, fields)
            if template.skills:
                if self._skills is None:
                    raise InvalidInput("templateId", "this service has no skills to give")
                await self._skills(who, agent.id, template.skills)
        except Exception:
            await self._agents.delete(who, agent.id)  # its configurations go with it
            raise
        return agent
