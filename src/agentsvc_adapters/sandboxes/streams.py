"""One running command's output, streamed as it comes: both pipes read at once,
each capped at ``max_output`` bytes (what is past it is read and dropped, so the
command never blocks on a full pipe), decoded as UTF-8 without splitting a
character, a wall-time limit after which the whole sandbox of the command is
killed, and exactly one ``ExecExit`` at the end."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator
from typing import Any, Literal

from agentsvc_core.ports.sandboxes import ExecExit, ExecOutput

__all__ = ["kill", "stream"]

Stream = Literal["stdout", "stderr"]
_CHUNK = 65_536
_SMALL = 4096  # bytes: a read this small waits _GATHER seconds before the next
_GATHER = 0.02
_DRAIN = 2.0  # seconds to read what is left in the pipes once the command was killed


def kill(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the command's process group (``bwrap`` leads it); ``bwrap`` dies
    with it and takes the sandbox's PID namespace, so everything the command
    started, down to its last background process."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


class _Capped:
    def __init__(self, stream: Stream, limit: int) -> None:
        self.stream = stream
        self.left = limit
        self.truncated = False
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def take(self, data: bytes) -> ExecOutput | None:
        if len(data) > self.left:
            self.truncated = True
            data = data[: self.left]
        self.left -= len(data)
        text = self._decoder.decode(data, final=False)
        return ExecOutput(stream=self.stream, data=text) if text else None

    def rest(self) -> ExecOutput | None:
        text = self._decoder.decode(b"", final=True)
        return ExecOutput(stream=self.stream, data=text) if text else None


class _Pipes:
    """Both pipes read at once into one queue; ``next`` answers the next chunk,
    with what else came on the same stream meanwhile (a program that writes a
    byte at a time is not streamed as one event per byte)."""

    def __init__(self, stdout: asyncio.StreamReader, stderr: asyncio.StreamReader) -> None:
        self._queue: asyncio.Queue[tuple[Stream, bytes]] = asyncio.Queue(maxsize=16)
        self._readers = [
            asyncio.create_task(self._read(stdout, "stdout")),
            asyncio.create_task(self._read(stderr, "stderr")),
        ]
        self._done = asyncio.gather(*self._readers, return_exceptions=True)
        self._held: tuple[Stream, bytes] | None = None  # taken, of the other stream

    async def _read(self, reader: asyncio.StreamReader, name: Stream) -> None:
        while data := await reader.read(_CHUNK):
            await self._queue.put((name, data))
            if len(data) < _SMALL:
                await asyncio.sleep(_GATHER)  # let a little more come first

    @property
    def finished(self) -> bool:
        return self._held is None and self._done.done() and self._queue.empty()

    async def next(self, within: float) -> tuple[Stream, bytes] | None:
        """The next chunk, or None when none came ``within`` seconds."""
        chunk, self._held = self._held, None
        if chunk is None:
            getter = asyncio.ensure_future(self._queue.get())
            waiting: list[asyncio.Future[Any]] = [getter, self._done]
            await asyncio.wait(waiting, timeout=within, return_when="FIRST_COMPLETED")
            if not getter.done():
                getter.cancel()
                return None
            chunk = getter.result()
        name, data = chunk
        while self._held is None and not self._queue.empty():
            other, more = self._queue.get_nowait()
            if other == name:
                data += more
            else:
                self._held = (other, more)
        return name, data

    async def close(self) -> None:
        for task in self._readers:
            task.cancel()
        self._done.cancel()
        with contextlib.suppress(BaseException):
            await self._done


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _exit(code: int | None, *, truncated: bool, started: float) -> ExecExit:
    """``code`` None: the command was killed on time. ``bwrap`` answers 128 + n
    for a command a signal ended, as a shell does."""
    duration = int((time.monotonic() - started) * 1000)
    if code is None:
        return ExecExit(
            exit_code=None,
            timed_out=True,
            truncated=truncated,
            signal="SIGKILL",
            duration_ms=duration,
        )
    if code < 0 or 128 < code < 128 + 65:
        number = -code if code < 0 else code - 128
        return ExecExit(
            exit_code=None, truncated=truncated, signal=_signal_name(number), duration_ms=duration
        )
    return ExecExit(exit_code=code, truncated=truncated, duration_ms=duration)


async def stream(
    proc: asyncio.subprocess.Process, *, timeout_s: float, max_output: int
) -> AsyncIterator[ExecOutput | ExecExit]:
    """What ``proc`` prints, then its exit. The caller kills ``proc`` when this is
    left early (``kill``)."""
    if proc.stdout is None or proc.stderr is None:
        raise ValueError("the command must be started with pipes")
    started = time.monotonic()
    deadline = started + timeout_s
    capped = {"stdout": _Capped("stdout", max_output), "stderr": _Capped("stderr", max_output)}
    pipes = _Pipes(proc.stdout, proc.stderr)
    timed_out = False
    try:
        while not pipes.finished:
            left = deadline - time.monotonic()
            if left <= 0 and timed_out:
                break  # killed, and still a pipe is open: give up on it
            if left <= 0:
                timed_out = True
                kill(proc)
                deadline = time.monotonic() + _DRAIN
                continue
            got = await pipes.next(left)
            if got is not None and (item := capped[got[0]].take(got[1])) is not None:
                yield item
        for cap in capped.values():
            if (item := cap.rest()) is not None:
                yield item
        code = None if timed_out else await _wait(proc, deadline)
        truncated = any(cap.truncated for cap in capped.values())
        yield _exit(code, truncated=truncated, started=started)
    finally:
        await pipes.close()


async def _wait(proc: asyncio.subprocess.Process, deadline: float) -> int | None:
    """The exit status, or None (and the command killed) past the deadline."""
    try:
        return await asyncio.wait_for(proc.wait(), max(deadline - time.monotonic(), 0.01))
    except TimeoutError:
        kill(proc)
        return None
