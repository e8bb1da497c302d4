"""The ``local`` sandbox provider: bubblewrap on the service's own machine
(docs/security.md, "The local sandbox's boundary").

Each sandbox is a folder under ``AGENTSVC_SANDBOX_LOCAL_DIR`` (by default
``<data folder>/sandboxes/local``), named by its ``ref``
(``local-`` and 24 hex digits)::

    instances/<ref>/workspace   the files; owned by the instance's user, 0700
    instances/<ref>/etc         its passwd, group, hosts (read-only inside)
    instances/<ref>/run         the forwarder and the egress sockets
    instances/<ref>/uid         the instance's host uid
    uids/<uid>                  the claim on that uid (made with mkdir: atomic)

Each instance has a host uid of its own, taken from
``AGENTSVC_SANDBOX_LOCAL_UID_BASE`` .. ``+ AGENTSVC_SANDBOX_LOCAL_UID_COUNT`` (a
range no account or file of the machine uses): commands run as that user, so one
instance's processes count against its own process limit, and it cannot read
another instance's files even outside the sandbox. The service must run as root
(to switch to that user); the folders on the way to the sandbox folder must be
searchable by other users (``chmod o+x``), as ``bwrap`` opens the workspace as the
instance's user. Every command is its own ``bwrap`` (jail.py); a stop kills
every process of the instance's user.

Settings (environment):

- ``AGENTSVC_SANDBOX_LOCAL_DIR``: the sandbox folder (default above);
- ``AGENTSVC_SANDBOX_LOCAL_BWRAP``: the ``bwrap`` program (default: found on ``PATH``);
- ``AGENTSVC_SANDBOX_LOCAL_UID_BASE`` (default 2000000000) and
  ``AGENTSVC_SANDBOX_LOCAL_UID_COUNT`` (default 10000): the instances' host uids;
- ``AGENTSVC_SANDBOX_LOCAL_TMP_MB``: the size of each command's ``/tmp`` (in
  memory; default 64);
- ``AGENTSVC_SANDBOX_LOCAL_PYTHON``: the interpreter that runs the egress
  forwarder inside a sandbox that may reach the network (default ``/usr/bin/python3``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import shutil
import subprocess
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_adapters.sandboxes import jail, streams, workspace
from agentsvc_adapters.sandboxes.egress import FORWARDER, EgressProxy
from agentsvc_core.errors import InvalidInput
from agentsvc_core.ports.sandboxes import (
    ExecExit,
    ExecOutput,
    FileEntry,
    SandboxGone,
    SandboxProvider,
    SandboxSpec,
    SandboxStarted,
    SandboxUnavailable,
)

__all__ = ["LocalSandboxSettings", "LocalSandboxes"]

_REF = re.compile(r"local-[0-9a-f]{24}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
INSTALL = "the local sandbox needs bubblewrap: install it (apt-get install bubblewrap)"


@dataclass(frozen=True, kw_only=True)
class LocalSandboxSettings:
    root: Path  # the sandbox folder
    bwrap: str | None = None  # None: ``bwrap`` on PATH
    uid_base: int = 2_000_000_000
    uid_count: int = 10_000
    tmp_mb: int = 64
    python: str = "/usr/bin/python3"


def _check_searchable(root: Path) -> None:
    """``bwrap`` runs as the instance's user: it must be able to walk to the
    workspace."""
    for folder in reversed(root.resolve().parents):
        if folder.exists() and not os.stat(folder).st_mode & 0o001:
            raise SandboxUnavailable(
                f"the local sandboxes' folder must be reachable by other users:"
                f" chmod o+x {folder} (or set AGENTSVC_SANDBOX_LOCAL_DIR elsewhere)"
            )


def _lay_out(folder: Path, uid: int) -> None:
    """An instance's folder (see the module docstring), its workspace given to
    ``uid``."""
    folder.mkdir(mode=0o711)
    os.chmod(folder, 0o711)  # noqa: S103 - searchable, as above
    (folder / "uid").write_text(f"{uid}\n")
    etc = folder / "etc"
    etc.mkdir(mode=0o755)
    for name, text in jail.etc_files().items():
        (etc / name).write_text(text)
    run = folder / "run"
    run.mkdir(mode=0o711)
    os.chmod(run, 0o711)  # noqa: S103 - searchable: the egress sockets are in it
    (run / "forward.py").write_text(FORWARDER)
    space = folder / "workspace"
    space.mkdir(mode=0o700)
    os.chown(space, uid, uid)


class LocalSandboxes(SandboxProvider):
    name = "local"

    def __init__(self, settings: LocalSandboxSettings, guard: OutboundGuard) -> None:
        # absolute: bwrap binds it from a working folder of its own (the data
        # folder's default, ``.agentsvc``, is relative to where the service started)
        self.settings = replace(settings, root=settings.root.absolute())
        self._guard = guard
        self._probed = False
        self._lock = asyncio.Lock()
        # the programs, once found (``missing`` and every command ask): a machine
        # that lacks one is asked again each time, so installing it needs no restart
        self._found: jail.Tools | None = None

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str], guard: OutboundGuard, data_dir: Path
    ) -> LocalSandboxes:
        def number(name: str, default: int) -> int:
            raw = environ.get(name, "").strip()
            try:
                value = int(raw) if raw else default
            except ValueError:
                raise ValueError(f"{name} must be a whole number") from None
            if value <= 0:
                raise ValueError(f"{name} must be positive")
            return value

        root = environ.get("AGENTSVC_SANDBOX_LOCAL_DIR", "").strip()
        settings = LocalSandboxSettings(
            root=Path(root) if root else Path(data_dir) / "sandboxes" / "local",
            bwrap=environ.get("AGENTSVC_SANDBOX_LOCAL_BWRAP", "").strip() or None,
            uid_base=number("AGENTSVC_SANDBOX_LOCAL_UID_BASE", 2_000_000_000),
            uid_count=number("AGENTSVC_SANDBOX_LOCAL_UID_COUNT", 10_000),
            tmp_mb=number("AGENTSVC_SANDBOX_LOCAL_TMP_MB", 64),
            python=environ.get("AGENTSVC_SANDBOX_LOCAL_PYTHON", "").strip() or "/usr/bin/python3",
        )
        return cls(settings, guard)

    def missing(self) -> str | None:
        try:
            self._tools()
        except SandboxUnavailable as exc:
            return exc.detail
        return None

    # -- what every call needs ---------------------------------------------

    def _tools(self) -> jail.Tools:
        """The programs a command needs, or ``SandboxUnavailable`` saying what to
        install."""
        if self._found is not None:
            return self._found
        bwrap = shutil.which(self.settings.bwrap or "bwrap")
        if bwrap is None:
            raise SandboxUnavailable(INSTALL)
        setpriv, prlimit = shutil.which("setpriv"), shutil.which("prlimit")
        if setpriv is None or prlimit is None:
            raise SandboxUnavailable(
                "the local sandbox needs setpriv and prlimit: install util-linux"
            )
        if os.geteuid() != 0:
            raise SandboxUnavailable(
                "the local sandbox needs the service to run as root: it runs each sandbox"
                " as an unprivileged user of its own"
            )
        self._found = jail.Tools(
            prlimit=prlimit, setpriv=setpriv, bwrap=bwrap, python=self.settings.python
        )
        return self._found

    def _instance(self, ref: str) -> Path:
        self._tools()
        if not _REF.fullmatch(ref):
            raise SandboxGone(f"no local sandbox {ref[:80]!r}")
        folder = self.settings.root / "instances" / ref
        if not (folder / "workspace").is_dir() or (folder / "workspace").is_symlink():
            raise SandboxGone(f"the local sandbox {ref} no longer exists")
        return folder

    def _uid(self, folder: Path) -> int:
        try:
            return int((folder / "uid").read_text())
        except (OSError, ValueError):
            raise SandboxGone(f"the local sandbox {folder.name} no longer exists") from None

    async def _probe(self, tools: jail.Tools) -> None:
        """Once: can this machine make the namespaces at all (a container may forbid
        it)? ``bwrap`` says why not on its first line."""
        if self._probed:
            return
        base = self.settings.uid_base
        argv = [tools.setpriv, f"--reuid={base}", f"--regid={base}", "--clear-groups", "--"]
        argv += [tools.bwrap, "--unshare-user", "--unshare-all"]
        argv += [*jail.system_binds(), "--", "/usr/bin/true"]
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd="/", env=jail.HOST_ENV
        )
        _, err = await proc.communicate()
        if proc.returncode != 0:
            first = err.decode(errors="replace").strip().splitlines()[:1]
            raise SandboxUnavailable(
                "bubblewrap cannot make a sandbox on this machine (unprivileged user"
                f" namespaces must be allowed): {first[0] if first else 'no reason given'}"
            )
        self._probed = True

    # -- lifecycle ----------------------------------------------------------

    async def start(self, spec: SandboxSpec, *, resume: str | None = None) -> SandboxStarted:
        await self._probe(self._tools())
        if resume is not None:
            try:
                self._uid(self._instance(resume))
                return SandboxStarted(ref=resume)
            except SandboxGone:
                await self.destroy(resume)  # what is left of it, if anything
        async with self._lock:
            ref = await asyncio.to_thread(self._make)
        return SandboxStarted(ref=ref, state_lost=resume is not None)

    def _make(self) -> str:
        root = self.settings.root
        _check_searchable(root)
        try:
            # searchable, not readable: bwrap walks to the workspace as the instance's user
            for folder, mode in (
                (root, 0o711),
                (root / "instances", 0o711),
                (root / "uids", 0o700),
            ):
                folder.mkdir(parents=True, exist_ok=True)
                os.chmod(folder, mode)
            ref = f"local-{secrets.token_hex(12)}"
            uid = self._claim(ref)
            try:
                _lay_out(root / "instances" / ref, uid)
            except BaseException:
                shutil.rmtree(root / "instances" / ref, ignore_errors=True)
                shutil.rmtree(root / "uids" / str(uid), ignore_errors=True)
                raise
        except OSError as exc:
            raise SandboxUnavailable(
                f"could not make a local sandbox's folder: {exc.strerror or 'unknown error'}"
            ) from None
        return ref

    def _claim(self, ref: str) -> int:
        uids = self.settings.root / "uids"
        for uid in range(self.settings.uid_base, self.settings.uid_base + self.settings.uid_count):
            try:
                (uids / str(uid)).mkdir(mode=0o700)
            except FileExistsError:
                continue
            (uids / str(uid) / "ref").write_text(ref)
            return uid
        raise SandboxUnavailable(
            "every host uid of the local sandboxes is in use:"
            " raise AGENTSVC_SANDBOX_LOCAL_UID_COUNT"
        )

    async def _kill_all(self, tools: jail.Tools, uid: int) -> None:
        """Every process of the instance's user, whatever sandbox it is in:
        ``kill -KILL -1`` as that user reaches exactly its own processes."""
        proc = await asyncio.create_subprocess_exec(
            tools.setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--",
            "kill", "-9", "-1",  # procps' kill reads "-1" after "--" as an option
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/", env=jail.HOST_ENV,
        )  # fmt: skip
        await proc.wait()

    async def stop(self, ref: str, spec: SandboxSpec) -> None:
        folder = self._instance(ref)
        await self._kill_all(self._tools(), self._uid(folder))
        if not spec.persistent:
            await self.destroy(ref)

    async def destroy(self, ref: str) -> None:
        tools = self._tools()
        if not _REF.fullmatch(ref):
            return
        folder = self.settings.root / "instances" / ref
        try:
            uid: int | None = int((folder / "uid").read_text())
        except (OSError, ValueError):
            uid = None
        if uid is not None:
            await self._kill_all(tools, uid)
        await asyncio.to_thread(shutil.rmtree, folder, True)
        if uid is not None:
            await asyncio.to_thread(shutil.rmtree, self.settings.root / "uids" / str(uid), True)

    # -- commands -----------------------------------------------------------

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
        for name, value in (env or {}).items():
            if not _ENV_NAME.fullmatch(name) or "\x00" in value:
                raise InvalidInput("env", f"{name[:60]!r} is not a valid variable")
        if "\x00" in command:
            raise InvalidInput("command", "must not contain NUL characters")
        folder = self._instance(ref)
        uid = self._uid(folder)
        proxy: EgressProxy | None = None
        socket_name: str | None = None
        if spec.network == "allowlist":
            socket_name = f"egress-{secrets.token_hex(6)}.sock"
            proxy = EgressProxy(self._guard, spec.allowed_hosts)
            await proxy.open(folder / "run" / socket_name, owner=uid)
        options_fd = os.memfd_create("bwrap-options", os.MFD_CLOEXEC)
        try:
            argv, options = jail.command_line(
                tools=self._tools(),
                uid=uid,
                instance=folder,
                spec=spec,
                command=command,
                tmp_mb=self.settings.tmp_mb,
                egress_socket=socket_name,
                env=jail.command_env(env, proxied=proxy is not None),
                options_fd=options_fd,
            )
            left = memoryview(options)
            while left:
                left = left[os.write(options_fd, left) :]
            os.lseek(options_fd, 0, os.SEEK_SET)
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=jail.HOST_ENV,
                cwd="/",
                start_new_session=True,
                pass_fds=(options_fd,),
            )
        except BaseException:
            os.close(options_fd)
            if proxy is not None:
                await self._close_proxy(proxy, folder, socket_name)
            raise
        os.close(options_fd)
        try:
            async for item in streams.stream(proc, timeout_s=timeout_s, max_output=max_output):
                yield item
        finally:
            streams.kill(proc)
            with contextlib.suppress(BaseException):
                await asyncio.shield(proc.wait())
            if proxy is not None:
                await self._close_proxy(proxy, folder, socket_name)

    @staticmethod
    async def _close_proxy(proxy: EgressProxy, folder: Path, socket_name: str | None) -> None:
        await proxy.close()
        with contextlib.suppress(OSError):
            (folder / "run" / str(socket_name)).unlink()

    # -- files --------------------------------------------------------------

    async def read_file(self, ref: str, path: str, *, max_bytes: int = 1_000_000) -> bytes:
        folder = self._instance(ref)
        return await asyncio.to_thread(workspace.read_file, folder / "workspace", path, max_bytes)

    async def write_file(self, ref: str, path: str, data: bytes) -> None:
        folder = self._instance(ref)
        uid = self._uid(folder)
        await asyncio.to_thread(workspace.write_file, folder / "workspace", path, data, uid)

    async def list_files(self, ref: str, path: str = ".", *, limit: int = 1000) -> list[FileEntry]:
        folder = self._instance(ref)
        return await asyncio.to_thread(workspace.list_files, folder / "workspace", path, limit)

    async def disk_bytes(self, ref: str) -> int:
        folder = self._instance(ref)
        return await asyncio.to_thread(workspace.disk_bytes, folder / "workspace")
