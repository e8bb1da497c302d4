"""The marketplace: the official templates (``/api/marketplace/official``:
complete agent configurations the service ships, listed, searched and made into
an agent, use_cases/templates.py) and an agent's marketplace profile
(``/api/agents/{id}/marketplace``, its avatar served at ``/api/public/avatars``;
use_cases/marketplace.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

import msgspec
from litestar import Controller, Request, Response, delete, get, post, put
from litestar.di import NamedDependency
from litestar.openapi.spec import (
    OpenAPIFormat,
    OpenAPIType,
    Schema,
)
from litestar.params import FromPath, JSONBody, QueryParameter
from msgspec import UNSET, Meta, UnsetType

from agentsvc_core.entities.marketplace import MarketplaceProfile
from agentsvc_core.entities.template import Template
from agentsvc_core.errors import InvalidInput, NotFound, UnsupportedMedia
from agentsvc_core.partial import given_fields
from agentsvc_core.use_cases.agents import AgentChanges
from agentsvc_core.use_cases.marketplace import (
    MAX_AVATAR_BYTES,
    MAX_CAPABILITIES,
    MAX_CAPABILITY,
    MAX_CATEGORIES,
    MAX_CATEGORY,
    MAX_DISPLAY_NAME,
    MAX_TAGLINE,
    Marketplace,
    avatar_path,
)
from agentsvc_core.use_cases.marketplace import MAX_DESCRIPTION as MAX_PROFILE_DESCRIPTION
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
    OkBody,
    Preamble,
    ProfileName,
    ToolProfileOut,
    ToolProfiles,
    copied,
    items_schema,
    profiles_to_entity,
)
from agentsvc_web.upload_form import form_operation, read_upload_form

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
    agent = AgentChanges(
        name=UNSET if body.name is None else body.name,
        description=given.description,
        stable_preamble=given.stable_preamble,
        default_model=given.default_model,
        tool_profiles=UNSET
        if given.tool_profiles is UNSET
        else profiles_to_entity(given.tool_profiles),
        default_profile=given.default_profile,
        project_id=UNSET if given.project_id is None else given.project_id,
    )
    return TemplateOverrides(agent=agent, configs=configs)


class MarketplaceController(Controller):
    path = "/api/marketplace/official"
    tags = ["marketplace"]

    @get(
        "/",
        operation_id="listOfficialTemplates",
        responses=errors(422),
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


# --- an agent's marketplace profile ----------------------------------------------

Handle = Annotated[str, Meta(pattern="^[a-z0-9-]{3,48}$")]
_Category = Annotated[str, Meta(min_length=1, max_length=MAX_CATEGORY)]
_Capability = Annotated[str, Meta(min_length=1, max_length=MAX_CAPABILITY)]
# the items' bounds stated in the document too (Litestar leaves them out of a list's)
Categories = Annotated[
    list[_Category],
    Meta(max_length=MAX_CATEGORIES),
    items_schema(Schema(type=OpenAPIType.STRING, min_length=1, max_length=MAX_CATEGORY)),
]
Capabilities = Annotated[
    list[_Capability],
    Meta(max_length=MAX_CAPABILITIES),
    items_schema(Schema(type=OpenAPIType.STRING, min_length=1, max_length=MAX_CAPABILITY)),
]


class ProfileBody(msgspec.Struct, rename="camel"):
    handle: Handle | UnsetType | None = UNSET
    display_name: Annotated[str, Meta(max_length=MAX_DISPLAY_NAME)] | UnsetType = UNSET
    tagline: Annotated[str, Meta(max_length=MAX_TAGLINE)] | UnsetType = UNSET
    description: Annotated[str, Meta(max_length=MAX_PROFILE_DESCRIPTION)] | UnsetType = UNSET
    categories: Categories | UnsetType = UNSET
    capabilities: Capabilities | UnsetType = UNSET
    listed: bool | UnsetType = UNSET


class CapabilitiesBody(msgspec.Struct, rename="camel"):
    capabilities: Capabilities


class ProfileOut(msgspec.Struct):
    agent_id: UUID
    org_id: str
    handle: str | None
    display_name: str
    tagline: str
    description: str
    categories: list[str]
    capabilities: list[str]
    avatar_url: str | None
    listed: bool
    updated_at: datetime | None

    @classmethod
    def of(cls, p: MarketplaceProfile) -> ProfileOut:
        return copied(
            cls,
            p,
            categories=list(p.categories),
            capabilities=list(p.capabilities),
            avatar_url=avatar_path(p),
        )


class DescriptionOut(msgspec.Struct):
    description: str


class CapabilitiesOut(msgspec.Struct):
    capabilities: list[str]


# the avatar is read from its form by the route itself: the document states the form
_AvatarOperation = form_operation(
    {"file": Schema(type=OpenAPIType.STRING, format=OpenAPIFormat.BINARY)}, ["file"]
)


class AgentMarketplaceController(Controller):
    path = "/api/agents/{agent_id:uuid}/marketplace"
    tags = ["marketplace"]

    @get(
        "/",
        operation_id="getAgentMarketplace",
        responses=errors(404),
        summary="The agent's marketplace profile (the defaults until one is saved)",
    )
    async def get_profile(
        self, request: Req, marketplace: NamedDependency[Marketplace], agent_id: FromPath[UUID]
    ) -> ProfileOut:
        return ProfileOut.of(await marketplace.get(principal_of(request), agent_id))

    @put(
        "/",
        operation_id="putAgentMarketplace",
        responses=errors(400, 404, 409, 413, 415, 422),
        summary="Change the supplied fields of the profile (409 HANDLE_TAKEN)",
    )
    async def put_profile(
        self,
        request: Req,
        marketplace: NamedDependency[Marketplace],
        agent_id: FromPath[UUID],
        data: JSONBody[ProfileBody],
    ) -> ProfileOut:
        fields = given_fields(data)
        profile = await marketplace.update(principal_of(request), agent_id, fields)
        return ProfileOut.of(profile)

    @delete(
        "/",
        operation_id="deleteAgentMarketplace",
        status_code=200,
        responses=errors(404),
        summary="Delete the profile and its avatar",
    )
    async def delete_profile(
        self, request: Req, marketplace: NamedDependency[Marketplace], agent_id: FromPath[UUID]
    ) -> OkBody:
        await marketplace.delete(principal_of(request), agent_id)
        return OkBody(ok=True)

    @post(
        "/avatar",
        operation_id="uploadAgentAvatar",
        operation_class=_AvatarOperation,
        status_code=200,
        responses=errors(400, 404, 413, 415, 422),
        summary="Upload the avatar (multipart file: PNG, JPEG or WebP, 1 MB, 1024x1024)",
    )
    async def upload_avatar(
        self, request: Req, marketplace: NamedDependency[Marketplace], agent_id: FromPath[UUID]
    ) -> ProfileOut:
        who = principal_of(request)
        await marketplace.get(who, agent_id)  # another organization's agent: 404 first
        if not request.content_type[0].startswith("multipart/form-data"):
            raise UnsupportedMedia("the upload is multipart/form-data with a file part")
        form = await read_upload_form(request, frozenset(), MAX_AVATAR_BYTES)
        if form.data is None:
            raise InvalidInput("file", "a file part is required")
        profile = await marketplace.set_avatar(who, agent_id, form.data)
        return ProfileOut.of(profile)

    @delete(
        "/avatar",
        operation_id="deleteAgentAvatar",
        status_code=200,
        responses=errors(404),
        summary="Delete the avatar",
    )
    async def delete_avatar(
        self, request: Req, marketplace: NamedDependency[Marketplace], agent_id: FromPath[UUID]
    ) -> ProfileOut:
        return ProfileOut.of(await marketplace.delete_avatar(principal_of(request), agent_id))

    @post(
        "/generate-description",
        operation_id="generateAgentDescription",
        status_code=200,
        responses=errors(404, 422, 502),
        summary="A description written by the agent's model (a suggestion: nothing is saved)",
    )
    async def generate_description(
        self, request: Req, marketplace: NamedDependency[Marketplace], agent_id: FromPath[UUID]
    ) -> DescriptionOut:
        text = await marketplace.generate_description(principal_of(request), agent_id)
        return DescriptionOut(description=text)

    @post(
        "/detect-capabilities",
        operation_id="detectAgentCapabilities",
        status_code=200,
        responses=errors(404),
        summary="The capabilities found in what the agent is given (nothing is saved)",
    )
    async def detect_capabilities(
        self, request: Req, marketplace: NamedDependency[Marketplace], agent_id: FromPath[UUID]
    ) -> CapabilitiesOut:
        found = await marketplace.detect_capabilities(principal_of(request), agent_id)
        return CapabilitiesOut(capabilities=found)

    @put(
        "/capabilities",
        operation_id="putAgentCapabilities",
        responses=errors(400, 404, 413, 415, 422),
        summary="Replace the profile's capabilities",
    )
    async def put_capabilities(
        self,
        request: Req,
        marketplace: NamedDependency[Marketplace],
        agent_id: FromPath[UUID],
        data: JSONBody[CapabilitiesBody],
    ) -> ProfileOut:
        profile = await marketplace.set_capabilities(
            principal_of(request), agent_id, data.capabilities
        )
        return ProfileOut.of(profile)


class PublicAvatarController(Controller):
    """An avatar, for anyone: its URL names the agent and the picture's digest, so
    it is cached for good and a replaced picture gets a new URL."""

    path = "/api/public/avatars"
    tags = ["marketplace"]

    @get(
        "/{agent_id:uuid}/{sha256:str}",
        operation_id="getPublicAvatar",
        security=[],
        # documented as bytes; the answer names the picture's own type
        media_type="application/octet-stream",
        responses=errors(404),
        summary="An agent's avatar at one version (public)",
    )
    async def avatar(
        self,
        marketplace: NamedDependency[Marketplace],
        agent_id: FromPath[UUID],
        sha256: FromPath[str],
    ) -> Response[bytes]:
        found = await marketplace.public_avatar(agent_id, sha256)
        if found is None:
            raise NotFound("avatar not found")
        content_type, data = found
        return Response(
            data,
            media_type=content_type,
            headers={
                "Cache-Control": "public, max-age=31536000, immutable",
                "X-Content-Type-Options": "nosniff",
            },
        )
