"""Skills in memory: each skill with every version it had. A name is one skill's in
its organization, as PostgreSQL's unique index makes it; nothing awaits inside a
call, so no other call sees one half done."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from uuid import UUID

import msgspec

from agentsvc_core.entities.skill import Skill, SkillBinding, SkillContent, SkillEntry
from agentsvc_core.errors import Conflict, NotFound
from agentsvc_core.ports.skills import SkillStore


def name_taken(name: str) -> Conflict:
    return Conflict(f"a skill named {name!r} exists already", "SKILL_NAME_TAKEN")


class MemorySkills(SkillStore):
    def __init__(self) -> None:
        self._skills: dict[tuple[str, UUID], Skill] = {}
        self._versions: dict[tuple[str, UUID, int], SkillContent] = {}

    def _get(self, org_id: str, skill_id: UUID) -> Skill:
        try:
            return self._skills[(org_id, skill_id)]
        except KeyError:
            raise NotFound("skill not found") from None

    def _check_name(self, skill: Skill) -> None:
        for (org, other_id), other in self._skills.items():
            if org == skill.org_id and other_id != skill.id and other.name == skill.name:
                raise name_taken(skill.name)

    async def add(self, skill: Skill) -> None:
        self._check_name(skill)
        self._skills[(skill.org_id, skill.id)] = skill
        self._versions[(skill.org_id, skill.id, skill.version)] = skill.content

    async def get(self, org_id: str, skill_id: UUID) -> Skill:
        return self._get(org_id, skill_id)

    async def modify(self, org_id: str, skill_id: UUID, change: Callable[[Skill], Skill]) -> Skill:
        current = self._get(org_id, skill_id)
        updated = change(current)
        self._check_name(updated)
        if updated.version > current.version:
            self._versions[(org_id, skill_id, updated.version)] = updated.content
        else:
            updated = msgspec.structs.replace(updated, content=current.content)
        self._skills[(org_id, skill_id)] = updated
        return updated

    async def delete(self, org_id: str, skill_id: UUID) -> None:
        self._get(org_id, skill_id)
        del self._skills[(org_id, skill_id)]
        for key in [k for k in self._versions if k[:2] == (org_id, skill_id)]:
            del self._versions[key]

    async def version(self, org_id: str, skill_id: UUID, version: int) -> SkillContent | None:
        return self._versions.get((org_id, skill_id, version))

    async def entries(self, org_id: str, bindings: Sequence[SkillBinding]) -> list[SkillEntry]:
        found = []
        for b in bindings:
            skill = self._skills.get((org_id, b.skill_id))
            if not b.enabled or skill is None or skill.status == "disabled":
                continue
            version = b.pinned_version or skill.version
            content = self._versions.get((org_id, b.skill_id, version))
            if content is None:
                continue
            found.append(
                SkillEntry(
                    skill_id=skill.id,
                    name=skill.name,
                    description=content.description,
                    version=version,
                )
            )
        return found

    async def list(self, org_id: str) -> list[Skill]:
        mine = [s for (org, _), s in self._skills.items() if org == org_id]
        return sorted(mine, key=lambda s: (s.created_at, s.id))
