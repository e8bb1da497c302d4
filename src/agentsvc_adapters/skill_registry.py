"""The registry of skills shipped with the package (``/api/skills/browse``): one
folder per skill in ``agentsvc_adapters/data/skills/`` (its name is the skill's
id), with its ``SKILL.md`` and resource files, and ``index.json`` giving each its
category and version. Read with importlib.resources once, when the registry is
built; an index that names a missing folder, or a folder the index leaves out,
stops the service at start-up (the skills area then reads each SKILL.md, and one
that is not a skill stops it too)."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from importlib.abc import Traversable

import msgspec

from agentsvc_core.ports.skills import RegistrySkill, SkillRegistry

__all__ = ["PackagedSkills"]


class _Indexed(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: str
    category: str
    version: str


def _files(folder: Traversable, prefix: str = "") -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for entry in folder.iterdir():
        path = f"{prefix}{entry.name}"
        if entry.is_dir():
            found.update(_files(entry, f"{path}/"))
        elif entry.is_file() and entry.name != "__init__.py":
            found[path] = entry.read_bytes()
    return found


class PackagedSkills(SkillRegistry):
    def __init__(self) -> None:
        folder = resources.files("agentsvc_adapters") / "data" / "skills"
        index = msgspec.json.decode((folder / "index.json").read_bytes(), type=list[_Indexed])
        folders = {e.name for e in folder.iterdir() if e.is_dir() and not e.name.startswith("_")}
        named = {i.id for i in index}
        if folders != named:
            raise ValueError(f"skills registry: index and folders differ: {folders ^ named}")
        self._skills = tuple(
            sorted(
                (
                    RegistrySkill(
                        id=i.id, category=i.category, version=i.version, files=_files(folder / i.id)
                    )
                    for i in index
                ),
                key=lambda s: (s.category, s.id),
            )
        )

    def skills(self) -> Sequence[RegistrySkill]:
        return self._skills
