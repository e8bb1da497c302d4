"""Skills for tests that need some in a store: inline skills made as the skills
area makes them (their content read from a SKILL.md)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from uuid import UUID

from agentsvc_core.entities.skill import Skill, SkillBinding, SkillOrigin
from agentsvc_core.ports.skills import SkillStore
from agentsvc_core.use_cases.skills.content import content_of

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def skill_md(name: str, description: str = "does a thing", body: str = "the steps") -> bytes:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}\n".encode()


def inline_skill(
    org_id: str, name: str, description: str = "does a thing", body: str = "the steps"
) -> Skill:
    return Skill(
        id=uuid.uuid4(),
        org_id=org_id,
        name=name,
        renamed=False,
        source=SkillOrigin(type="inline"),
        version=1,
        content=content_of({"SKILL.md": skill_md(name, description, body)}),
        status="active",
        sync_error=None,
        last_synced_at=None,
        created_at=T0,
        updated_at=T0,
    )


async def stored_skills(store: SkillStore, org_id: str, count: int) -> list[UUID]:
    """``count`` skills of the organization (``skill-0``...), their ids in order."""
    ids = []
    for n in range(count):
        skill = inline_skill(org_id, f"skill-{n}")
        await store.add(skill)
        ids.append(skill.id)
    return ids


def bound(*ids: UUID) -> list[SkillBinding]:
    return [SkillBinding(skill_id=i) for i in ids]
