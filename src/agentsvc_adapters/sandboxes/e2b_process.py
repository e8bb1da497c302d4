"""One command in an E2B sandbox, from ``Process/Start``'s stream (opened by
``Envd.start``) to its ``ExecExit``: the events as they come (start with the pid,
stdout and stderr as base64, the end event as envd's protobuf-JSON writes it,
keepalives), ``max_output`` per stream, the wall-time kill, and the kill when the
caller leaves early (``Process/SendSignal``: envd lets a process outlive its
request). Followed: E2B's ``sandbox_async/commands/command.py`` and
``command_handle.py``, ``spec/envd/process/process.proto``.
"""

from __future__ import annotations

import asyncio
import base64
import codecs
import json
import time
from collections.abc import AsyncGenerator
from typing import Any

import anyio
import httpx

from agentsvc_adapters.sandboxes.e2b_envd import (
    COMPRESSED,
    END_STREAM,
    Envd,
    EnvdConnection,
    envelopes,
)
from agentsvc_core.errors import DomainError
from agentsvc_core.ports.sandboxes import ExecExit, ExecOutput, SandboxUnavailable

__all__ = ["run"]

# after our own kill at the command's time, how long to wait for envd's end event
_KILL_GRACE_S = 5.0
# Go's ``ProcessState.String()`` names a signal as ``signal: <name>``
_SIGNALS = {
    "killed": "SIGKILL",
    "terminated": "SIGTERM",
    "interrupt": "SIGINT",
    "hangup": "SIGHUP",
    "quit": "SIGQUIT",
    "aborted": "SIGABRT",
    "segmentation fault": "SIGSEGV",
    "broken pipe": "SIGPIPE",
    "alarm clock": "SIGALRM",
    "bus error": "SIGBUS",
    "floating point exception": "SIGFPE",
    "illegal instruction": "SIGILL",
    "CPU time limit exceeded": "SIGXCPU",
    "file size limit exceeded": "SIGXFSZ",
}


def _signal_of(status: str) -> str | None:
    if status.startswith("signal: "):
        name = status.removeprefix("signal: ").strip()
        return _SIGNALS.get(name, name)
    return None


class _Limiter:
    """Decodes each stream as UTF-8 and drops what passes ``max_output`` bytes."""

    def __init__(self, max_output: int) -> None:
        self.left = {"stdout": max_output, "stderr": max_output}
        self.decoders = {s: codecs.getincrementaldecoder("utf-8")("replace") for s in self.left}
        self.truncated = False

    def take(self, stream: str, data: bytes) -> str:
        room = self.left[stream]
        if len(data) > room:
            self.truncated = True
            data = data[: max(room, 0)]
        self.left[stream] = room - len(data)
        return str(self.decoders[stream].decode(data)) if data else ""

    def flush(self, stream: str) -> str:
        return str(self.decoders[stream].decode(b"", final=True))


async def run(
    envd: Envd,
    conn: EnvdConnection,
    response: httpx.Response,
    *,
    timeout_s: float,
    max_output: int,
) -> AsyncGenerator[ExecOutput | ExecExit, None]:
    """What the started process prints, as it comes, then its ``ExecExit``;
    kills it at ``timeout_s`` (keeping what it printed) and when left early."""
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    reader = asyncio.create_task(_read(response, queue))
    state = _Run(envd, conn, queue, timeout_s=timeout_s, max_output=max_output)
    try:
        while (item := await state.next()) is not None:
            yield item
        for stream in ("stdout", "stderr"):
            if text := state.limiter.flush(stream):
                yield ExecOutput(stream=stream, data=text)
    finally:
        reader.cancel()
        with anyio.CancelScope(shield=True), anyio.move_on_after(2 * _KILL_GRACE_S):
            if state.end is None and state.pid is not None and not state.timed_out:
                await envd.kill(conn, state.pid)  # left early, or the stream broke
            await response.aclose()
    if state.end is None and not state.timed_out:
        raise SandboxUnavailable("the command's stream ended before the command did")
    yield state.exit()


class _Run:
    """One command's progress: its pid, its deadline, its end event."""

    def __init__(
        self,
        envd: Envd,
        conn: EnvdConnection,
        queue: asyncio.Queue[tuple[str, Any]],
        *,
        timeout_s: float,
        max_output: int,
    ) -> None:
        self.envd, self.conn, self.queue = envd, conn, queue
        self.began = time.monotonic()
        self.deadline = self.began + timeout_s
        self.limiter = _Limiter(max_output)
        self.pid: int | None = None
        self.end: dict[str, Any] | None = None
        self.timed_out = False

    async def next(self) -> ExecOutput | None:
        """The next output, or ``None`` when the command is over (its end event,
        the stream closed, or no end within the grace after the kill)."""
        while True:
            try:
                # what already came is taken first: a slow reader is no timeout
                kind, payload = self.queue.get_nowait()
            except asyncio.QueueEmpty:
                try:
                    kind, payload = await asyncio.wait_for(
                        self.queue.get(), max(self.deadline - time.monotonic(), 0)
                    )
                except TimeoutError:
                    if self.timed_out:
                        return None
                    self.timed_out = True
                    if self.pid is not None:
                        await self.envd.kill(self.conn, self.pid)
                    self.deadline = time.monotonic() + _KILL_GRACE_S
                    continue
            if kind == "error":
                if self.timed_out:
                    return None  # the stream broke after the kill: the kill is the news
                raise payload
            if kind == "start":
                self.pid = payload
            elif kind in ("stdout", "stderr"):
                if text := self.limiter.take(kind, payload):
                    return ExecOutput(stream=kind, data=text)  # type: ignore[arg-type]
            else:  # "end", or "closed" without one
                self.end = payload if kind == "end" else None
                return None

    def exit(self) -> ExecExit:
        return _exit(
            self.end, timed_out=self.timed_out, truncated=self.limiter.truncated, began=self.began
        )


def _exit(
    end: dict[str, Any] | None, *, timed_out: bool, truncated: bool, began: float
) -> ExecExit:
    duration_ms = int((time.monotonic() - began) * 1000)
    exited = end is not None and bool(end.get("exited", False))  # protobuf-JSON omits false
    if end is None or (timed_out and not exited):  # one that ended by itself is no timeout
        return ExecExit(
            exit_code=None,
            timed_out=True,
            truncated=truncated,
            signal="SIGKILL",
            duration_ms=duration_ms,
        )
    code = end.get("exitCode", 0)  # and 0
    return ExecExit(
        exit_code=int(code) if exited else None,
        truncated=truncated,
        signal=None if exited else _signal_of(str(end.get("status", ""))),
        duration_ms=duration_ms,
    )


def _refusal(error: dict[str, Any]) -> DomainError:
    """envd's refusal of the command (an error in the end-of-stream message)."""
    code, message = str(error.get("code", "unknown")), str(error.get("message", ""))[:300]
    if code == "deadline_exceeded":
        return SandboxUnavailable("the command's call to the sandbox ran out of time")
    return SandboxUnavailable(f"the sandbox could not run the command ({code}): {message}")


async def _read(response: httpx.Response, queue: asyncio.Queue[tuple[str, Any]]) -> None:
    """Feeds ``queue`` with the stream's events: ``("start", pid)``, ``("stdout" |
    "stderr", bytes)``, ``("end", EndEvent)``, ``("error", exception)`` and
    ``("closed", None)`` last."""
    try:
        async for flags, data in envelopes(response.aiter_raw()):
            if flags & COMPRESSED:
                raise SandboxUnavailable("the sandbox sent a compressed message")
            message = json.loads(data)
            if flags & END_STREAM:
                if isinstance(message, dict) and isinstance(message.get("error"), dict):
                    raise _refusal(message["error"])
                break
            for item in _events(message):
                queue.put_nowait(item)
    except (httpx.HTTPError, ValueError):
        queue.put_nowait(("error", SandboxUnavailable("the command's stream broke")))
    except DomainError as exc:
        queue.put_nowait(("error", exc))
    finally:
        queue.put_nowait(("closed", None))


def _events(message: Any) -> list[tuple[str, Any]]:
    event = message.get("event") if isinstance(message, dict) else None
    if not isinstance(event, dict):
        return []
    if isinstance(start := event.get("start"), dict):
        return [("start", int(start.get("pid", 0)))]
    if isinstance(data := event.get("data"), dict):
        return [
            (stream, base64.b64decode(data[stream]))
            for stream in ("stdout", "stderr")
            if isinstance(data.get(stream), str)
        ]
    if isinstance(end := event.get("end"), dict):
        return [("end", end)]
    return []  # keepalive
