"""An agent's computer (docs/computer.md): the sandbox instances its commands
and files live in. The configuration that shapes them is a per-agent setting
(``use_cases/computer/settings.py``); an instance is a row of its own."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

import msgspec

__all__ = ["ACTIVE", "RUNNING", "ComputerInstance", "InstanceStatus"]

# bootstrapping: its sandbox is being made or resumed; ready: running, a command
# in flight; idle: running, nothing in flight; stopped: nothing runs (a persistent
# one keeps its files); destroyed: gone for good; error: its sandbox failed.
InstanceStatus = Literal["bootstrapping", "ready", "idle", "stopped", "destroyed", "error"]

# the instance a thread (or the agent) uses: every status but destroyed
ACTIVE: frozenset[str] = frozenset({"bootstrapping", "ready", "idle", "stopped", "error"})
# a sandbox runs at the provider (the idle sweep stops these)
RUNNING: frozenset[str] = frozenset({"ready", "idle"})


class ComputerInstance(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    org_id: str
    agent_id: UUID
    thread_id: UUID | None  # None: the agent's one shared instance (scope "agent")
    provider: str  # "local" | "e2b"
    status: InstanceStatus
    persistent: bool
    created_at: datetime
    last_used_at: datetime
    disk_bytes: int = 0
    # the provider's handle of the sandbox: internal, never in an answer
    ref: str | None = None
    # the last start could not resume the sandbox's files (the provider lost them):
    # the workspace is new and empty. Announced, never hidden; a later stop clears it.
    state_lost: bool = False
    error: str | None = None  # why status is "error"
    # from the configuration at the last use: the idle sweep stops a running
    # instance unused for this long
    idle_timeout_s: int = 7200
