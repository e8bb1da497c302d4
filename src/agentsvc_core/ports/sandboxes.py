"""Sandboxes: where an agent's computer and a code session run commands and keep
files (docs/computer.md). One adapter per provider (``agentsvc_adapters/sandboxes``):
``local`` (bubblewrap on the service's own machine) and ``e2b`` (a hosted provider
over its REST and in-sandbox APIs). The use cases (``use_cases/computer``,
``use_cases/code_sessions``) know instances, limits, tools and timelines; an adapter
knows only how to make, resume, use and remove one sandbox.

A sandbox is named by a ``ref``, the adapter's own handle (the local workspace's
id, E2B's sandbox id), which the use case stores on its instance and hands back on
every call. Every call may raise ``SandboxUnavailable`` (the provider cannot be
reached or is not installed: ``detail`` says what to install or set) or
``SandboxGone`` (the sandbox no longer exists at the provider). Neither carries a
secret.

- ``start`` makes a new sandbox, or resumes the stopped one ``resume`` names. When
  a sandbox that was to be resumed lost its files (the provider deleted it, its
  workspace was removed), the adapter makes a new one and says so with
  ``state_lost``: it is announced, never hidden.
- ``stop`` releases what runs (processes, the provider's billing) and keeps the
  files when the spec is ``persistent``; ``destroy`` removes everything and is
  idempotent (a sandbox already gone is fine).
- ``exec`` runs one shell command (``sh -c``) and yields what it printed as it
  comes, then exactly one ``ExecExit``. Output beyond ``max_output`` bytes per
  stream is dropped and the exit says so; a command past ``timeout_s`` (wall time)
  is killed, with what it printed so far, and ``timed_out``. Leaving the iterator
  early (``aclose``, a cancelled task) kills the command.
- Files are read and written by path relative to the workspace (``/workspace`` in
  the sandbox); a path that leaves it (``..``, an absolute path elsewhere, a link
  out) is ``InvalidInput``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Literal, Protocol

import msgspec

from agentsvc_core.errors import DomainError

__all__ = [
    "WORKSPACE",
    "ExecExit",
    "ExecOutput",
    "FileEntry",
    "SandboxGone",
    "SandboxProvider",
    "SandboxSpec",
    "SandboxStarted",
    "SandboxUnavailable",
]

# where the workspace is, seen from inside a sandbox; commands start there
WORKSPACE = "/workspace"


class SandboxSpec(msgspec.Struct, frozen=True, kw_only=True):
    """What a sandbox is made with (from the computer configuration)."""

    instance_id: str  # the use case's id of the instance: for names and logs only
    org_id: str
    persistent: bool  # keep the files across ``stop``
    memory_mb: int  # the sandbox's memory limit (address space per command, locally)
    # "none": no route out at all; "allowlist": HTTP(S) through the service's egress
    # proxy (the outbound guard) to these hosts only, for programs that honour
    # HTTP_PROXY/HTTPS_PROXY
    network: Literal["none", "allowlist"] = "none"
    allowed_hosts: tuple[str, ...] = ()
    # the most processes at once and the largest file a command may write
    max_processes: int = 64
    max_file_mb: int = 256
    cpu_seconds: int = 600  # CPU time per command


class SandboxStarted(msgspec.Struct, frozen=True, kw_only=True):
    ref: str
    # the sandbox to resume was gone (or its files were): this one is new and empty
    state_lost: bool = False


class ExecOutput(msgspec.Struct, frozen=True, kw_only=True, tag="output"):
    stream: Literal["stdout", "stderr"]
    data: str  # decoded as UTF-8 with replacement; chunked as it came


class ExecExit(msgspec.Struct, frozen=True, kw_only=True, tag="exit"):
    exit_code: int | None  # None when it was killed (time, memory, a cancel)
    timed_out: bool = False
    truncated: bool = False  # some output was dropped past ``max_output``
    signal: str | None = None  # "SIGKILL" and the like, when a signal ended it
    duration_ms: int = 0


class FileEntry(msgspec.Struct, frozen=True, kw_only=True):
    path: str  # relative to the workspace
    is_dir: bool
    size: int  # bytes; 0 for a folder


class SandboxUnavailable(DomainError):
    """The provider cannot serve (not installed, not configured, unreachable, out
    of capacity); ``detail`` says what to install or set. Answered as 503."""


class SandboxGone(DomainError):
    """The sandbox no longer exists at the provider (destroyed, expired, removed
    from outside)."""


class SandboxProvider(Protocol):
    name: str  # "local" | "e2b": what instances record as their ``provider``

    def missing(self) -> str | None:
        """What this provider lacks to serve here (what to install or set, as
        ``SandboxUnavailable`` would say), or None when it can: cheap, no call out."""
        ...

    async def start(self, spec: SandboxSpec, *, resume: str | None = None) -> SandboxStarted: ...

    async def stop(self, ref: str, spec: SandboxSpec) -> None: ...

    async def destroy(self, ref: str) -> None: ...

    def exec(
        self,
        ref: str,
        spec: SandboxSpec,
        command: str,
        *,
        timeout_s: float,
        max_output: int = 64_000,
        env: dict[str, str] | None = None,
    ) -> AsyncIterator[ExecOutput | ExecExit]: ...

    async def read_file(self, ref: str, path: str, *, max_bytes: int = 1_000_000) -> bytes:
        """``InvalidInput`` for a path outside the workspace, a folder, or a file
        larger than ``max_bytes``; ``NotFound`` when there is none."""
        ...

    async def write_file(self, ref: str, path: str, data: bytes) -> None:
        """Makes the folders on the way; replaces a file that is there."""
        ...

    async def list_files(self, ref: str, path: str = ".", *, limit: int = 1000) -> list[FileEntry]:
        """The entries of one folder (not recursive), folders first, by name."""
        ...

    async def disk_bytes(self, ref: str) -> int:
        """What the workspace holds, in bytes (best effort: 0 when unknown)."""
        ...
