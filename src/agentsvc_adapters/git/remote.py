"""``GitHttpRemote``: the ``GitRemote`` port (``agentsvc_core/ports/git_remotes.py``)
over git's smart HTTP, through the outbound guard (``http.py``), never
dulwich's own HTTP client nor the ``git`` program.

``fetch``: discovery (``info/refs?service=git-upload-pack``), then one shallow
``git-upload-pack`` for the commit ``ref`` names; the pack is checked before it
is unpacked (``objects.py``) and the commit's whole tree comes back as a
``Snapshot``: its regular files with their executable bit, its links and
submodules named in ``skipped``.

``push``: the base commit is fetched again the same way (with the branch's tip,
when the branch exists; nothing is kept between calls, so a push after a
restart works as well), the new commit is made on its tree (``commits.py``),
and the pack of the new objects goes to ``git-receive-pack`` with the command
that creates ``refs/heads/<branch>`` (the old sha all zeros: the server refuses
it if the branch exists). The server's report is read; an ``ng`` is the
server's refusal. A branch that already holds the same change (a retry of a
push whose answer was lost) answers that commit, as the first push did; a
branch holding anything else is refused before anything is sent.

Credentials: the token goes as HTTP Basic (``x-access-token:<token>``) to the
repository's own origin only, never into an error or a log line.

Bounds, each a constructor argument: ``max_bytes`` of answers for one fetch (and
of changes for one push), ``max_unpacked_bytes`` of objects once inflated,
``max_files`` files and ``max_file_bytes`` for one, ``timeout`` seconds for a
whole fetch or push. Everything is held in memory while a call runs: about
``max_bytes`` plus twice ``max_unpacked_bytes`` at most. Errors are
``GitRemoteError``, ``permanent`` unless the network, a time bound or the
server's own trouble (5xx) was the cause.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar
from urllib.parse import urlsplit

import anyio.to_thread
import httpx
from dulwich.object_store import MemoryObjectStore
from dulwich.objects import Commit

from agentsvc_adapters.git.commits import (
    build,
    check_author,
    check_branch,
    check_path,
    pack_of,
    same_change,
)
from agentsvc_adapters.git.errors import GitFailure
from agentsvc_adapters.git.http import Auth, Budget, GitHttp, host_of, within
from agentsvc_adapters.git.objects import check_pack, commit_of, lookup, tree_files, unpack
from agentsvc_adapters.git.wire import ReportReceiver, receive_request
from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_core.ports.git_remotes import (
    GitRemote,
    GitRemoteError,
    PushResult,
    Snapshot,
    SnapshotFile,
)

__all__ = ["GitHttpRemote"]

_MB = 1024 * 1024
_SHA = re.compile(r"[0-9a-f]{40}")
_T = TypeVar("_T")


class GitHttpRemote(GitRemote):
    """Over one pooled guarded client (``aclose`` at shutdown); ``client``
    replaces the guard's own, ``now`` the clock that dates commits (seconds)."""

    def __init__(
        self,
        guard: OutboundGuard,
        *,
        max_bytes: int = 50 * _MB,
        max_unpacked_bytes: int = 200 * _MB,
        max_files: int = 20_000,
        max_file_bytes: int = 10 * _MB,
        timeout: float = 120.0,
        client: httpx.AsyncClient | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.max_bytes = max_bytes
        self.max_unpacked_bytes = max_unpacked_bytes
        self.max_files = max_files
        self.max_file_bytes = max_file_bytes
        self.timeout = timeout
        self._now = now
        self._http = client or guard.http_client(timeout=timeout)
        self._git = GitHttp(guard, self._http, "git remote")

    async def aclose(self) -> None:
        await self._http.aclose()

    async def fetch(self, url: str, ref: str | None, token: str | None) -> Snapshot:
        async def work() -> Snapshot:
            repo = self._repo(url)
            return await self._fetch(repo, ref, Auth(repo, token) if token else None)

        return await self._run(f"fetching from {_shown(url)}", work())

    async def push(
        self,
        url: str,
        token: str | None,
        *,
        base: str,
        branch: str,
        changes: Mapping[str, bytes | None],
        message: str,
        author: str,
    ) -> PushResult:
        async def work() -> PushResult:
            repo = self._repo(url)
            self._check_push(base, branch, changes, author)
            auth = Auth(repo, token) if token else None
            new = await self._push(repo, auth, base, branch, changes, message, author)
            return PushResult(commit=new, branch=branch)

        return await self._run(f"pushing to {_shown(url)}", work())

    async def _run(self, doing: str, work: Awaitable[_T]) -> _T:
        try:
            return await within(self.timeout, doing, work)
        except GitFailure as exc:
            raise GitRemoteError(str(exc), permanent=exc.permanent) from None

    def _repo(self, url: str) -> str:
        self._git.check(url)
        split = urlsplit(url)
        if split.query or split.fragment:
            raise GitFailure("a git repository's URL has no query or fragment")
        return url.removesuffix("/")

    def _check_push(
        self, base: str, branch: str, changes: Mapping[str, bytes | None], author: str
    ) -> None:
        if not _SHA.fullmatch(base):
            raise GitFailure(f"the base must be a full commit sha, not {base!r}")
        check_branch(branch)
        check_author(author)
        total = 0
        for path, data in changes.items():
            check_path(path)
            size = len(data or b"")
            if size > self.max_file_bytes:
                raise GitFailure(
                    f"{path} is larger than {self.max_file_bytes} bytes, the limit for one file"
                )
            total += size
        if total > self.max_bytes:
            raise GitFailure(f"the changes are larger than {self.max_bytes} bytes")

    def _unpack(self, pack: bytes) -> MemoryObjectStore:
        check_pack(pack, max_unpacked=self.max_unpacked_bytes)
        return unpack(pack)

    async def _fetch(self, repo: str, ref: str | None, auth: Auth | None) -> Snapshot:
        budget = Budget(self.max_bytes, "the download")
        base, adv = await self._git.discover(repo, "git-upload-pack", budget, auth)
        want = adv.want(ref)
        pack = await self._git.fetch_pack(base, adv, want, budget, auth=auth)

        def work() -> Snapshot:
            store = self._unpack(pack)
            commit = commit_of(store, want)
            files, skipped = tree_files(
                store, commit, max_files=self.max_files, max_file_bytes=self.max_file_bytes
            )
            return Snapshot(
                commit=commit.decode(),
                ref=ref if ref is not None else adv.default_branch(),
                files=tuple(SnapshotFile(path=p, data=d, executable=x) for p, d, x in files),
                skipped=tuple(skipped),
            )

        # abandoned on a timeout: the fetch fails on time, and the work, bounded by
        # the sizes above, ends in its thread
        return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)

    async def _push(
        self,
        repo: str,
        auth: Auth | None,
        base: str,
        branch: str,
        changes: Mapping[str, bytes | None],
        message: str,
        author: str,
    ) -> str:
        """The new commit's sha, pushed (module docstring)."""
        ref = f"refs/heads/{branch}".encode()
        budget = Budget(self.max_bytes, "the download")
        found, adv = await self._git.discover(repo, "git-upload-pack", budget, auth)
        tip = adv.refs.get(ref)
        also = (tip,) if tip is not None else ()
        pack = await self._git.fetch_pack(found, adv, base.encode(), budget, also=also, auth=auth)
        when = int(self._now())

        def work() -> tuple[Commit, bytes, bool]:
            store = self._unpack(pack)
            made = build(store, base.encode(), changes, message=message, author=author, when=when)
            if tip is None:
                return made.commit, pack_of(made.new), False
            return made.commit, b"", same_change(lookup(store, tip, Commit), made.commit)

        commit, new_pack, same = await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        host = host_of(found)
        if tip is not None:
            if same:
                return tip.decode()
            raise GitFailure(f"branch {branch!r} already exists on {host}")
        answers = Budget(self.max_bytes, "the answers to the push")
        target, rp = await self._git.discover(repo, "git-receive-pack", answers, auth)
        if ref in rp.refs:  # made in the meantime
            if rp.refs[ref] == commit.id:
                return commit.id.decode()
            raise GitFailure(f"branch {branch!r} already exists on {host}")
        receiver = ReportReceiver(sideband=b"side-band-64k" in rp.capabilities)
        body = receive_request(commit.id, ref, rp.capabilities, new_pack)
        await self._git.post(target, body, "git-receive-pack", answers, receiver.feed, auth=auth)
        receiver.finish(host_of(target), ref)
        return commit.id.decode()


def _shown(url: str) -> str:
    """The host to name in a time bound's error (a URL the guard may not have
    checked yet: its host, or "the repository")."""
    try:
        return urlsplit(url).hostname or "the repository"
    except ValueError:
        return "the repository"
