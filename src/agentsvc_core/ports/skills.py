"""Storage of skills (``Storage.skills``) and the registry of skills shipped with the
package (``SkillRegistry``).

Every store call is scoped by organization; another organization's skill is
``NotFound``. A skill's name is unique in its organization (the model loads a
skill by it): a second one is ``Conflict`` ``SKILL_NAME_TAKEN``. Every version a
skill had is kept, so a binding pinned to one still reads it after a sync.
Adapters raise what storage raises (``NotFound``, ``Conflict``, ``StorageError``,
``Unavailable``).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Protocol
from uuid import UUID

import msgspec

from agentsvc_core.entities.skill import Skill, SkillBinding, SkillContent, SkillEntry

__all__ = ["RegistrySkill", "SkillRegistry", "SkillStore"]


class SkillStore(Protocol):
    async def add(self, skill: Skill) -> None:
        """Store a new skill and its first version. Raises ``Conflict``
        (``SKILL_NAME_TAKEN``)."""
        ...

    async def get(self, org_id: str, skill_id: UUID) -> Skill:
        """With its current version's content. Raises ``NotFound``."""
        ...

    async def list(self, org_id: str) -> list[Skill]:
        """Oldest first, each with its current version's content."""
        ...

    async def modify(self, org_id: str, skill_id: UUID, change: Callable[[Skill], Skill]) -> Skill:
        """Atomic read-change-write. When the changed skill's ``version`` is past the
        stored one, its ``content`` is stored as that new version (the older ones
        stay). ``change`` may raise to refuse. Raises ``NotFound``, ``Conflict``
        (``SKILL_NAME_TAKEN``)."""
        ...

    async def delete(self, org_id: str, skill_id: UUID) -> None:
        """The skill and its versions. Raises ``NotFound``."""
        ...

    async def version(self, org_id: str, skill_id: UUID, version: int) -> SkillContent | None:
        """One version's content (None: no such skill or version)."""
        ...

    async def entries(
        self, org_id: str, bindings: Sequence[SkillBinding]
    ) -> builtins.list[SkillEntry]:
        """What a turn offers of ``bindings``, in their order, in one read: each
        enabled binding whose skill exists, is not disabled and has the version it
        pins (its current one when it pins none); the others are left out."""
        ...


class RegistrySkill(msgspec.Struct, frozen=True, kw_only=True):
    """A skill of the shipped registry: ``id`` (its folder's name), its category
    and version, and its files (``SKILL.md`` among them)."""

    id: str
    category: str
    version: str
    files: dict[str, bytes]


class SkillRegistry(Protocol):
    def skills(self) -> Sequence[RegistrySkill]:
        """Every shipped skill, ordered by category, then id. Pure: no I/O per call."""
        ...
