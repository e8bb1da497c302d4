"""``GitSkillSource``: skills from a git repository (smart HTTP) or one URL.

Every request goes through the outbound guard's client, checked and redirected
as ``http.py`` says: ``https://`` only and no private address, unless
``AGENTSVC_ALLOW_PRIVATE_NETWORK=true``; at most ``MAX_REDIRECTS`` redirects on a
GET, each new URL checked as the first was; the POST that fetches the pack
follows none.

Git's protocol is spoken here over the async client (``wire.py``, ``http.py``),
never dulwich's own HTTP client nor the ``git`` program, which would bypass the
guard; dulwich reads the pkt-lines and the pack and walks the tree
(``objects.py``, in a worker thread).

Bounds, each a constructor argument, each enforced while reading:
``max_bytes`` of answers in all (discovery and pack, or the SKILL.md),
``max_unpacked_bytes`` of objects once inflated (checked before they are),
``max_files`` files and ``max_file_bytes`` for one, ``timeout`` seconds for the
whole fetch.

Errors are ``SkillSourceError`` and name the host, never the URL.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable
from urllib.parse import urlsplit

import anyio.to_thread
import httpx

from agentsvc_adapters.git.errors import GitFailure
from agentsvc_adapters.git.http import MAX_REDIRECTS, Budget, GitHttp, host_of, within
from agentsvc_adapters.git.objects import check_pack, commit_of, skill_files, unpack
from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_core.ports.skill_sources import FetchedSkill, SkillSource, SkillSourceError

__all__ = ["MAX_REDIRECTS", "GitSkillSource"]

_MB = 1024 * 1024


def _path_parts(path: str) -> tuple[str, ...]:
    """``path`` as its parts; an absolute path or one with a ``.``/``..`` part is
    refused (a trailing ``/`` is fine)."""
    if path.startswith("/"):
        raise SkillSourceError(f"path {path!r} must be relative to the repository's top")
    parts = tuple(part for part in path.split("/") if part)
    if any(part in (".", "..") for part in parts):
        raise SkillSourceError(f"path {path!r} may not hold a '.' or '..' part")
    return parts


class GitSkillSource(SkillSource):
    """The ``SkillSource`` over one pooled guarded client (``aclose`` at shutdown);
    ``client`` replaces the guard's own (tests route a name to loopback with it)."""

    def __init__(
        self,
        guard: OutboundGuard,
        *,
        max_bytes: int = 20 * _MB,
        max_unpacked_bytes: int = 100 * _MB,
        max_files: int = 200,
        max_file_bytes: int = 1 * _MB,
        timeout: float = 30.0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self._guard = guard
        self.max_bytes = max_bytes
        self.max_unpacked_bytes = max_unpacked_bytes
        self.max_files = max_files
        self.max_file_bytes = max_file_bytes
        self.timeout = timeout
        self._http = client or guard.http_client(timeout=timeout)
        self._git = GitHttp(guard, self._http, "skill source")

    async def aclose(self) -> None:
        await self._http.aclose()

    async def fetch_git(self, url: str, path: str, ref: str | None) -> FetchedSkill:
        parts = _path_parts(path)
        self._check(url)
        split = urlsplit(url)
        if split.query or split.fragment:
            raise SkillSourceError("a git repository's URL has no query or fragment")
        return await self._within(url, self._fetch_git(url.removesuffix("/"), parts, ref))

    async def fetch_url(self, url: str) -> FetchedSkill:
        self._check(url)
        return await self._within(url, self._fetch_url(url))

    async def _within(self, url: str, work: Awaitable[FetchedSkill]) -> FetchedSkill:
        try:
            return await within(self.timeout, f"fetching from {host_of(url)}", work)
        except GitFailure as exc:
            raise SkillSourceError(str(exc)) from None

    async def _fetch_git(self, url: str, parts: tuple[str, ...], ref: str | None) -> FetchedSkill:
        budget = Budget(self.max_bytes, "the download")
        base, adv = await self._git.discover(url, "git-upload-pack", budget)
        want = adv.want(ref)
        pack = await self._git.fetch_pack(base, adv, want, budget)

        def work() -> FetchedSkill:
            check_pack(pack, max_unpacked=self.max_unpacked_bytes)
            store = unpack(pack)
            commit = commit_of(store, want)
            files = skill_files(
                store, commit, parts, max_files=self.max_files, max_file_bytes=self.max_file_bytes
            )
            return FetchedSkill(files=files, resolved_ref=commit.decode())

        # abandoned on a timeout: the fetch fails on time, and the work, bounded by
        # the sizes above, ends in its thread
        return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)

    async def _fetch_url(self, url: str) -> FetchedSkill:
        budget = Budget(self.max_file_bytes, "the SKILL.md")
        body = bytearray()
        found, content_type = await self._git.get(url, budget, body.extend, git=False)
        if content_type in ("text/html", "application/xhtml+xml"):
            raise SkillSourceError(
                f"{host_of(found)} answered an HTML page, not a SKILL.md (on a git host, "
                "use the file's raw URL)"
            )
        digest = hashlib.sha256(body).hexdigest()
        return FetchedSkill(files={"SKILL.md": bytes(body)}, resolved_ref=f"sha256:{digest}")

    def _check(self, url: str) -> None:
        try:
            self._git.check(url)
        except GitFailure as exc:
            raise SkillSourceError(str(exc)) from None
