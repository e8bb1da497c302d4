"""The tools a code session's model works with, in its sandbox: ``exec``,
``read_file``, ``write_file``, ``list_files``, ``search`` (grep in the sandbox),
``edit`` (replace one unique string) and ``ask_user`` (the engine's: the session
waits for its user). Each answers the model's text and the timeline's events.

Which may run again after a killed process (``SAFE_AGAIN``): reading, listing,
searching and writing a whole file give the same result twice. ``exec`` and
``edit`` do not (a command's effects are unknown; an edit done once no longer
finds its string): one whose result was not recorded is reported to the model as
interrupted, not run again."""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import shlex
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from agentsvc_core.entities.code_session import Computer
from agentsvc_core.errors import DomainError
from agentsvc_core.ports import ToolSpec
from agentsvc_core.ports.code_sessions import NewEvent
from agentsvc_core.ports.sandboxes import ExecExit, ExecOutput, SandboxProvider, SandboxSpec

__all__ = [
    "ASK_USER",
    "SAFE_AGAIN",
    "TOOL_SPECS",
    "ToolOutcome",
    "Workspace",
    "unified_diff",
]

ASK_USER = "ask_user"
SAFE_AGAIN = frozenset({"read_file", "write_file", "list_files", "search"})
MODEL_OUTPUT = 16_000  # characters of a tool's answer the model is given
EVENT_OUTPUT = 64_000  # characters of a command's output the timeline keeps
DIFF_MAX = 64_000
READ_MAX = 1_000_000
CANCEL_POLL_S = 0.5


def _obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required}


_STR = {"type": "string"}
TOOL_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="exec",
        description="Run a shell command (sh -c) in the repository's folder; answers its"
        " output and exit code.",
        parameters=_obj({"command": _STR}, ["command"]),
    ),
    ToolSpec(
        name="read_file",
        description="Read a file of the repository (a path relative to its root).",
        parameters=_obj({"path": _STR}, ["path"]),
    ),
    ToolSpec(
        name="write_file",
        description="Write a whole file (made, or replaced).",
        parameters=_obj({"path": _STR, "content": _STR}, ["path", "content"]),
    ),
    ToolSpec(
        name="list_files",
        description="List one folder (not recursive).",
        parameters=_obj({"path": _STR}, []),
    ),
    ToolSpec(
        name="search",
        description="Search the files for a regular expression (grep -rn).",
        parameters=_obj({"pattern": _STR, "path": _STR}, ["pattern"]),
    ),
    ToolSpec(
        name="edit",
        description="Replace the one occurrence of old_text in a file by new_text.",
        parameters=_obj({"path": _STR, "old_text": _STR, "new_text": _STR}, ["path", "old_text"]),
    ),
    ToolSpec(
        name=ASK_USER,
        description="Ask the user a question and wait for the answer.",
        parameters=_obj({"question": _STR}, ["question"]),
    ),
)


class ToolOutcome(msgspec.Struct, frozen=True):
    content: str
    events: list[NewEvent]
    is_error: bool = False


def unified_diff(path: str, old: bytes | None, new: bytes | None) -> str:
    """A unified diff of one file (``difflib``), cut past ``DIFF_MAX``; a file
    that is not text is said to differ."""
    try:
        a = (old or b"").decode().splitlines(keepends=True)
        b = (new or b"").decode().splitlines(keepends=True)
    except UnicodeDecodeError:
        return f"Binary files a/{path} and b/{path} differ\n"
    frm = "/dev/null" if old is None else f"a/{path}"
    to = "/dev/null" if new is None else f"b/{path}"
    text = "".join(difflib.unified_diff(a, b, fromfile=frm, tofile=to))
    return text if len(text) <= DIFF_MAX else text[:DIFF_MAX] + "\n... (cut)\n"


def _cut(text: str, limit: int = MODEL_OUTPUT) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n... ({len(text) - limit} more)"


def _arg(args: dict[str, Any], name: str, default: str | None = None) -> str:
    value = args.get(name, default)
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string")
    return value


def _change(path: str, old: bytes | None, new: bytes) -> NewEvent:
    kind = "added" if old is None else "modified"
    return NewEvent(
        "file_change", {"path": path, "change": kind, "diff": unified_diff(path, old, new)}
    )


class Workspace:
    """One session's sandbox, as its tools see it."""

    def __init__(
        self,
        provider: SandboxProvider,
        ref: str,
        spec: SandboxSpec,
        computer: Computer,
        cancelled: Callable[[], Awaitable[bool]],
    ) -> None:
        self.provider = provider
        self.ref = ref
        self.spec = spec
        self._computer = computer
        self._cancelled = cancelled

    async def run(self, name: str, args: dict[str, Any]) -> ToolOutcome:
        """A tool's outcome; bad arguments and a domain error (a path outside the
        workspace, a missing file) are the model's to read, as an error."""
        try:
            match name:
                case "exec":
                    return await self.exec(_arg(args, "command"))
                case "read_file":
                    return await self._read(_arg(args, "path"))
                case "write_file":
                    return await self._write(_arg(args, "path"), _arg(args, "content"))
                case "list_files":
                    return await self._list(_arg(args, "path", "."))
                case "search":
                    return await self._search(_arg(args, "pattern"), _arg(args, "path", "."))
                case "edit":
                    return await self._edit(
                        _arg(args, "path"), _arg(args, "old_text"), _arg(args, "new_text", "")
                    )
        except ValueError as exc:
            return ToolOutcome(f"error: {exc}", [], is_error=True)
        except DomainError as exc:
            return ToolOutcome(f"error: {exc.detail}", [], is_error=True)
        return ToolOutcome(f"error: no tool named {name!r}", [], is_error=True)

    async def output_of(self, command: str) -> tuple[str, ExecExit | None, bool]:
        """A command's output (both streams, in order), its exit (None when it was
        cancelled) and whether a cancel stopped it. The session's cancel flag is
        read every ``CANCEL_POLL_S`` meanwhile; leaving the iterator kills it."""
        chunks: list[str] = []
        end: list[ExecExit] = []
        stream = self.provider.exec(
            self.ref, self.spec, command, timeout_s=float(self._computer.exec_timeout_s)
        )

        async def drain() -> None:
            async for item in stream:
                if isinstance(item, ExecOutput):
                    chunks.append(item.data)
                else:
                    end.append(item)

        task = asyncio.create_task(drain())
        stopped = False
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=CANCEL_POLL_S)
                if not task.done() and await self._cancelled():
                    stopped = True
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            if not stopped:
                task.result()
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        return "".join(chunks), (end[0] if end else None), stopped

    async def exec(self, command: str) -> ToolOutcome:
        output, end, stopped = await self.output_of(command)
        data: dict[str, Any] = {"command": command, "output": _cut(output, EVENT_OUTPUT)}
        if stopped or end is None:
            data |= {"exit_code": None, "cancelled": True}
            return ToolOutcome(
                "the command was stopped (cancel)", [NewEvent("command", data)], True
            )
        data |= {
            "exit_code": end.exit_code,
            "timed_out": end.timed_out,
            "truncated": end.truncated,
            "duration_ms": end.duration_ms,
        }
        said = f"exit code: {end.exit_code}"
        if end.timed_out:
            said = f"killed after {self._computer.exec_timeout_s} s (time limit)"
        text = f"{_cut(output)}\n[{said}]"
        return ToolOutcome(text, [NewEvent("command", data)], end.exit_code != 0)

    async def _read(self, path: str) -> ToolOutcome:
        data = await self.provider.read_file(self.ref, path, max_bytes=READ_MAX)
        return ToolOutcome(_cut(data.decode("utf-8", "replace"), 100_000), [])

    async def _old(self, path: str) -> bytes | None:
        try:
            return await self.provider.read_file(self.ref, path, max_bytes=READ_MAX)
        except DomainError:
            return None

    async def _write(self, path: str, content: str) -> ToolOutcome:
        old = await self._old(path)
        new = content.encode()
        await self.provider.write_file(self.ref, path, new)
        return ToolOutcome(f"wrote {len(new)} bytes to {path}", [_change(path, old, new)])

    async def _list(self, path: str) -> ToolOutcome:
        entries = await self.provider.list_files(self.ref, path, limit=500)
        lines = [f"{e.path}/" if e.is_dir else f"{e.path} ({e.size} bytes)" for e in entries]
        return ToolOutcome("\n".join(lines) or "(empty)", [])

    async def _search(self, pattern: str, path: str) -> ToolOutcome:
        command = (
            f"grep -rnI --exclude-dir=.git -e {shlex.quote(pattern)} -- {shlex.quote(path)}"
            " | head -n 200"
        )
        output, end, _ = await self.output_of(command)
        return ToolOutcome(_cut(output) or "(no match)", [], end is None)

    async def _edit(self, path: str, old_text: str, new_text: str) -> ToolOutcome:
        if not old_text:
            raise ValueError("old_text must not be empty")
        old = await self.provider.read_file(self.ref, path, max_bytes=READ_MAX)
        text = old.decode("utf-8", "replace")
        count = text.count(old_text)
        if count != 1:
            where = "is not in" if count == 0 else f"appears {count} times in"
            return ToolOutcome(f"error: old_text {where} {path}", [], is_error=True)
        new = text.replace(old_text, new_text).encode()
        await self.provider.write_file(self.ref, path, new)
        return ToolOutcome(f"edited {path}", [_change(path, old, new)])
