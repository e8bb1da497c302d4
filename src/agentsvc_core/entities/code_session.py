"""Code agents and code sessions (docs/code-agents.md).

A code agent is a template: a model with a preamble, a repository and a starting
ref, how its branches are named, whether a pull request is opened, a git
credential (sealed, never answered: ``has_git_credential`` only) and the settings
of the sandbox its sessions run in.

A code session is one task given to a code agent: its status, the branch and pull
request it made, what it spent, and an append-only timeline of ``SessionEvent``s
numbered by ``seq``. ``work`` is the job's own record of where it is (the model's
transcript, the files' hashes, the sandbox): what lets a job picked again after a
killed process go on from its last recorded step. It is never answered."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import msgspec

from agentsvc_core.entities.message import ToolCall
from agentsvc_core.entities.trace import StoredSpan

__all__ = [
    "ENDED",
    "SESSION_STATUSES",
    "CodeAgent",
    "CodeSession",
    "Computer",
    "EventType",
    "SessionEvent",
    "SessionStatus",
    "SessionUsage",
    "SessionWork",
    "Turn",
]

SessionStatus = Literal[
    "pending",
    "creating",
    "running",
    "awaiting_input",
    "finished",
    "error",
    "cancelled",
    "expired",
]
SESSION_STATUSES: tuple[SessionStatus, ...] = (
    "pending",
    "creating",
    "running",
    "awaiting_input",
    "finished",
    "error",
    "cancelled",
    "expired",
)
ENDED: frozenset[str] = frozenset({"finished", "error", "cancelled", "expired"})

# status: the session's status changed; message: the model's (or the user's) text;
# tool_call: the model asked for a tool; tool_result: what a tool other than
# ``exec`` answered; command: a command ran (output, exit code);
# file_change: a file changed (a unified diff); usage: a model call's tokens and
# cost; pull_request: the branch pushed and the pull request opened; notice: what
# the service says about the session (a sandbox that lost its files, an
# interrupted command, a push with nothing to push)
EventType = Literal[
    "status",
    "message",
    "tool_call",
    "tool_result",
    "command",
    "file_change",
    "usage",
    "pull_request",
    "notice",
]


class Computer(msgspec.Struct, frozen=True, kw_only=True):
    """The sandbox a code agent's sessions run in. ``provider`` None: the
    deployment's default sandbox provider."""

    provider: str | None = None
    memory_mb: int = 1024
    exec_timeout_s: int = 120
    network: Literal["none", "allowlist"] = "none"
    allowed_hosts: tuple[str, ...] = ()


class CodeAgent(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    org_id: str
    name: str
    model: str
    repo_url: str | None
    starting_ref: str | None  # None: the repository's default branch
    preamble: str
    branch_prefix: str
    auto_create_pr: bool
    git_credential_sealed: str | None  # SecretBox-sealed token
    computer: Computer
    created_at: datetime
    updated_at: datetime


class SessionUsage(msgspec.Struct, frozen=True, kw_only=True):
    tokens: int = 0
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0


class Turn(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of the model's transcript: the user's prompt or follow-up, the
    model's answer (with the tools it asked for), or a tool's result."""

    role: Literal["user", "assistant", "tool"]
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None


class SessionWork(msgspec.Struct, frozen=True, kw_only=True):
    """The job's record of where the session is (never answered)."""

    # the template as it was when the session started (a later change or a
    # deleted code agent does not change a session on its way)
    model: str
    preamble: str
    branch_prefix: str
    auto_create_pr: bool
    computer: Computer
    credential_sealed: str | None = None  # the session's own copy; gone once archived
    provider: str | None = None  # the sandbox provider chosen at ``creating``
    sandbox_ref: str | None = None
    sandbox_gone: bool = False  # destroyed (archived)
    base_commit: str | None = None
    hashes: dict[str, str] = {}  # path -> sha1 of the file as checked out
    transcript: tuple[Turn, ...] = ()
    inflight: str | None = None  # a tool call started whose result is not recorded
    queued: tuple[str, ...] = ()  # follow-ups not yet given to the model
    cancel_requested: bool = False
    model_calls: int = 0
    pushed_commit: str | None = None
    lease_until: datetime | None = None  # a job holds the session until then
    lease_owner: str | None = None
    attempts: int = 0  # transient failures in a row (git)
    waiting_since: datetime | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    trace_id: str
    spans: tuple[StoredSpan, ...] = ()


class CodeSession(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    org_id: str
    code_agent_id: UUID
    status: SessionStatus
    title: str
    prompt: str
    repo_url: str
    ref: str | None
    branch: str | None
    pr_url: str | None
    usage: SessionUsage
    error: str | None
    last_event_seq: int
    archived: bool
    work: SessionWork
    created_at: datetime
    updated_at: datetime

    @property
    def ended(self) -> bool:
        return self.status in ENDED


class SessionEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One item of a session's timeline; ``seq`` counts from 1 per session."""

    session_id: UUID
    seq: int
    type: EventType
    data: dict[str, Any]
    created_at: datetime
