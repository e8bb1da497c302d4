"""Git remotes and git hosts: what a code session (``use_cases/code_sessions``)
needs to check out a repository and hand its work back (docs/code-agents.md).

Git is spoken by the service, over the outbound guard's client
(``agentsvc_adapters/git``, the adapter skills fetch with), never by a ``git``
program inside a sandbox with a network of its own: the session fetches a
``Snapshot`` of the repository at a ref, writes its files into the sandbox, and
when the model is done reads the changed files back and ``push``es one commit on a
new branch. A ``GitHost`` (GitHub's REST API first) then opens the pull request.

Credentials are the code agent's git credential, opened by the use case for the
one call and never kept by an adapter: a token sent as HTTP Basic (``x-access-token``
and the token, as GitHub and GitLab take it) to the git remote, and as a bearer
token to the host's API. Errors are ``GitRemoteError`` / ``GitHostError``; their
``detail`` names the host, never the URL's credentials nor the token.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import msgspec

from agentsvc_core.errors import DomainError

__all__ = [
    "GitHost",
    "GitHostError",
    "GitRemote",
    "GitRemoteError",
    "PullRequest",
    "PushResult",
    "Snapshot",
    "SnapshotFile",
]


class SnapshotFile(msgspec.Struct, frozen=True, kw_only=True):
    path: str  # relative, "/"-separated
    data: bytes
    executable: bool = False


class Snapshot(msgspec.Struct, frozen=True, kw_only=True):
    """A repository's tree at one commit (regular files only: links and
    submodules are listed in ``skipped``, not followed)."""

    commit: str  # the hex sha of the commit checked out
    ref: str  # the branch or tag asked for, or the remote's default branch (e.g. "main")
    files: tuple[SnapshotFile, ...]
    skipped: tuple[str, ...] = ()


class PushResult(msgspec.Struct, frozen=True, kw_only=True):
    commit: str  # the hex sha of the new commit
    branch: str


class PullRequest(msgspec.Struct, frozen=True, kw_only=True):
    url: str  # the pull request's page (GitHub's ``html_url``)
    number: int


class GitRemoteError(DomainError):
    """The remote refused or could not be reached; ``permanent`` when trying again
    cannot help (bad credential, unknown ref, a refusal of the outbound guard, a
    repository past the size limits)."""

    def __init__(self, detail: str, *, permanent: bool) -> None:
        super().__init__(detail)
        self.permanent = permanent


class GitHostError(DomainError):
    """The git host's API refused the pull request or could not be reached."""

    def __init__(self, detail: str, *, permanent: bool) -> None:
        super().__init__(detail)
        self.permanent = permanent


class GitRemote(Protocol):
    async def fetch(self, url: str, ref: str | None, token: str | None) -> Snapshot:
        """The tree at ``ref`` (a branch, a tag or a full commit sha advertised by
        the remote; None: the default branch), within the adapter's size bounds."""
        ...

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
        """One commit on ``base`` with ``changes`` (a path's new content, or None
        for a deleted file), pushed as the new branch ``branch`` (refused, as
        ``GitRemoteError``, when the branch exists). ``author`` is "Name <email>".
        Pushing the same commit to the same branch again answers as the first did."""
        ...


class GitHost(Protocol):
    def serves(self, repo_url: str) -> bool:
        """Whether this host opens pull requests for that repository's URL."""
        ...

    async def open_pull_request(
        self, repo_url: str, token: str | None, *, head: str, base: str, title: str, body: str
    ) -> PullRequest:
        """Opens one, or answers the open one with the same head (a retry)."""
        ...
