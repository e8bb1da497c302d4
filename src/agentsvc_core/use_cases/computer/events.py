"""What an operator's command streams (``POST .../computer-instances/{id}/exec``):
``exec_started``, then ``stdout`` and ``stderr`` as the command prints, then one
``exit`` (docs/computer.md)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_core.ports.sandboxes import ExecExit, ExecOutput
from agentsvc_core.use_cases.computer.commands import Execution

__all__ = ["EXEC_EVENTS", "ExecEnded", "ExecStarted", "ExecStderr", "ExecStdout", "exec_events"]


class ExecStarted(msgspec.Struct, frozen=True, kw_only=True):
    instance_id: UUID
    command: str


class ExecStdout(msgspec.Struct, frozen=True, kw_only=True):
    data: str


class ExecStderr(msgspec.Struct, frozen=True, kw_only=True):
    data: str


class ExecEnded(msgspec.Struct, frozen=True, kw_only=True):
    exit_code: int | None  # null when it was killed
    timed_out: bool
    truncated: bool  # output past the cap was dropped
    signal: str | None
    duration_ms: int


EXEC_EVENTS: dict[type[Any], str] = {
    ExecStarted: "exec_started",
    ExecStdout: "stdout",
    ExecStderr: "stderr",
    ExecEnded: "exit",
}

Event = ExecStarted | ExecStdout | ExecStderr | ExecEnded


async def exec_events(execution: Execution, command: str) -> AsyncIterator[Event]:
    """The command's events, from its start to its exit."""
    yield ExecStarted(instance_id=execution.instance.id, command=command)
    async for event in execution.events():
        match event:
            case ExecOutput(stream="stdout"):
                yield ExecStdout(data=event.data)
            case ExecOutput():
                yield ExecStderr(data=event.data)
            case ExecExit():
                yield ExecEnded(
                    exit_code=event.exit_code,
                    timed_out=event.timed_out,
                    truncated=event.truncated,
                    signal=event.signal,
                    duration_ms=event.duration_ms,
                )
