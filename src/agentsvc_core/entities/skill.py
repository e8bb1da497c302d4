"""Skills (docs/skills.md): a ``SKILL.md`` (name, description, body) and the files
beside it, kept in versions, fetched from where its author keeps it, and bound to
agents and runners.

- ``SkillContent``: one version's content, as read from its files; ``content_hash``
  tells two contents apart whatever their source.
- ``Skill``: the skill as the organization keeps it, with its current version's
  content. ``name`` is the content's unless the skill was renamed (``renamed``).
- ``SkillBinding``: a skill given to an agent or a runner, at its current version
  or ``pinned_version``.
- ``SkillEntry``: what the model sees of an attached skill before it loads it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import msgspec

__all__ = [
    "Skill",
    "SkillBinding",
    "SkillContent",
    "SkillEntry",
    "SkillOrigin",
    "SkillSourceType",
    "SkillStatus",
]

SkillSourceType = Literal["inline", "git", "url", "registry"]
SkillStatus = Literal["active", "disabled", "error"]


class SkillOrigin(msgspec.Struct, frozen=True, kw_only=True):
    """Where the skill's files come from. ``git``: ``url`` (the repository), ``path``
    (its folder in it), ``ref`` (as asked; None: the default branch) and
    ``resolved_ref`` (the commit fetched). ``url``: one SKILL.md; ``resolved_ref``
    is ``sha256:`` of its body. ``registry``: ``path`` is the registry's id of the
    skill and ``resolved_ref`` the registry's version. ``inline``: none of them."""

    type: SkillSourceType
    url: str | None = None
    path: str | None = None
    ref: str | None = None
    resolved_ref: str | None = None


class SkillContent(msgspec.Struct, frozen=True, kw_only=True):
    """One version of a skill: its SKILL.md read, and its other files by path."""

    name: str
    description: str
    body: str
    allowed_tools: tuple[str, ...] = ()
    front_matter: dict[str, Any] = {}  # the front matter's other keys
    files: dict[str, bytes] = {}  # resource files (SKILL.md is not among them)
    content_hash: str  # sha256 hex over SKILL.md and the files


class Skill(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    org_id: str
    name: str
    renamed: bool  # ``name`` was set by a rename and a new version keeps it
    source: SkillOrigin
    version: int  # the current version, from 1
    content: SkillContent  # the current version's
    status: SkillStatus
    sync_error: str | None
    last_synced_at: datetime | None
    created_at: datetime
    updated_at: datetime


class SkillBinding(msgspec.Struct, frozen=True, kw_only=True):
    skill_id: UUID
    pinned_version: int | None = None
    enabled: bool = True


class SkillEntry(msgspec.Struct, frozen=True, kw_only=True):
    """An attached skill as a turn offers it: the name the model loads it by, its
    description, and the version the binding chose."""

    skill_id: UUID
    name: str
    description: str
    version: int
