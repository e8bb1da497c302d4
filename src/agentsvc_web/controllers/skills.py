"""Skills (``/api/skills``, docs/skills.md): the organization's skills, the shipped
registry (``browse``), syncs, and the skills given to an agent
(``/api/agents/{id}/skills``; a runner's are under ``/api/runners``). The use cases
are ``use_cases/skills/``."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

import msgspec
from litestar import Controller, Request, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, QueryParameter
from msgspec import UNSET, Meta, UnsetType

from agentsvc_core.entities.skill import Skill, SkillBinding, SkillContent, SkillOrigin
from agentsvc_core.partial import given_fields
from agentsvc_core.ports.skills import RegistrySkill
from agentsvc_core.use_cases.skills.bindings import MAX_BINDINGS, SkillBindings
from agentsvc_core.use_cases.skills.skills import SkillChanges, SkillDraft, Skills, SourceDraft
from agentsvc_web.auth import principal_of
from agentsvc_web.openapi import CREATE, READ, WRITE, errors
from agentsvc_web.schemas import copied

Req = Request[Any, Any, Any]

SkillMd = Annotated[str, Meta(min_length=1, max_length=256 * 1024)]
Files = Annotated[dict[str, str], Meta(max_length=200)]


class SourceBody(msgspec.Struct, rename="camel"):
    type: Annotated[str, Meta(pattern="^(git|url)$")]
    url: Annotated[str, Meta(min_length=1, max_length=2048)]
    path: Annotated[str, Meta(max_length=512)] | None = None
    ref: Annotated[str, Meta(min_length=1, max_length=256)] | None = None


class SkillBody(msgspec.Struct, rename="camel"):
    """One of ``content`` (a whole SKILL.md, with ``files`` beside it), ``source``
    and ``registryId``."""

    content: SkillMd | None = None
    files: Files = {}
    source: SourceBody | None = None
    registry_id: Annotated[str, Meta(min_length=1, max_length=64)] | None = None
    name: Annotated[str, Meta(min_length=1, max_length=64)] | None = None


class SkillPatchBody(msgspec.Struct, rename="camel"):
    name: Annotated[str, Meta(min_length=1, max_length=64)] | UnsetType = UNSET
    enabled: bool | UnsetType = UNSET
    content: SkillMd | UnsetType = UNSET
    files: Files | UnsetType = UNSET


class FileOut(msgspec.Struct):
    path: str
    size: int


def _files(content: SkillContent) -> list[FileOut]:
    return [FileOut(path=p, size=len(d)) for p, d in content.files.items()]


class SourceOut(msgspec.Struct):
    type: str
    url: str | None
    path: str | None
    ref: str | None
    resolved_ref: str | None

    @classmethod
    def of(cls, s: SkillOrigin) -> SourceOut:
        return copied(cls, s)


class SkillOut(msgspec.Struct):
    id: UUID
    org_id: str
    name: str
    description: str
    body: str
    allowed_tools: list[str]
    front_matter: dict[str, Any]
    files: list[FileOut]
    source: SourceOut
    version: int
    content_hash: str
    status: str
    sync_error: str | None
    last_synced_at: datetime | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, s: Skill) -> SkillOut:
        c = s.content
        return cls(
            id=s.id,
            org_id=s.org_id,
            name=s.name,
            description=c.description,
            body=c.body,
            allowed_tools=list(c.allowed_tools),
            front_matter=c.front_matter,
            files=_files(c),
            source=SourceOut.of(s.source),
            version=s.version,
            content_hash=c.content_hash,
            status=s.status,
            sync_error=s.sync_error,
            last_synced_at=s.last_synced_at,
            created_at=s.created_at,
            updated_at=s.updated_at,
        )


class SyncOut(msgspec.Struct):
    changed: bool
    from_version: int
    to_version: int
    skill: SkillOut


class RegistryOut(msgspec.Struct):
    """A skill of the shipped registry; install it with ``POST /api/skills
    {"registryId": id}``."""

    id: str
    name: str
    description: str
    category: str
    version: str
    body: str
    files: list[FileOut]

    @classmethod
    def of(cls, entry: RegistrySkill, content: SkillContent) -> RegistryOut:
        return cls(
            id=entry.id,
            name=content.name,
            description=content.description,
            category=entry.category,
            version=entry.version,
            body=content.body,
            files=_files(content),
        )


# --- bindings (an agent's here, a runner's in controllers/runners) ------------------


class BindingBody(msgspec.Struct, rename="camel"):
    skill_id: UUID
    pinned_version: Annotated[int, Meta(ge=1)] | None = None
    enabled: bool = True


class BindingsBody(msgspec.Struct, rename="camel"):
    """``skills`` (bindings) or ``skillIds`` (each at its current version, enabled)."""

    skills: Annotated[list[BindingBody], Meta(max_length=MAX_BINDINGS)] | UnsetType = UNSET
    skill_ids: Annotated[list[UUID], Meta(max_length=MAX_BINDINGS)] | UnsetType = UNSET

    def bindings(self) -> list[SkillBinding] | None:
        """None when the body gives both or neither (refused once the agent or the
        runner is found: another organization's is 404 whatever the body)."""
        if isinstance(self.skills, list) == isinstance(self.skill_ids, list):
            return None
        if isinstance(self.skills, list):
            return [
                SkillBinding(
                    skill_id=b.skill_id, pinned_version=b.pinned_version, enabled=b.enabled
                )
                for b in self.skills
            ]
        # skillIds name each skill once, as this form always has: a repeat is dropped
        return [SkillBinding(skill_id=i) for i in dict.fromkeys(self.skill_ids or [])]


class BindingOut(msgspec.Struct):
    skill_id: UUID
    pinned_version: int | None
    enabled: bool

    @classmethod
    def all(cls, bindings: tuple[SkillBinding, ...]) -> list[BindingOut]:
        return [copied(cls, b) for b in bindings]


class SkillController(Controller):
    path = "/api/skills"
    tags = ["skills"]

    @get(
        "/",
        operation_id="listSkills",
        responses=errors(),
        summary="The organization's skills, oldest first",
    )
    async def list_skills(self, request: Req, skills: NamedDependency[Skills]) -> list[SkillOut]:
        return [SkillOut.of(s) for s in await skills.list(principal_of(request))]

    @post(
        "/",
        operation_id="createSkill",
        responses={**CREATE, **errors(404, 409)},
        summary="Create a skill from a SKILL.md, a git repository, a URL or the registry",
    )
    async def create_skill(
        self, request: Req, skills: NamedDependency[Skills], data: JSONBody[SkillBody]
    ) -> SkillOut:
        draft = SkillDraft(
            content=data.content,
            files=data.files,
            source=msgspec.convert(msgspec.structs.asdict(data.source), SourceDraft)
            if data.source is not None
            else None,
            registry_id=data.registry_id,
            name=data.name,
        )
        return SkillOut.of(await skills.create(principal_of(request), draft))

    @get(
        "/browse",
        operation_id="browseSkills",
        responses=errors(422),
        summary="The registry of skills shipped with the service (?category=, ?q= words to find)",
    )
    async def browse(
        self,
        skills: NamedDependency[Skills],
        category: Annotated[str | None, QueryParameter(name="category", max_length=100)] = None,
        q: Annotated[str | None, QueryParameter(name="q", max_length=200)] = None,
    ) -> list[RegistryOut]:
        return [RegistryOut.of(e, c) for e, c in skills.browse(q, category)]

    @get("/{skill_id:uuid}", operation_id="getSkill", responses=READ, summary="A skill")
    async def get_skill(
        self, request: Req, skills: NamedDependency[Skills], skill_id: FromPath[UUID]
    ) -> SkillOut:
        return SkillOut.of(await skills.get(principal_of(request), skill_id))

    @patch(
        "/{skill_id:uuid}",
        operation_id="updateSkill",
        responses={**WRITE, **errors(409)},
        summary="Rename, enable or disable a skill, or edit an inline skill's content",
    )
    async def update_skill(
        self,
        request: Req,
        skills: NamedDependency[Skills],
        skill_id: FromPath[UUID],
        data: JSONBody[SkillPatchBody],
    ) -> SkillOut:
        changes = SkillChanges(**given_fields(data))
        return SkillOut.of(await skills.update(principal_of(request), skill_id, changes))

    @delete(
        "/{skill_id:uuid}",
        operation_id="deleteSkill",
        status_code=200,
        responses=READ,
        summary="Delete a skill (agents and runners no longer get it)",
    )
    async def delete_skill(
        self, request: Req, skills: NamedDependency[Skills], skill_id: FromPath[UUID]
    ) -> dict[str, bool]:
        await skills.delete(principal_of(request), skill_id)
        return {"ok": True}

    @post(
        "/{skill_id:uuid}/sync",
        operation_id="syncSkill",
        status_code=200,
        responses={**errors(404, 409, 422, 502)},
        summary="Fetch the skill's source again: a new version when it changed",
    )
    async def sync_skill(
        self, request: Req, skills: NamedDependency[Skills], skill_id: FromPath[UUID]
    ) -> SyncOut:
        synced = await skills.sync(principal_of(request), skill_id)
        return SyncOut(
            changed=synced.changed,
            from_version=synced.from_version,
            to_version=synced.to_version,
            skill=SkillOut.of(synced.skill),
        )


class AgentSkillsController(Controller):
    path = "/api/agents/{agent_id:uuid}/skills"
    tags = ["skills"]

    @get("/", operation_id="listAgentSkills", responses=READ, summary="The agent's skills")
    async def get_bindings(
        self,
        request: Req,
        skill_bindings: NamedDependency[SkillBindings],
        agent_id: FromPath[UUID],
    ) -> list[BindingOut]:
        found = await skill_bindings.get(principal_of(request), agent_id)
        return BindingOut.all(found.skills)

    @post(
        "/",
        operation_id="setAgentSkills",
        status_code=200,
        responses=WRITE,
        summary="Replace the agent's skills",
    )
    async def set_bindings(
        self,
        request: Req,
        skill_bindings: NamedDependency[SkillBindings],
        agent_id: FromPath[UUID],
        data: JSONBody[BindingsBody],
    ) -> list[BindingOut]:
        stored = await skill_bindings.set(principal_of(request), agent_id, data.bindings())
        return BindingOut.all(stored.skills)
