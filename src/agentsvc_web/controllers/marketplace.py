"""The official templates (``/api/marketplace/official``): complete agent
configurations the service ships, listed and searched, and made into an agent of
the organization (``.../use``; use_cases/templates.py)."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

import msgspec
from litestar import Controller, Request, get, post
from litestar.di import NamedDependency
from litestar.params import JSONBody, QueryParameter
from msgspec import UNSET, Meta, UnsetType

from agentsvc_core.entities.template import Template
from agentsvc_core.use_cases.templates import TemplateOverrides, Templates
from agentsvc_web.auth import principal_of
from agentsvc_web.controllers.memories import MemoryConfigBody
from agentsvc_web.controllers.plans import PlanConfigBody
from agentsvc_web.controllers.settings import CompactionPutBody
from agentsvc_web.controllers.web import WebPutBody
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import (
    AgentOut,
    Description,
    ModelId,
    Name,
    Preamble,
    ProfileName,
    ToolProfileOut,
    ToolProfiles,
    copied,
    given_fields,
    profiles_to_entity,
)

Req = Request[Any, Any, Any]


class TemplateAgentOut(msgspec.Struct):
    name: str
    description: str
    stable_preamble: str
    default_model: str | None
    tool_profiles: dict[str, ToolProfileOut] | None
    default_profile: str | None


class TemplateOut(msgspec.Struct):
    id: str
    version: int
    name: str
    description: str
    category: str
    tags: list[str]
    uses: list[str]
    agent: TemplateAgentOut
    configs: dict[str, dict[str, Any]]

    @classmethod
    def of(cls, t: Template) -> TemplateOut:
        a = t.agent
        profiles = (
            None
            if a.tool_profiles is None
            else {
                k: ToolProfileOut(tools=list(p.tools), description=p.description)
                for k, p in a.tool_profiles.items()
            }
        )
        return copied(
            cls,
            t,
            tags=list(t.tags),
            uses=list(t.uses),
            agent=copied(TemplateAgentOut, a, tool_profiles=profiles),
        )


class OverridesBody(msgspec.Struct, rename="camel"):
    """What to change of the template: the agent's fields, its project, and any
    field of its configurations (each as the PUT of that configuration takes it)."""

    description: Description | UnsetType = UNSET
    stable_preamble: Preamble | UnsetType = UNSET
    default_model: ModelId | UnsetType = UNSET
    tool_profiles: ToolProfiles | UnsetType | None = UNSET
    default_profile: ProfileName | UnsetType | None = UNSET
    project_id: UUID | None = None
    web: WebPutBody | None = None
    plan: PlanConfigBody | None = None
    memory: MemoryConfigBody | None = None
    compaction: CompactionPutBody | None = None


class UseTemplateBody(msgspec.Struct, rename="camel"):
    template_id: Annotated[str, Meta(min_length=1, max_length=100)]
    name: Name | None = None
    overrides: OverridesBody | None = None


def _overrides(body: UseTemplateBody) -> TemplateOverrides:
    given = body.overrides or OverridesBody()
    configs = {
        kind: given_fields(section)
        for kind, section in (
            ("web", given.web),
            ("plan", given.plan),
            ("memory", given.memory),
            ("compaction", given.compaction),
        )
        if section is not None
    }
    agent = {
        f: getattr(given, f)
        for f in ("description", "stable_preamble", "default_model", "default_profile")
        if getattr(given, f) is not UNSET
    }
    if given.tool_profiles is not UNSET:
        agent["tool_profiles"] = profiles_to_entity(given.tool_profiles)
    if body.name is not None:
        agent["name"] = body.name
    return TemplateOverrides(**agent, project_id=given.project_id, configs=configs)


class MarketplaceController(Controller):
    path = "/api/marketplace/official"
    tags = ["marketplace"]

    @get(
        "/",
        operation_id="listOfficialTemplates",
        responses=errors(),
        summary="The official agent templates (?category=, ?q= words to find)",
    )
    async def list_templates(
        self,
        templates: NamedDependency[Templates],
        category: Annotated[str | None, QueryParameter(name="category", max_length=100)] = None,
        q: Annotated[str | None, QueryParameter(name="q", max_length=200)] = None,
    ) -> list[TemplateOut]:
        return [TemplateOut.of(t) for t in templates.list(category=category, query=q)]

    @post(
        "/use",
        operation_id="useOfficialTemplate",
        status_code=201,
        responses=errors(400, 404, 413, 415, 422),
        summary="Make an agent from an official template (its configurations included)",
    )
    async def use_template(
        self, request: Req, templates: NamedDependency[Templates], data: JSONBody[UseTemplateBody]
    ) -> AgentOut:
        agent = await templates.use(principal_of(request), data.template_id, _overrides(data))
        return AgentOut.of(agent)
