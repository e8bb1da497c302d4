"""An organization's skills (``/api/skills``, docs/skills.md): created from a
``SKILL.md`` written inline, from a git repository or a URL, or installed from the
shipped registry (``browse``); renamed, disabled, edited (inline ones) and synced
from their source again.

A sync fetches the source through the outbound guard (the ``SkillSource``) and
keeps a new version only when the content changed; a failed sync keeps the last
good version, which agents go on using, and records why (``status: error``,
``sync_error``) until a sync succeeds. Reads are open to the organization's
members; every change is an admin's.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Callable
from typing import Literal
from uuid import UUID

import msgspec
from msgspec import UNSET, UnsetType

from agentsvc_core.entities import Principal
from agentsvc_core.entities.skill import Skill, SkillContent, SkillOrigin
from agentsvc_core.errors import Conflict, InvalidInput, NotFound, PermissionDenied, Upstream
from agentsvc_core.ports import Clock
from agentsvc_core.ports.skill_sources import SkillSource, SkillSourceError
from agentsvc_core.ports.skills import RegistrySkill, SkillRegistry, SkillStore
from agentsvc_core.use_cases.skills.content import SKILL_MD, content_of
from agentsvc_core.use_cases.skills.format import MAX_NAME, NAME

__all__ = ["SkillChanges", "SkillDraft", "Skills", "SourceDraft", "Synced"]

MAX_URL = 2048
MAX_REF = 256


class SourceDraft(msgspec.Struct, frozen=True, kw_only=True):
    type: Literal["git", "url"]
    url: str
    path: str | None = None  # git: the skill's folder in the repository
    ref: str | None = None  # git: branch, tag or commit; None: the default branch


class SkillDraft(msgspec.Struct, frozen=True, kw_only=True):
    """Exactly one of: ``content`` (a whole SKILL.md, with ``files`` beside it),
    ``source`` (fetched now), ``registry_id`` (a skill of ``browse``)."""

    content: str | None = None
    files: dict[str, str] = {}
    source: SourceDraft | None = None
    registry_id: str | None = None
    name: str | None = None  # the skill's name, when not its SKILL.md's


class SkillChanges(msgspec.Struct, frozen=True, kw_only=True):
    name: str | UnsetType = UNSET  # a rename (the SKILL.md's name no longer applies)
    enabled: bool | UnsetType = UNSET
    content: str | UnsetType = UNSET  # inline skills: a new SKILL.md, a new version
    files: dict[str, str] | UnsetType = UNSET  # with ``content``: the files beside it


class Synced(msgspec.Struct, frozen=True, kw_only=True):
    changed: bool
    from_version: int
    to_version: int
    skill: Skill


def _name(name: str) -> str:
    if len(name) > MAX_NAME or not NAME.fullmatch(name):
        raise InvalidInput(
            "name", "1 to 64 of a-z, 0-9 and single hyphens, not at the start or end"
        )
    return name


def _inline(content: str, files: dict[str, str]) -> SkillContent:
    if SKILL_MD in files:
        raise InvalidInput("files", "SKILL.md is the content, not one of the files")
    return content_of({SKILL_MD: content.encode(), **{p: t.encode() for p, t in files.items()}})


def _checked_source(source: SourceDraft) -> SkillOrigin:
    if not source.url or len(source.url) > MAX_URL:
        raise InvalidInput("source.url", f"required, at most {MAX_URL} characters")
    if source.type == "url":
        if source.path is not None or source.ref is not None:
            raise InvalidInput("source", "a url source is one SKILL.md: no path, no ref")
        return SkillOrigin(type="url", url=source.url)
    if source.ref is not None and not 0 < len(source.ref) <= MAX_REF:
        raise InvalidInput("source.ref", f"1 to {MAX_REF} characters")
    return SkillOrigin(type="git", url=source.url, path=source.path or "", ref=source.ref)


def _status(enabled: bool, sync_error: str | None) -> Literal["active", "disabled", "error"]:
    if not enabled:
        return "disabled"
    return "error" if sync_error else "active"


class Skills:
    def __init__(
        self,
        store: SkillStore,
        source: SkillSource,
        registry: SkillRegistry,
        clock: Clock,
    ) -> None:
        self._store = store
        self._source = source
        self._registry = {s.id: s for s in registry.skills()}
        # read and checked once: a shipped skill that is not one stops the start-up
        self._browse = tuple((s, content_of(s.files)) for s in registry.skills())
        self._clock = clock

    @staticmethod
    def _admin(who: Principal) -> None:
        if not who.is_admin:
            raise PermissionDenied("skills are managed by the organization's admins")

    # --- reads ------------------------------------------------------------------

    async def list(self, who: Principal) -> list[Skill]:
        return await self._store.list(who.org_id)

    async def get(self, who: Principal, skill_id: UUID) -> Skill:
        return await self._store.get(who.org_id, skill_id)

    async def version(self, who: Principal, skill_id: UUID, version: int) -> SkillContent:
        content = await self._store.version(who.org_id, skill_id, version)
        if content is None:
            await self._store.get(who.org_id, skill_id)  # NotFound for the skill first
            raise NotFound(f"the skill has no version {version}")
        return content

    def browse(
        self, query: str | None = None, category: str | None = None
    ) -> builtins.list[tuple[RegistrySkill, SkillContent]]:
        """The shipped registry's skills (read and checked at start-up), matching
        ``query`` (every word, in the name, description or category) and
        ``category``."""
        words = (query or "").lower().split()
        found = []
        for entry, content in self._browse:
            text = f"{content.name} {content.description} {entry.category}".lower()
            if category and entry.category != category:
                continue
            if all(w in text for w in words):
                found.append((entry, content))
        return found

    def in_registry(self, registry_id: str) -> bool:
        return registry_id in self._registry

    async def installed(self, who: Principal, registry_id: str) -> Skill:
        """The organization's skill installed from the registry's ``registry_id``,
        installed now when it has none (``NotFound`` for an id the registry has
        not; ``Conflict`` when another skill has its name)."""
        for skill in await self._store.list(who.org_id):
            if skill.source.type == "registry" and skill.source.path == registry_id:
                return skill
        return await self.create(who, SkillDraft(registry_id=registry_id))

    # --- changes ----------------------------------------------------------------

    async def create(self, who: Principal, draft: SkillDraft) -> Skill:
        self._admin(who)
        given = [draft.content is not None, draft.source is not None, draft.registry_id is not None]
        if sum(given) != 1:
            raise InvalidInput("content", "give exactly one of content, source and registryId")
        if draft.files and draft.content is None:
            raise InvalidInput("files", "only with content (a source brings its own files)")
        origin, content = await self._first(draft)
        now = self._clock.now()
        skill = Skill(
            id=uuid.uuid4(),
            org_id=who.org_id,
            name=_name(draft.name) if draft.name is not None else content.name,
            renamed=draft.name is not None and draft.name != content.name,
            source=origin,
            version=1,
            content=content,
            status="active",
            sync_error=None,
            last_synced_at=None if origin.type == "inline" else now,
            created_at=now,
            updated_at=now,
        )
        await self._store.add(skill)
        return skill

    async def _first(self, draft: SkillDraft) -> tuple[SkillOrigin, SkillContent]:
        if draft.content is not None:
            return SkillOrigin(type="inline"), _inline(draft.content, draft.files)
        if draft.registry_id is not None:
            entry = self._registry.get(draft.registry_id)
            if entry is None:
                raise NotFound(f"no skill {draft.registry_id!r} in the registry")
            return self._from_registry(entry)
        assert draft.source is not None
        origin = _checked_source(draft.source)
        try:
            return await self._fetch(origin)
        except SkillSourceError as exc:
            raise InvalidInput("source", exc.detail) from None

    @staticmethod
    def _from_registry(entry: RegistrySkill) -> tuple[SkillOrigin, SkillContent]:
        origin = SkillOrigin(type="registry", path=entry.id, resolved_ref=entry.version)
        return origin, content_of(entry.files)

    async def _fetch(self, origin: SkillOrigin) -> tuple[SkillOrigin, SkillContent]:
        """The source's files now: ``SkillSourceError`` when they cannot be fetched
        or do not make a skill."""
        assert origin.url is not None
        if origin.type == "git":
            fetched = await self._source.fetch_git(origin.url, origin.path or "", origin.ref)
        else:
            fetched = await self._source.fetch_url(origin.url)
        try:
            content = content_of(fetched.files)
        except InvalidInput as exc:
            raise SkillSourceError(exc.detail) from None
        return msgspec.structs.replace(origin, resolved_ref=fetched.resolved_ref), content

    async def update(self, who: Principal, skill_id: UUID, changes: SkillChanges) -> Skill:
        self._admin(who)
        name = _name(changes.name) if isinstance(changes.name, str) else None
        if isinstance(changes.files, dict) and isinstance(changes.content, UnsetType):
            raise InvalidInput("files", "only with content")
        content = (
            _inline(changes.content, changes.files if isinstance(changes.files, dict) else {})
            if isinstance(changes.content, str)
            else None
        )
        now = self._clock.now()

        def change(skill: Skill) -> Skill:
            updated = skill
            if content is not None:
                if skill.source.type != "inline":
                    raise InvalidInput("content", "only an inline skill's content is edited; sync")
                if content.content_hash != skill.content.content_hash:
                    updated = msgspec.structs.replace(
                        updated,
                        version=skill.version + 1,
                        content=content,
                        name=skill.name if skill.renamed else content.name,
                    )
            if name is not None:
                updated = msgspec.structs.replace(
                    updated, name=name, renamed=name != updated.content.name
                )
            if isinstance(changes.enabled, bool):
                updated = msgspec.structs.replace(
                    updated, status=_status(changes.enabled, skill.sync_error)
                )
            return msgspec.structs.replace(updated, updated_at=now)

        return await self._store.modify(who.org_id, skill_id, change)

    async def delete(self, who: Principal, skill_id: UUID) -> None:
        self._admin(who)
        await self._store.delete(who.org_id, skill_id)

    # --- sync -------------------------------------------------------------------

    async def sync(self, who: Principal, skill_id: UUID) -> Synced:
        """Fetch the skill's source again: a new version when its content changed.
        A failure keeps the current version, records why and raises ``Upstream``
        (``SKILL_SYNC_FAILED``); an inline skill has nothing to sync
        (``InvalidInput``)."""
        self._admin(who)
        skill = await self._store.get(who.org_id, skill_id)
        if skill.source.type == "inline":
            raise InvalidInput("source", "an inline skill has no source to sync; PATCH its content")
        try:
            origin, content = await self._refetch(skill.source)
        except SkillSourceError as exc:
            await self._failed(who.org_id, skill_id, exc.detail)
            raise Upstream(
                f"the sync failed, version {skill.version} is kept: {exc.detail}",
                code="SKILL_SYNC_FAILED",
            ) from None
        before: builtins.list[int] = []
        try:
            synced = await self._store.modify(
                who.org_id, skill_id, self._synced(origin, content, before)
            )
        except Conflict as exc:  # the new version's name is another skill's
            await self._failed(who.org_id, skill_id, exc.detail)
            raise
        return Synced(
            changed=synced.version != before[0],
            from_version=before[0],
            to_version=synced.version,
            skill=synced,
        )

    async def _refetch(self, origin: SkillOrigin) -> tuple[SkillOrigin, SkillContent]:
        if origin.type == "registry":
            entry = self._registry.get(origin.path or "")
            if entry is None:
                raise SkillSourceError(f"the registry no longer has {origin.path!r}")
            return self._from_registry(entry)
        return await self._fetch(origin)

    def _synced(
        self, origin: SkillOrigin, content: SkillContent, before: builtins.list[int]
    ) -> Callable[[Skill], Skill]:
        now = self._clock.now()

        def change(skill: Skill) -> Skill:
            before[:] = [skill.version]
            changed = content.content_hash != skill.content.content_hash
            return msgspec.structs.replace(
                skill,
                source=origin,
                version=skill.version + 1 if changed else skill.version,
                content=content if changed else skill.content,
                name=skill.name if skill.renamed or not changed else content.name,
                status=_status(skill.status != "disabled", None),
                sync_error=None,
                last_synced_at=now,
                updated_at=now,
            )

        return change

    async def _failed(self, org_id: str, skill_id: UUID, error: str) -> None:
        now = self._clock.now()
        await self._store.modify(
            org_id,
            skill_id,
            lambda s: msgspec.structs.replace(
                s,
                status=_status(s.status != "disabled", error),
                sync_error=error,
                last_synced_at=now,
                updated_at=now,
            ),
        )
