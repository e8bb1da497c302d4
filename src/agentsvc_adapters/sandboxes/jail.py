"""How one command of the local sandbox is started: the command line (``prlimit``
-> ``setpriv`` -> ``bwrap`` -> ``sh -c``) and the environment it gets.

- ``prlimit`` sets the limits, inherited by everything the command starts:
  address space (``memory_mb``), processes of the instance's user
  (``max_processes``, plus the few the sandbox itself needs), file size
  (``max_file_mb``), CPU seconds (``cpu_seconds``), no core files.
- ``setpriv`` leaves root for the instance's own host user (a uid of the
  configured range, one per instance, no groups): the command never runs as host
  root, and the process limit counts that instance's processes only.
- ``bwrap``, started by that unprivileged user, makes new user, PID, mount, IPC,
  UTS, cgroup and network namespaces, drops every capability, forbids further
  user namespaces, starts a new session (no terminal injection) and dies with the
  service. The file system is built from nothing: ``/usr`` and the ``/bin``,
  ``/sbin`` and ``/lib*`` it holds read-only, a few files of ``/etc`` read-only (the
  dynamic linker's cache, certificates, time zones, alternatives) plus a
  ``passwd``, ``group`` and ``hosts`` of its own, a fresh ``/proc``, a minimal
  ``/dev``, a small ``/tmp`` in memory, and the instance's workspace, the only
  writable place besides ``/tmp``, at ``/workspace``; then the root itself is
  made read-only. Inside, the command runs as uid 1000.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from agentsvc_adapters.sandboxes.egress import FORWARDER_PORT
from agentsvc_core.ports.sandboxes import WORKSPACE, SandboxSpec

__all__ = [
    "EXTRA_PROCESSES",
    "HOST_ENV",
    "INNER_UID",
    "RUN",
    "Tools",
    "command_env",
    "command_line",
    "etc_files",
    "system_binds",
]

INNER_UID = 1000  # the command's uid and gid inside its user namespace
RUN = "/run/agentsvc"  # where the egress socket and the forwarder are, inside
# bwrap's two processes and the forwarder, counted by the process limit too
EXTRA_PROCESSES = 3
_ETC = (
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "mime.types",
    "protocols",
    "services",
    "ssl",
    "timezone",
)
_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
_MB = 1024 * 1024


def etc_files() -> dict[str, str]:
    """The ``/etc`` files each sandbox gets of its own."""
    return {
        "passwd": f"sandbox:x:{INNER_UID}:{INNER_UID}:sandbox:{WORKSPACE}:/bin/sh\n",
        "group": f"sandbox:x:{INNER_UID}:\n",
        "hosts": "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost\n",
        "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
    }


def system_binds() -> list[str]:
    """``/usr`` and the top folders that live in it (links on a merged-/usr system,
    folders bound read-only elsewhere)."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/", top)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), f"/{top}"]
        elif path.is_dir():
            args += ["--ro-bind", str(path), f"/{top}"]
    for name in _ETC:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return args


def command_line(
    *,
    tools: Tools,
    uid: int,
    instance: Path,
    spec: SandboxSpec,
    command: str,
    tmp_mb: int,
    egress_socket: str | None,
    env: dict[str, str],
    options_fd: int,
) -> tuple[list[str], bytes]:
    """The command line of ``command`` in the sandbox of ``instance`` (its folder:
    ``workspace``, ``etc``, ``run``), run as host user ``uid``, and ``bwrap``'s
    options, to be read from ``options_fd`` (``--args``): the command's
    environment is among them, so that it is neither in the environment of the
    programs that run as root on the host (``LD_PRELOAD``, ``PATH``...) nor on a
    command line other users of the host can read."""
    limits = [
        tools.prlimit,
        f"--as={spec.memory_mb * _MB}",
        f"--nproc={spec.max_processes + EXTRA_PROCESSES}",
        f"--fsize={spec.max_file_mb * _MB}",
        f"--cpu={spec.cpu_seconds}",
        "--core=0",
        "--",
    ]
    user = [tools.setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    options = [
        "--unshare-user",
        "--unshare-all",  # and so ipc, pid, net, uts, cgroup: no --share-net, ever
        "--disable-userns",
        "--uid",
        str(INNER_UID),
        "--gid",
        str(INNER_UID),
        "--hostname",
        "sandbox",
        "--die-with-parent",
        # the command is the namespace's pid 1, a child of bwrap: bwrap's own init
        # would be orphaned on every exit, a zombie for the host's init to reap
        # (and counted against the instance's process limit meanwhile)
        "--as-pid-1",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--clearenv",
        *system_binds(),
    ]
    for name, value in env.items():
        options += ["--setenv", name, value]
    for name in etc_files():
        options += ["--ro-bind", str(instance / "etc" / name), f"/etc/{name}"]
    options += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        str(tmp_mb * _MB),
        "--tmpfs",
        "/tmp",  # noqa: S108 - the sandbox's own, in memory
        "--bind",
        str(instance / "workspace"),
        WORKSPACE,
        "--chdir",
        WORKSPACE,
    ]
    inner = ["/bin/sh", "-c", command]
    if egress_socket is not None:
        options += ["--ro-bind", str(instance / "run"), RUN]
        forward = [tools.python, f"{RUN}/forward.py", str(FORWARDER_PORT), f"{RUN}/{egress_socket}"]
        inner = [*forward, "--", *inner]
    # last: the root bwrap built (a tmpfs holding the mount points) read-only, so
    # that nothing but the workspace and /tmp can be written
    options += ["--remount-ro", "/"]
    argv = [*limits, *user, tools.bwrap, "--args", str(options_fd), "--", *inner]
    return argv, b"".join(o.encode() + b"\0" for o in options)


# what runs a command on the host: the programs ``prlimit``, ``setpriv``, ``bwrap``
# (absolute paths), and the interpreter of the forwarder inside the sandbox
class Tools(NamedTuple):
    prlimit: str
    setpriv: str
    bwrap: str
    python: str


# the environment of the host-side programs (prlimit, setpriv, bwrap): nothing of
# the service's, nothing of the command's
HOST_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def command_env(extra: dict[str, str] | None, *, proxied: bool) -> dict[str, str]:
    """The command's whole environment (nothing of the service's own)."""
    env = {
        "PATH": _PATH,
        "HOME": WORKSPACE,
        "USER": "sandbox",
        "LOGNAME": "sandbox",
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",  # noqa: S108 - inside the sandbox
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    if proxied:
        proxy = f"http://127.0.0.1:{FORWARDER_PORT}"
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
            env[name] = proxy
    env.update(extra or {})
    return env
