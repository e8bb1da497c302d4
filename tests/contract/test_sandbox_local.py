"""The local sandbox (bubblewrap) against the sandbox port's contract, with real
``bwrap`` and real processes: what runs inside cannot reach the network, write
outside its workspace, fork without bound, allocate past its memory or write past
its file size, and is killed on time; files stay inside the workspace; the egress
proxy lets through the allowed hosts only. Needs root and ``bwrap`` (``make test``
installs it)."""

from __future__ import annotations

import asyncio
import http.server
import itertools
import os
import shutil
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_adapters.sandboxes.local import LocalSandboxes, LocalSandboxSettings
from agentsvc_core.errors import InvalidInput, NotFound
from agentsvc_core.ports.sandboxes import (
    ExecExit,
    ExecOutput,
    SandboxGone,
    SandboxSpec,
    SandboxUnavailable,
)

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("bwrap") is None,
    reason="the local sandbox needs root and bubblewrap (make test installs it)",
)

# the tests' own uids, away from the default and from other test processes, and
# new for each test: a process limit counts the zombies a test before left for the
# host's init to reap
UIDS = itertools.count(1_900_000_000 + (os.getpid() % 10_000) * 10_000, 100)


def make_spec(**changes: object) -> SandboxSpec:
    fields: dict[str, object] = {
        "instance_id": "inst",
        "org_id": "org",
        "persistent": False,
        "memory_mb": 512,
        "max_processes": 32,
        "max_file_mb": 8,
        "cpu_seconds": 20,
    }
    fields.update(changes)
    return SandboxSpec(**fields)  # type: ignore[arg-type]


@pytest.fixture
def root() -> Iterator[Path]:
    # not under pytest's tmp_path, whose folders are 0700: bwrap walks to the
    # workspace as the instance's user
    folder = Path(tempfile.mkdtemp(prefix="agentsvc-sandbox-test-"))
    os.chmod(folder, 0o711)  # noqa: S103 - searchable, not readable
    yield folder / "sandboxes"
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def provider(root: Path) -> LocalSandboxes:
    # the loopback fakes need the guard to allow private addresses, as in other tests
    guard = OutboundGuard(allow_private_network=True)
    return LocalSandboxes(LocalSandboxSettings(root=root, uid_base=next(UIDS), uid_count=50), guard)


@pytest.fixture
async def ref(provider: LocalSandboxes) -> AsyncIterator[str]:
    started = await provider.start(make_spec())
    yield started.ref
    await provider.destroy(started.ref)


async def run(
    provider: LocalSandboxes,
    ref: str,
    command: str,
    *,
    timeout_s: float = 15,
    max_output: int = 64_000,
    spec: SandboxSpec | None = None,
) -> tuple[str, str, ExecExit]:
    out: list[str] = []
    err: list[str] = []
    last: ExecExit | None = None
    made = spec or make_spec()
    async for item in provider.exec(ref, made, command, timeout_s=timeout_s, max_output=max_output):
        assert last is None, "nothing comes after the exit"
        if isinstance(item, ExecOutput):
            (out if item.stream == "stdout" else err).append(item.data)
        else:
            last = item
    assert last is not None, "exactly one exit at the end"
    return "".join(out), "".join(err), last


def uid_processes(uid: int) -> list[int]:
    """The live processes of host user ``uid`` (not the zombies: bwrap's pid 1 is
    left to the host's init to reap)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid != uid:
                    continue
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (FileNotFoundError, ProcessLookupError):
                continue
            if state != "Z":
                found.append(int(entry))
    return found


async def none_left(uid: int) -> bool:
    for _ in range(40):
        if not uid_processes(uid):
            return True
        await asyncio.sleep(0.05)
    return False


def instance_uid(root: Path, ref: str) -> int:
    return int((root / "instances" / ref / "uid").read_text())


# -- commands ----------------------------------------------------------------


async def test_python_prints_and_the_exit_code_comes_back(
    provider: LocalSandboxes, ref: str
) -> None:
    out, err, exit_ = await run(provider, ref, "python3 -c 'print(6 * 7)'; echo oops >&2; exit 3")
    assert out == "42\n"
    assert err == "oops\n"
    assert exit_.exit_code == 3
    assert not exit_.timed_out
    assert not exit_.truncated
    assert exit_.signal is None


def host_view(uid: int) -> list[tuple[bytes, bytes]]:
    """(command line, environment) of the host-side ``bwrap`` processes of ``uid``."""
    seen = []
    for pid in uid_processes(uid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if cmdline.split(b"\0")[0].endswith(b"bwrap"):
                seen.append((cmdline, Path(f"/proc/{pid}/environ").read_bytes()))
        except (FileNotFoundError, ProcessLookupError):
            continue
    return seen


async def test_the_environment_is_the_command_s_alone(
    provider: LocalSandboxes, root: Path, ref: str
) -> None:
    os.environ["AGENTSVC_TEST_SERVICE_ONLY"] = "service"
    seen: list[tuple[bytes, bytes]] = []
    try:
        stream = provider.exec(
            ref,
            make_spec(),
            # the sleep keeps it running while the host is looked at; by its full path,
            # as PATH is /nowhere in there (a plain `sleep` was not found: the command
            # ended at once, and the look at the host raced its end)
            "echo $GREETING $PATH $HOME; /usr/bin/env | /usr/bin/grep -c AGENTSVC_TEST_;"
            " /usr/bin/sleep 2",
            timeout_s=15,
            env={"GREETING": "hello world", "PATH": "/nowhere", "LD_PRELOAD": "/nowhere.so"},
        )
        out = ""
        async for item in stream:
            if isinstance(item, ExecOutput) and item.stream == "stdout":
                out += item.data
                seen = seen or await asyncio.to_thread(host_view, instance_uid(root, ref))
    finally:
        del os.environ["AGENTSVC_TEST_SERVICE_ONLY"]
    assert out.splitlines() == ["hello world /nowhere /workspace", "0"]
    # what the command is given reaches neither the programs that start the sandbox
    # on the host (LD_PRELOAD, PATH) nor their command lines (ps)
    assert seen
    for cmdline, environ in seen:
        assert b"hello world" not in cmdline
        assert b"GREETING" not in environ
        assert b"LD_PRELOAD" not in environ
    with pytest.raises(InvalidInput):
        await anext(provider.exec(ref, make_spec(), "true", timeout_s=5, env={"A=B": "x"}))


async def test_the_command_runs_in_the_workspace_as_an_unprivileged_user(
    provider: LocalSandboxes, root: Path, ref: str
) -> None:
    out, _, _ = await run(provider, ref, "pwd; id -u; grep CapEff /proc/self/status")
    assert out.splitlines()[:2] == ["/workspace", "1000"]
    assert out.splitlines()[2].split()[1] == "0000000000000000"
    # and on the host, not as root: as the instance's own uid
    uid = instance_uid(root, ref)
    base = provider.settings.uid_base
    assert base <= uid < base + 50
    seen: list[int] = []

    async def watch() -> None:
        async for item in provider.exec(ref, make_spec(), "sleep 2", timeout_s=10):
            if isinstance(item, ExecExit):
                return

    task = asyncio.create_task(watch())
    for _ in range(40):
        await asyncio.sleep(0.05)
        if seen := uid_processes(uid):
            break
    await task
    assert seen, "the command's processes belong to the instance's uid on the host"


async def test_no_route_out_without_an_allowlist(provider: LocalSandboxes, ref: str) -> None:
    code = (
        "import socket\n"
        "for host, port in (('127.0.0.1', 5432), ('10.0.0.1', 80), ('1.1.1.1', 443)):\n"
        "    try:\n"
        "        socket.create_connection((host, port), timeout=2)\n"
        "        print('reached', host)\n"
        "    except OSError as exc:\n"
        "        print('failed', host, exc.errno)\n"
    )
    await provider.write_file(ref, "probe.py", code.encode())
    out, _, exit_ = await run(provider, ref, "python3 probe.py; cat /proc/net/route | wc -l")
    lines = out.splitlines()
    assert [line.split()[0] for line in lines[:3]] == ["failed", "failed", "failed"]
    assert lines[3] == "1", "no route at all: only the header of the routing table"
    assert exit_.exit_code == 0


@pytest.mark.parametrize("target", ["/usr/x", "/etc/x", "/root/x", "/x", "/proc/x"])
async def test_writing_outside_the_workspace_fails(
    provider: LocalSandboxes, ref: str, target: str
) -> None:
    _, err, exit_ = await run(provider, ref, f"echo x > {target}")
    assert exit_.exit_code != 0
    assert err
    assert not await asyncio.to_thread(Path(target).exists)


async def test_another_instance_s_workspace_is_out_of_reach(
    provider: LocalSandboxes, root: Path, ref: str
) -> None:
    other = (await provider.start(make_spec())).ref
    await provider.write_file(other, "secret.txt", b"theirs")
    theirs = root / "instances" / other / "workspace"
    out, _, _ = await run(
        provider, ref, f"cat {theirs}/secret.txt; echo x > {theirs}/mine; ls {root} || echo none"
    )
    assert "theirs" not in out
    assert not (theirs / "mine").exists()
    assert instance_uid(root, other) != instance_uid(root, ref)
    await provider.destroy(other)


async def test_a_fork_bomb_is_bounded_and_the_host_unharmed(
    provider: LocalSandboxes, ref: str
) -> None:
    started = time.monotonic()
    out, _, exit_ = await run(
        provider,
        ref,
        "python3 -c '\nimport os\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n"
        "            import time; time.sleep(30); os._exit(0)\n        n += 1\n"
        "except OSError:\n    print(n)\n'",
        timeout_s=20,
    )
    assert 20 <= int(out) <= 32, "stopped near the process limit (32)"
    assert exit_.exit_code == 0
    assert time.monotonic() - started < 10, "the sleeping children died with the command"
    # and a shell fork bomb ends too, when its command does
    _, _, exit_ = await run(provider, ref, "b() { b | b & }; b; sleep 1", timeout_s=20)
    assert not exit_.timed_out


async def test_allocating_past_the_memory_limit_fails(provider: LocalSandboxes, ref: str) -> None:
    out, err, exit_ = await run(
        provider, ref, "python3 -c 'b = bytearray(300 * 1024 * 1024); print(len(b))'",
        spec=make_spec(memory_mb=200),
    )  # fmt: skip
    assert "MemoryError" in err
    assert out == ""
    assert exit_.exit_code != 0
    out, _, _ = await run(
        provider, ref, "python3 -c 'b = bytearray(50 * 1024 * 1024); print(len(b))'"
    )
    assert out == f"{50 * 1024 * 1024}\n", "within the limit it works"


async def test_a_file_past_max_file_mb_fails(provider: LocalSandboxes, ref: str) -> None:
    _, err, exit_ = await run(provider, ref, "head -c 20M /dev/zero > big")
    assert "File size limit exceeded" in err
    assert exit_.exit_code != 0
    assert (await provider.list_files(ref))[0].size == 8 * 1024 * 1024


async def test_cpu_time_past_cpu_seconds_ends_the_command(
    provider: LocalSandboxes, ref: str
) -> None:
    started = time.monotonic()
    _, _, exit_ = await run(
        provider,
        ref,
        "python3 -c 'while True: pass'",
        spec=make_spec(cpu_seconds=1),
        timeout_s=20,
    )
    assert time.monotonic() - started < 10
    assert not exit_.timed_out
    assert exit_.exit_code is None
    assert exit_.signal in ("SIGKILL", "SIGXCPU")


async def test_a_timed_out_command_is_killed_with_its_partial_output(
    provider: LocalSandboxes, root: Path, ref: str
) -> None:
    started = time.monotonic()
    out, _, exit_ = await run(provider, ref, "echo started; sleep 30 & sleep 30", timeout_s=1)
    assert time.monotonic() - started < 5
    assert out == "started\n"
    assert exit_.timed_out
    assert exit_.exit_code is None
    assert exit_.signal == "SIGKILL"
    assert exit_.duration_ms >= 1000
    assert await none_left(instance_uid(root, ref)), "the background sleep died too"


async def test_leaving_the_iterator_early_kills_the_command(
    provider: LocalSandboxes, root: Path, ref: str
) -> None:
    stream = provider.exec(ref, make_spec(), "echo one; sleep 30; echo two > after", timeout_s=60)
    first = await anext(stream)
    assert first == ExecOutput(stream="stdout", data="one\n")
    await stream.aclose()  # type: ignore[attr-defined]
    assert await none_left(instance_uid(root, ref))
    with pytest.raises(NotFound):
        await provider.read_file(ref, "after")


async def test_a_cancelled_task_kills_the_command(
    provider: LocalSandboxes, root: Path, ref: str
) -> None:
    async def consume() -> None:
        async for _ in provider.exec(ref, make_spec(), "echo one; sleep 30", timeout_s=60):
            pass

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await none_left(instance_uid(root, ref))


async def test_output_past_max_output_is_dropped_and_said(
    provider: LocalSandboxes, ref: str
) -> None:
    out, err, exit_ = await run(
        provider, ref, "head -c 100000 /dev/zero | tr '\\0' a; echo done >&2", max_output=1000
    )
    assert out == "a" * 1000
    assert err == "done\n"
    assert exit_.truncated
    assert exit_.exit_code == 0


# -- lifecycle -----------------------------------------------------------------


async def test_a_persistent_sandbox_keeps_its_files_across_a_stop(provider: LocalSandboxes) -> None:
    kept = make_spec(persistent=True)
    first = await provider.start(kept)
    await run(provider, first.ref, "echo hello > notes.txt", spec=kept)
    await provider.stop(first.ref, kept)
    again = await provider.start(kept, resume=first.ref)
    assert again == first.__class__(ref=first.ref, state_lost=False)
    assert await provider.read_file(again.ref, "notes.txt") == b"hello\n"
    await provider.destroy(again.ref)


async def test_a_non_persistent_sandbox_loses_its_files_on_stop(
    provider: LocalSandboxes, root: Path
) -> None:
    first = await provider.start(make_spec())
    await run(provider, first.ref, "echo hello > notes.txt")
    await provider.stop(first.ref, make_spec())
    assert not (root / "instances" / first.ref).exists()
    with pytest.raises(SandboxGone):
        await provider.read_file(first.ref, "notes.txt")
    again = await provider.start(make_spec(), resume=first.ref)
    assert again.state_lost
    assert again.ref != first.ref
    assert await provider.list_files(again.ref) == []
    await provider.destroy(again.ref)


async def test_a_vanished_workspace_is_announced_as_state_lost(
    provider: LocalSandboxes, root: Path
) -> None:
    kept = make_spec(persistent=True)
    first = await provider.start(kept)
    await provider.write_file(first.ref, "a.txt", b"a")
    shutil.rmtree(root / "instances" / first.ref / "workspace")
    again = await provider.start(kept, resume=first.ref)
    assert again.state_lost
    assert again.ref != first.ref
    assert await provider.list_files(again.ref) == []
    await provider.destroy(again.ref)
    await provider.destroy(again.ref)  # idempotent
    await provider.destroy("local-" + "0" * 24)


async def test_stop_kills_what_runs(provider: LocalSandboxes, root: Path) -> None:
    kept = make_spec(persistent=True)
    first = await provider.start(kept)
    stream = provider.exec(first.ref, kept, "echo up; sleep 30", timeout_s=60)
    await anext(stream)
    await provider.stop(first.ref, kept)
    uid = instance_uid(root, first.ref)
    assert await none_left(uid)
    items = [item async for item in stream]
    assert isinstance(items[-1], ExecExit)
    assert items[-1].exit_code is None
    await provider.destroy(first.ref)


async def test_calls_on_an_unknown_sandbox_are_gone(provider: LocalSandboxes) -> None:
    for ref in ("local-" + "0" * 24, "../../etc", ""):
        with pytest.raises(SandboxGone):
            await provider.read_file(ref, "x")
        with pytest.raises(SandboxGone):
            await anext(provider.exec(ref, make_spec(), "true", timeout_s=5))


async def test_without_bwrap_every_call_says_what_to_install(root: Path) -> None:
    missing = LocalSandboxes(
        LocalSandboxSettings(root=root, bwrap="/nonexistent/bwrap"),
        OutboundGuard(allow_private_network=True),
    )
    calls = [
        missing.start(make_spec()),
        missing.stop("local-" + "0" * 24, make_spec()),
        missing.destroy("local-" + "0" * 24),
        missing.read_file("local-" + "0" * 24, "x"),
        missing.write_file("local-" + "0" * 24, "x", b""),
        missing.list_files("local-" + "0" * 24),
        missing.disk_bytes("local-" + "0" * 24),
        anext(missing.exec("local-" + "0" * 24, make_spec(), "true", timeout_s=5)),
    ]
    for call in calls:
        with pytest.raises(SandboxUnavailable) as caught:
            await call
        assert "apt-get install bubblewrap" in caught.value.detail


async def test_a_folder_bwrap_cannot_walk_to_or_no_uid_left_is_unavailable(
    root: Path, tmp_path: Path
) -> None:
    guard = OutboundGuard(allow_private_network=True)
    hidden = LocalSandboxes(LocalSandboxSettings(root=tmp_path / "sandboxes"), guard)
    # pytest's own folders are 0700
    with pytest.raises(SandboxUnavailable, match="chmod o\\+x"):
        await hidden.start(make_spec())
    one = LocalSandboxes(LocalSandboxSettings(root=root, uid_base=next(UIDS), uid_count=1), guard)
    first = await one.start(make_spec())
    with pytest.raises(SandboxUnavailable, match="UID_COUNT"):
        await one.start(make_spec())
    await one.destroy(first.ref)
    again = await one.start(make_spec())  # the uid is free again
    await one.destroy(again.ref)


def test_from_env_reads_its_settings(tmp_path: Path) -> None:
    guard = OutboundGuard(allow_private_network=False)
    made = LocalSandboxes.from_env({}, guard, tmp_path)
    assert made.settings.root == tmp_path / "sandboxes" / "local"
    assert made.settings.uid_base == 2_000_000_000
    assert made.settings.tmp_mb == 64
    made = LocalSandboxes.from_env(
        {
            "AGENTSVC_SANDBOX_LOCAL_DIR": "/srv/sandboxes",
            "AGENTSVC_SANDBOX_LOCAL_BWRAP": "/opt/bwrap",
            "AGENTSVC_SANDBOX_LOCAL_UID_BASE": "300000",
            "AGENTSVC_SANDBOX_LOCAL_UID_COUNT": "20",
            "AGENTSVC_SANDBOX_LOCAL_TMP_MB": "16",
        },
        guard,
        tmp_path,
    )
    assert made.settings.root == Path("/srv/sandboxes")
    assert (made.settings.bwrap, made.settings.uid_base, made.settings.uid_count) == (
        "/opt/bwrap",
        300000,
        20,
    )
    assert made.settings.tmp_mb == 16
    with pytest.raises(ValueError, match="UID_BASE"):
        LocalSandboxes.from_env({"AGENTSVC_SANDBOX_LOCAL_UID_BASE": "x"}, guard, tmp_path)


# -- files ---------------------------------------------------------------------


async def test_files_round_trip_and_are_the_sandbox_s(provider: LocalSandboxes, ref: str) -> None:
    await provider.write_file(ref, "src/app/main.py", b"print('hi')\n")
    await provider.write_file(ref, "/workspace/README", b"readme")
    await provider.write_file(ref, "README", b"replaced")
    out, _, _ = await run(provider, ref, "python3 src/app/main.py; echo more >> README; cat README")
    assert out == "hi\nreplacedmore\n"
    assert await provider.read_file(ref, "./src/app/main.py") == b"print('hi')\n"
    entries = await provider.list_files(ref)
    assert [(e.path, e.is_dir) for e in entries] == [("src", True), ("README", False)]
    assert [e.path for e in await provider.list_files(ref, "src/app")] == ["src/app/main.py"]
    assert await provider.disk_bytes(ref) > 0


@pytest.mark.parametrize(
    "path", ["../x", "a/../../x", "/etc/passwd", "/workspace/../etc/passwd", "/var/x"]
)
async def test_paths_leaving_the_workspace_are_refused(
    provider: LocalSandboxes, ref: str, path: str
) -> None:
    with pytest.raises(InvalidInput):
        await provider.read_file(ref, path)
    with pytest.raises(InvalidInput):
        await provider.write_file(ref, path, b"x")
    with pytest.raises(InvalidInput):
        await provider.list_files(ref, path)


async def test_links_out_of_the_workspace_are_not_followed(
    provider: LocalSandboxes, root: Path, ref: str, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "host.txt").write_text("host")
    await run(provider, ref, f"ln -s /etc/passwd pw; ln -s {outside} out; mkfifo pipe; mkdir d")
    for path in ("pw", "out/host.txt", "pipe", "d"):
        with pytest.raises(InvalidInput):
            await provider.read_file(ref, path)
    with pytest.raises(InvalidInput):
        await provider.write_file(ref, "out/new.txt", b"x")
    with pytest.raises(InvalidInput):
        await provider.list_files(ref, "out")
    assert not (outside / "new.txt").exists()
    # a link where the file goes is replaced, not written through
    await provider.write_file(ref, "pw", b"mine")
    assert await provider.read_file(ref, "pw") == b"mine"
    assert b"mine" not in await asyncio.to_thread(Path("/etc/passwd").read_bytes)
    with pytest.raises(NotFound):
        await provider.read_file(ref, "missing.txt")
    await provider.write_file(ref, "big", b"x" * 2000)
    with pytest.raises(InvalidInput):
        await provider.read_file(ref, "big", max_bytes=1000)


# -- the egress proxy ----------------------------------------------------------


@pytest.fixture
def http_server() -> Iterator[int]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = f"hello {self.path}".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


async def test_the_allowlist_proxy_reaches_allowed_hosts_only(
    provider: LocalSandboxes, ref: str, http_server: int
) -> None:
    allow = make_spec(network="allowlist", allowed_hosts=("127.0.0.1",))
    url = f"http://127.0.0.1:{http_server}"
    out, _, exit_ = await run(
        provider,
        ref,
        f"curl -sS {url}/curl; echo; "
        'python3 -c "import urllib.request as r; '
        f"print(r.urlopen('{url}/py').read().decode())\"; "
        f"curl -sS -o /dev/null -w '%{{http_code}}\\n' http://localhost:{http_server}/no",
        spec=allow,
    )
    assert out.splitlines() == ["hello /curl", "hello /py", "403"]
    assert exit_.exit_code == 0
    # past the proxy there is still no route
    out, _, _ = await run(
        provider,
        ref,
        'python3 -c "import socket; '
        f"socket.create_connection(('127.0.0.1', {http_server}), timeout=2)\""
        " 2>/dev/null && echo reached || echo refused",
        spec=allow,
    )
    assert out == "refused\n"


async def test_connect_tunnels_to_an_allowed_host(provider: LocalSandboxes, ref: str) -> None:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"echo:" + await reader.readline())
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    code = (
        "import socket\n"
        "s = socket.create_connection(('127.0.0.1', 3128))\n"
        f"s.sendall(b'CONNECT 127.0.0.1:{port} HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
        "head = b''\n"
        "while not head.endswith(b'\\r\\n\\r\\n'):\n"
        "    head += s.recv(1)\n"
        "print(head.split(b'\\r\\n')[0].decode())\n"
        "s.sendall(b'ping\\n')\n"
        "print(s.recv(100).decode().strip())\n"
    )
    await provider.write_file(ref, "tunnel.py", code.encode())
    allow = make_spec(network="allowlist", allowed_hosts=("127.0.0.1",))
    async with server:
        out, err, _ = await run(provider, ref, "python3 tunnel.py", spec=allow)
    assert out.splitlines() == ["HTTP/1.1 200 Connection established", "echo:ping"], err


async def test_the_proxy_refuses_what_the_outbound_guard_refuses(
    root: Path, http_server: int
) -> None:
    strict = LocalSandboxes(
        LocalSandboxSettings(root=root, uid_base=next(UIDS), uid_count=5),
        OutboundGuard(allow_private_network=False),
    )
    allow = make_spec(network="allowlist", allowed_hosts=("127.0.0.1", "localhost"))
    started = await strict.start(allow)
    out, _, _ = await run(
        strict,
        started.ref,
        f"curl -sS -i http://127.0.0.1:{http_server}/; "
        f"curl -sS -o /dev/null -w '%{{http_code}}\\n' https://localhost:{http_server}/",
        spec=allow,
    )
    assert "403 Forbidden" in out
    assert "outbound guard" in out
    assert "hello" not in out
    await strict.destroy(started.ref)


async def test_network_none_has_no_proxy_either(
    provider: LocalSandboxes, ref: str, http_server: int
) -> None:
    out, _, _ = await run(
        provider,
        ref,
        f"env | grep -ci proxy; curl -sS -m 2 http://127.0.0.1:{http_server}/ || echo failed; "
        "ls /run/agentsvc 2>/dev/null | wc -l",
    )
    assert out.splitlines()[0] == "0"
    assert "hello" not in out
    assert "failed" in out


async def test_a_relative_folder_is_taken_from_where_the_service_started(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The data folder's default (``.agentsvc``) is relative: the sandboxes under it
    work, whatever folder bwrap itself starts in."""
    monkeypatch.chdir(root.parent)
    relative = LocalSandboxes(
        LocalSandboxSettings(root=Path("sandboxes"), uid_base=next(UIDS), uid_count=5),
        OutboundGuard(allow_private_network=True),
    )
    assert relative.settings.root == root
    started = await relative.start(make_spec())
    try:
        monkeypatch.chdir("/")
        out, _, exit_ = await run(relative, started.ref, "echo works; pwd")
        assert (out, exit_.exit_code) == ("works\n/workspace\n", 0)
    finally:
        await relative.destroy(started.ref)
