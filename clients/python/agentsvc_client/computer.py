"""An operator's command on a computer instance
(``POST /api/agents/{id}/computer-instances/{instanceId}/exec``, docs/computer.md):
its Server-Sent Events, read to the command's end."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from agentsvc_client._sse import SSEDecoder

__all__ = ["ExecEvent", "exec_events"]


class ExecEvent(msgspec.Struct, frozen=True):
    """``event``: ``exec_started``, ``stdout``, ``stderr`` or ``exit``; ``data``: its
    JSON (``{"data": ...}`` for output, ``{"exit_code", "timed_out", ...}`` for exit)."""

    event: str
    data: dict[str, Any]


def exec_events(lines: Iterable[str]) -> list[ExecEvent]:
    decoder = SSEDecoder()
    events = []
    for line in lines:
        raw = decoder.feed(line)
        if raw is not None:
            events.append(ExecEvent(raw.name, msgspec.json.decode(raw.data)))
    return events
