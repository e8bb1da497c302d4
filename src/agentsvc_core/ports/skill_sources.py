"""Where a skill's files come from: a git repository or one SKILL.md over HTTPS.

A skill is a directory with a ``SKILL.md`` (YAML front matter, then Markdown) and
optional resource files. A ``SkillSource`` fetches one, and fetches it again on a
sync; reading the front matter and storing the files are the skills area's job.

Contract of every implementation:

- Every request goes through the outbound guard (``https://`` only and no private
  address unless the operator allows private networks); a redirect, where one is
  followed, is checked like the first URL.
- Bounds hold while reading, never after: the bytes downloaded, the number of
  files, one file's size and the time of the whole fetch. Past one, the fetch
  fails; nothing partial is returned.
- Only regular files come back, under their paths relative to the skill's
  directory, ``/``-separated, none absolute and none with a ``..`` or ``.`` part;
  symbolic links and submodules are left out. ``SKILL.md`` is always among them
  (at the top of the directory), or the fetch fails.

Every method raises ``SkillSourceError`` and nothing else on purpose.
"""

from __future__ import annotations

from typing import Protocol

import msgspec

from agentsvc_core.errors import DomainError

__all__ = ["FetchedSkill", "SkillSource", "SkillSourceError"]


class SkillSourceError(DomainError):
    """A skill could not be fetched. ``detail`` says why in words a user can act on
    and never carries a secret (it names the host, never the URL, whose query may
    hold a token): the host could not be reached; the outbound guard refused the
    URL (``refused by the outbound guard: ...``); the URL is not a git repository
    (or not one served over smart HTTP); the ref, the path or the ``SKILL.md`` was
    not found; the download, a file or the number of files is over its bound; the
    fetch did not finish in time; the server answered an error."""


class FetchedSkill(msgspec.Struct, frozen=True, kw_only=True):
    """A skill's files as fetched. ``files``: path relative to the skill's
    directory (``/``-separated; ``SKILL.md`` among them) -> content.
    ``resolved_ref``: what was fetched, to tell a changed skill from the same one
    on a sync (a git commit's full sha; for a URL, ``sha256:`` and the hex digest
    of the body)."""

    files: dict[str, bytes]
    resolved_ref: str


class SkillSource(Protocol):
    """Fetches skills; every method raises ``SkillSourceError`` (module docstring)."""

    async def fetch_git(self, url: str, path: str, ref: str | None) -> FetchedSkill:
        """The regular files under directory ``path`` (``""``: the repository's top)
        of the commit ``ref`` names in the repository at ``url``: a branch, a tag
        (a branch of that name wins over a tag), a ``refs/...`` name or a full
        commit sha; None is the remote's HEAD. ``resolved_ref`` is that commit's
        sha. A ``path`` that is absolute or holds a ``..`` part is refused."""
        ...

    async def fetch_url(self, url: str) -> FetchedSkill:
        """One ``SKILL.md`` from ``url`` (``files`` holds only ``SKILL.md``);
        ``resolved_ref`` is ``sha256:<hex digest of the body>``, so a sync sees a
        change whatever the server's caching headers say."""
        ...
