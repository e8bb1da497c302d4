"""A skill's files made into one version's content (``content_of``), within the
bounds a stored skill keeps (docs/skills.md): the ``SKILL.md`` read by
``format.py``, the other files by path, and a hash of them all that tells two
contents apart whatever their source."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from agentsvc_core.entities.skill import SkillContent
from agentsvc_core.errors import InvalidInput
from agentsvc_core.use_cases.skills.format import parse_skill_md

__all__ = ["MAX_FILES", "MAX_FILE_BYTES", "MAX_TOTAL_BYTES", "SKILL_MD", "content_of"]

SKILL_MD = "SKILL.md"
MAX_FILES = 200  # besides SKILL.md
MAX_FILE_BYTES = 1024 * 1024
MAX_TOTAL_BYTES = 5 * 1024 * 1024
MAX_PATH = 512


def _check_path(path: str) -> None:
    parts = path.split("/")
    if (
        not path
        or len(path) > MAX_PATH
        or path.startswith("/")
        or "\\" in path
        or "\x00" in path
        or any(part in ("", ".", "..") for part in parts)
    ):
        raise InvalidInput("files", f"{path[:80]!r} is not a relative path of the skill's folder")


def content_of(files: Mapping[str, bytes]) -> SkillContent:
    """The content of a skill whose folder holds ``files`` (path -> bytes, ``SKILL.md``
    at its top); ``InvalidInput`` naming what is wrong or over a bound."""
    if SKILL_MD not in files:
        raise InvalidInput(SKILL_MD, "the skill's folder has no SKILL.md at its top")
    try:
        text = files[SKILL_MD].decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(SKILL_MD, "not UTF-8 text") from None
    document = parse_skill_md(text)
    others = {path: data for path, data in files.items() if path != SKILL_MD}
    if len(others) > MAX_FILES:
        raise InvalidInput("files", f"at most {MAX_FILES} files besides SKILL.md")
    total = len(files[SKILL_MD])
    for path, data in others.items():
        _check_path(path)
        if len(data) > MAX_FILE_BYTES:
            raise InvalidInput("files", f"{path}: over {MAX_FILE_BYTES} bytes")
        total += len(data)
    if total > MAX_TOTAL_BYTES:
        raise InvalidInput("files", f"over {MAX_TOTAL_BYTES} bytes in all")
    digest = hashlib.sha256()
    for path in sorted(files):
        data = files[path]
        # length-prefixed: no two sets of files hash alike by moving bytes across
        digest.update(f"{len(path)}:{path}:{len(data)}:".encode())
        digest.update(data)
    return SkillContent(
        name=document.name,
        description=document.description,
        body=document.body,
        allowed_tools=document.allowed_tools,
        front_matter=document.extra,
        files=dict(sorted(others.items())),
        content_hash=digest.hexdigest(),
    )
