"""A session's sandbox: made and filled at ``creating`` (the repository fetched
through the ``GitRemote`` and written into it, each file's sha1 kept), resumed
when a job takes a ``running`` session again.

``creating`` may be done twice (a process killed half-way): the sandbox's ref is
recorded as soon as it is started, so the second pass resumes that sandbox and
writes the files again (writing a file twice is the same as once)."""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import msgspec

from agentsvc_core.entities.code_session import CodeSession
from agentsvc_core.errors import DomainError
from agentsvc_core.ports import Clock, SecretBox
from agentsvc_core.ports.code_sessions import Change, NewEvent
from agentsvc_core.ports.git_remotes import GitRemote, GitRemoteError, Snapshot
from agentsvc_core.ports.sandboxes import (
    SandboxGone,
    SandboxProvider,
    SandboxSpec,
    SandboxUnavailable,
)
from agentsvc_core.use_cases.code_sessions import transitions as t
from agentsvc_core.use_cases.code_sessions.finish import sha1, span
from agentsvc_core.use_cases.code_sessions.sessions import session_context
from agentsvc_core.use_cases.code_sessions.tools import Workspace

__all__ = ["Apply", "Creating", "Failure", "open_token"]

Apply = Callable[[CodeSession, Change], Awaitable[tuple[CodeSession, list[Any]]]]


class Failure(msgspec.Struct, frozen=True):
    """Why a step could not be done: ``permanent`` ends the session, else the job
    tries again later."""

    detail: str
    permanent: bool


def open_token(box: SecretBox, session: CodeSession) -> str | None:
    sealed = session.work.credential_sealed
    if sealed is None:
        return None
    return box.open(sealed, session_context(session.org_id, session.id)).decode()


class Creating:
    def __init__(
        self,
        box: SecretBox,
        clock: Clock,
        providers: Mapping[str, SandboxProvider],
        remote: GitRemote,
        default_provider: str | None,
        snapshots: dict[Any, Snapshot],
    ) -> None:
        self._box = box
        self._clock = clock
        self._providers = providers
        self._remote = remote
        self._default = default_provider
        self._snapshots = snapshots

    def spec(self, session: CodeSession) -> SandboxSpec:
        c = session.work.computer
        return SandboxSpec(
            instance_id=str(session.id),
            org_id=session.org_id,
            persistent=True,  # a session waiting for its user keeps its files
            memory_mb=c.memory_mb,
            network=c.network,
            allowed_hosts=c.allowed_hosts,
        )

    def _provider_name(self, session: CodeSession) -> str | None:
        chosen = session.work.provider or session.work.computer.provider or self._default
        if chosen is None and self._providers:
            chosen = next(iter(self._providers))
        return chosen

    async def create(self, session: CodeSession, apply: Apply) -> Failure | None:
        name = self._provider_name(session)
        provider = self._providers.get(name or "")
        if name is None or provider is None:
            named = f" {name}" if name else ""
            return Failure(f"no sandbox provider{named} is configured", True)
        lacks = provider.missing()
        if lacks is not None:
            return Failure(lacks, True)
        spec = self.spec(session)
        now = self._clock.now()
        try:
            started = await provider.start(spec, resume=session.work.sandbox_ref)
            ref = started.ref
            if ref != session.work.sandbox_ref:
                session, _ = await apply(
                    session,
                    lambda s: t.recorded(s, now, [], provider=name, sandbox_ref=ref),
                )
            token = open_token(self._box, session)
            began = self._clock.now()
            snapshot = await self._remote.fetch(session.repo_url, session.ref, token)
            fetched = span(
                "git fetch",
                "tool",
                began,
                self._clock.now(),
                attributes={"agentsvc.git.commit": snapshot.commit},
            )
            for file in snapshot.files:
                await provider.write_file(ref, file.path, file.data)
            runnable = [f.path for f in snapshot.files if f.executable]
            if runnable:
                command = "chmod +x -- " + " ".join(shlex.quote(p) for p in runnable)
                async for _ in provider.exec(ref, spec, command, timeout_s=60.0):
                    pass
        except GitRemoteError as exc:
            return Failure(f"the repository could not be fetched: {exc.detail}", exc.permanent)
        except SandboxUnavailable as exc:
            return Failure(f"the sandbox is unavailable: {exc.detail}", False)
        except (SandboxGone, DomainError) as exc:
            return Failure(f"the sandbox failed: {exc.detail}", True)
        self._snapshots[session.id] = snapshot
        hashes = {f.path: sha1(f.data) for f in snapshot.files}
        events = [
            NewEvent(
                "notice",
                {
                    "text": f"checked out {snapshot.ref} at {snapshot.commit[:12]}",
                    "files": len(snapshot.files),
                    "skipped": list(snapshot.skipped[:100]),
                },
            )
        ]
        done = self._clock.now()
        await apply(
            session,
            lambda s: _running(
                t.recorded(
                    s,
                    done,
                    events,
                    base_commit=snapshot.commit,
                    hashes=hashes,
                    attempts=0,
                    spans=(*s.work.spans, fetched),
                ),
                snapshot.ref,
                done,
            ),
        )
        return None

    async def resume(
        self, session: CodeSession, cancelled: Callable[[], Awaitable[bool]]
    ) -> Workspace | Failure:
        """The running session's sandbox, started again if it was stopped; a
        sandbox that lost its files ends the session (announced, never hidden)."""
        work = session.work
        provider = self._providers.get(work.provider or "")
        if provider is None or work.sandbox_ref is None:
            return Failure(f"the sandbox provider {work.provider} is not configured", True)
        spec = self.spec(session)
        try:
            started = await provider.start(spec, resume=work.sandbox_ref)
        except SandboxUnavailable as exc:
            return Failure(f"the sandbox is unavailable: {exc.detail}", False)
        except DomainError as exc:
            return Failure(f"the sandbox failed: {exc.detail}", True)
        if started.state_lost or started.ref != work.sandbox_ref:
            return Failure("the sandbox lost its files (state_lost); the work is gone", True)
        return Workspace(provider, started.ref, spec, work.computer, cancelled)


def _running(outcome: t.Outcome, ref: str, now: Any) -> t.Outcome:
    if outcome is None:
        return None
    session, events = outcome
    if session.ref is None:
        session = msgspec.structs.replace(session, ref=ref)
    went = t.moved(session, "running", now, frm=("creating",))
    if went is None:
        return outcome
    return went[0], [*events, *went[1]]
