"""A test double of a sandbox provider (``ports/sandboxes.py``): each sandbox is a
temporary folder on this machine and each command a real ``sh -c`` run there. It is
no security boundary (the real ones are ``agentsvc_adapters/sandboxes``): it lets
the use cases' tests run real commands and files fast, and records what was asked.

``lose(ref)`` removes a sandbox's folder as a provider that deleted it would;
``calls`` lists ``(method, ref)`` in order; ``unavailable`` makes every call raise
``SandboxUnavailable`` (a provider failing as it serves); ``lacks`` is what
``missing`` says (a provider that cannot serve here at all)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

from agentsvc_core.errors import InvalidInput, NotFound
from agentsvc_core.ports.sandboxes import (
    ExecExit,
    ExecOutput,
    FileEntry,
    SandboxGone,
    SandboxSpec,
    SandboxStarted,
    SandboxUnavailable,
)


class FakeSandbox:
    def __init__(self, name: str = "local", root: Path | None = None) -> None:
        self.name = name
        self.root = root or Path(tempfile.mkdtemp(prefix="fake-sandbox-"))
        self.calls: list[tuple[str, str]] = []
        self.running: set[str] = set()
        self.unavailable: str | None = None
        self.lacks: str | None = None  # what ``missing`` says (not installed, not set)

    def missing(self) -> str | None:
        return self.lacks

    def _check(self) -> None:
        if self.unavailable:
            raise SandboxUnavailable(self.unavailable)

    def _dir(self, ref: str) -> Path:
        path = self.root / ref
        if not path.is_dir():
            raise SandboxGone(f"sandbox {ref} is gone")
        return path

    def _inside(self, ref: str, path: str) -> Path:
        base = self._dir(ref).resolve()
        target = (base / path).resolve()
        if path.startswith("/") and not path.startswith("/workspace"):
            raise InvalidInput("path", "must be inside the workspace")
        if path.startswith("/workspace"):
            target = (base / path.removeprefix("/workspace").lstrip("/")).resolve()
        if target != base and base not in target.parents:
            raise InvalidInput("path", "must be inside the workspace")
        return target

    def lose(self, ref: str) -> None:
        shutil.rmtree(self.root / ref, ignore_errors=True)

    async def start(self, spec: SandboxSpec, *, resume: str | None = None) -> SandboxStarted:
        self._check()
        self.calls.append(("start", resume or ""))
        if resume is not None and (self.root / resume).is_dir():
            self.running.add(resume)
            return SandboxStarted(ref=resume)
        ref = f"sbx-{uuid.uuid4().hex[:12]}"
        (self.root / ref).mkdir(parents=True)
        self.running.add(ref)
        return SandboxStarted(ref=ref, state_lost=resume is not None)

    async def stop(self, ref: str, spec: SandboxSpec) -> None:
        self._check()
        self.calls.append(("stop", ref))
        self.running.discard(ref)
        if not spec.persistent:
            shutil.rmtree(self.root / ref, ignore_errors=True)

    async def destroy(self, ref: str) -> None:
        self._check()
        self.calls.append(("destroy", ref))
        self.running.discard(ref)
        shutil.rmtree(self.root / ref, ignore_errors=True)

    async def exec(
        self,
        ref: str,
        spec: SandboxSpec,
        command: str,
        *,
        timeout_s: float,
        max_output: int = 64_000,
        env: dict[str, str] | None = None,
    ) -> AsyncIterator[ExecOutput | ExecExit]:
        self._check()
        self.calls.append(("exec", ref))
        cwd = self._dir(ref)
        began = time.monotonic()
        proc = await asyncio.create_subprocess_shell(
            command,
            cwd=cwd,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        queue: asyncio.Queue[tuple[str, bytes]] = asyncio.Queue()
        sent = {"stdout": 0, "stderr": 0}
        truncated = False

        async def pump(name: str, stream: asyncio.StreamReader) -> None:
            while chunk := await stream.read(4096):
                await queue.put((name, chunk))

        assert proc.stdout is not None
        assert proc.stderr is not None
        pumps = [
            asyncio.create_task(pump("stdout", proc.stdout)),
            asyncio.create_task(pump("stderr", proc.stderr)),
        ]
        done = asyncio.gather(*pumps)
        deadline = began + timeout_s
        timed_out = False
        try:
            while not (done.done() and queue.empty()):
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    break
                try:
                    name, chunk = await asyncio.wait_for(queue.get(), min(left, 0.05))
                except TimeoutError:
                    continue
                room = max_output - sent[name]
                if room <= 0:
                    truncated = True
                    continue
                if len(chunk) > room:
                    chunk, truncated = chunk[:room], True
                sent[name] += len(chunk)
                yield ExecOutput(stream=name, data=chunk.decode("utf-8", "replace"))  # type: ignore[arg-type]
            if timed_out:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            code = await proc.wait()
            yield ExecExit(
                exit_code=None if timed_out or code < 0 else code,
                timed_out=timed_out,
                truncated=truncated,
                signal="SIGKILL" if timed_out or code == -signal.SIGKILL else None,
                duration_ms=int((time.monotonic() - began) * 1000),
            )
        finally:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
            for task in pumps:
                task.cancel()

    async def read_file(self, ref: str, path: str, *, max_bytes: int = 1_000_000) -> bytes:
        self._check()
        target = self._inside(ref, path)
        if target.is_dir():
            raise InvalidInput("path", "is a folder")
        if not target.exists():
            raise NotFound(f"no file {path}")
        if target.stat().st_size > max_bytes:
            raise InvalidInput("path", f"is larger than {max_bytes} bytes")
        return target.read_bytes()

    async def write_file(self, ref: str, path: str, data: bytes) -> None:
        self._check()
        target = self._inside(ref, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    async def list_files(self, ref: str, path: str = ".", *, limit: int = 1000) -> list[FileEntry]:
        self._check()
        folder = self._inside(ref, path)
        if not folder.is_dir():
            raise NotFound(f"no folder {path}")
        base = self._dir(ref).resolve()
        entries = sorted(folder.iterdir(), key=lambda p: (not p.is_dir(), p.name))[:limit]
        return [
            FileEntry(
                path=str(p.resolve().relative_to(base)),
                is_dir=p.is_dir(),
                size=0 if p.is_dir() else p.stat().st_size,
            )
            for p in entries
        ]

    async def disk_bytes(self, ref: str) -> int:
        base = self.root / ref
        return sum(p.stat().st_size for p in base.rglob("*") if p.is_file())
