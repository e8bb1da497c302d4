"""A session's end of work: the changed files read back from the sandbox, pushed
as one commit on a new branch, and the pull request opened (``finished``).

Each part is recorded before the next: the push's commit and branch, then the
pull request. Done again after a killed process, the push answers as the first
did (``GitRemote.push``: the same commit to the same branch) and the host answers
the pull request already open (``GitHost.open_pull_request``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from agentsvc_core.entities.code_session import CodeSession
from agentsvc_core.errors import DomainError
from agentsvc_core.ports import Clock, SecretBox
from agentsvc_core.ports.code_sessions import NewEvent
from agentsvc_core.ports.git_remotes import (
    GitHost,
    GitHostError,
    GitRemote,
    GitRemoteError,
    Snapshot,
)
from agentsvc_core.use_cases.code_sessions import transitions as t
from agentsvc_core.use_cases.code_sessions.creating import Apply, Failure, open_token
from agentsvc_core.use_cases.code_sessions.finish import changed_files, span
from agentsvc_core.use_cases.code_sessions.tools import Workspace, unified_diff

__all__ = ["HandingBack", "branch_of"]


def branch_of(session: CodeSession) -> str:
    return f"{session.work.branch_prefix}{session.id.hex[:8]}"


def _summary(session: CodeSession) -> str:
    for turn in reversed(session.work.transcript):
        if turn.role == "assistant" and turn.content:
            return turn.content
    return session.prompt


class HandingBack:
    def __init__(
        self,
        box: SecretBox,
        clock: Clock,
        remote: GitRemote,
        hosts: Sequence[GitHost],
        author: str,
        snapshots: dict[Any, Snapshot],
    ) -> None:
        self._box = box
        self._clock = clock
        self._remote = remote
        self._hosts = hosts
        self._author = author
        self._snapshots = snapshots

    async def finish(self, session: CodeSession, ws: Workspace, apply: Apply) -> Failure | None:
        token = open_token(self._box, session)
        if session.work.pushed_commit is None:
            went = await self._push(session, ws, apply, token)
            if isinstance(went, Failure) or went is None:
                return went
            session = went
        if session.work.auto_create_pr and session.pr_url is None:
            failed = await self._pull_request(session, apply, token)
            if failed is not None:
                return failed
        now = self._clock.now()
        await apply(session, lambda s: t.ended(s, "finished", now))
        return None

    async def _push(
        self, session: CodeSession, ws: Workspace, apply: Apply, token: str | None
    ) -> CodeSession | Failure | None:
        try:
            changes = await changed_files(ws.provider, ws.ref, ws.spec, session.work.hashes)
        except ValueError as exc:
            return Failure(str(exc), True)
        except DomainError as exc:
            return Failure(f"the changed files could not be read: {exc.detail}", False)
        now = self._clock.now()
        if not changes:
            notice = NewEvent("notice", {"text": "no file changed: nothing to push"})
            await apply(session, lambda s: t.ended(s, "finished", now, events=[notice]))
            return None
        branch = branch_of(session)
        assert session.work.base_commit is not None
        began = self._clock.now()
        try:
            pushed = await self._remote.push(
                session.repo_url,
                token,
                base=session.work.base_commit,
                branch=branch,
                changes=changes,
                message=session.title,
                author=self._author,
            )
        except GitRemoteError as exc:
            return Failure(f"the push failed: {exc.detail}", exc.permanent)
        done = self._clock.now()
        old = await self._originals(session, token)
        events = [
            NewEvent(
                "file_change",
                {
                    "path": path,
                    "change": "deleted"
                    if data is None
                    else ("modified" if path in session.work.hashes else "added"),
                    "diff": unified_diff(path, old.get(path), data) if old is not None else None,
                    "final": True,
                },
            )
            for path, data in changes.items()
        ]
        events.append(
            NewEvent("notice", {"text": f"pushed {pushed.commit[:12]} to {pushed.branch}"})
        )
        pushed_span = span(
            "git push", "tool", began, done, attributes={"agentsvc.git.branch": pushed.branch}
        )
        session, _ = await apply(
            session,
            lambda s: _with(
                t.recorded(
                    s,
                    done,
                    events,
                    pushed_commit=pushed.commit,
                    spans=(*s.work.spans, pushed_span),
                ),
                branch=pushed.branch,
            ),
        )
        return session

    async def _originals(self, session: CodeSession, token: str | None) -> dict[str, bytes] | None:
        """The files as checked out (for the diffs): this process's copy, or the
        base commit fetched again; None when neither can be had."""
        snapshot = self._snapshots.get(session.id)
        if snapshot is None and session.work.base_commit is not None:
            try:
                snapshot = await self._remote.fetch(
                    session.repo_url, session.work.base_commit, token
                )
            except DomainError:
                return None
        if snapshot is None:
            return None
        return {f.path: f.data for f in snapshot.files}

    async def _pull_request(
        self, session: CodeSession, apply: Apply, token: str | None
    ) -> Failure | None:
        host = next((h for h in self._hosts if h.serves(session.repo_url)), None)
        now = self._clock.now()
        if host is None:
            notice = NewEvent(
                "notice", {"text": "no git host adapter serves this repository: no pull request"}
            )
            await apply(session, lambda s: t.recorded(s, now, [notice]))
            return None
        assert session.branch is not None
        try:
            pr = await host.open_pull_request(
                session.repo_url,
                token,
                head=session.branch,
                base=session.ref or "main",
                title=session.title,
                body=_summary(session),
            )
        except GitHostError as exc:
            return Failure(f"the pull request could not be opened: {exc.detail}", exc.permanent)
        done = self._clock.now()
        event = NewEvent(
            "pull_request", {"url": pr.url, "number": pr.number, "branch": session.branch}
        )
        pr_span = span("git pull_request", "tool", now, done, attributes={"url.full": pr.url})
        await apply(
            session,
            lambda s: _with(
                t.recorded(s, done, [event], spans=(*s.work.spans, pr_span)), pr_url=pr.url
            ),
        )
        return None


def _with(outcome: t.Outcome, **fields: Any) -> t.Outcome:
    """``outcome`` with the session's ``fields`` changed too (in the same write)."""
    if outcome is None:
        return None
    return msgspec.structs.replace(outcome[0], **fields), outcome[1]
