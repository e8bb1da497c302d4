"""The local sandbox's command line (agentsvc_adapters/sandboxes/jail.py), read as
text: every limit ``prlimit`` sets, the host user ``setpriv`` leaves root for,
each namespace and option ``bwrap`` gets, what is bound read-only and what is
writable, and the command's environment. The contract tests
(tests/contract/test_sandbox_local.py) run it under the real bwrap; these say
what it is, quickly, one option at a time."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentsvc_adapters.sandboxes import jail
from agentsvc_adapters.sandboxes.jail import (
    EXTRA_PROCESSES,
    HOST_ENV,
    INNER_UID,
    RUN,
    Tools,
    command_env,
    command_line,
    etc_files,
    system_binds,
)
from agentsvc_core.ports.sandboxes import SandboxSpec

MB = 1024 * 1024
TOOLS = Tools(
    prlimit="/usr/bin/prlimit", setpriv="/usr/bin/setpriv", bwrap="/usr/bin/bwrap", python="/py"
)
INSTANCE = Path("/srv/sandboxes/i1")


def spec(**overrides: object) -> SandboxSpec:
    fields: dict[str, object] = {
        "instance_id": "i1",
        "org_id": "o1",
        "persistent": True,
        "memory_mb": 512,
        "max_processes": 40,
        "max_file_mb": 100,
        "cpu_seconds": 30,
    }
    fields.update(overrides)
    return SandboxSpec(**fields)  # type: ignore[arg-type]


def line(
    *,
    egress: str | None = None,
    env: dict[str, str] | None = None,
    command: str = "echo hi",
    the_spec: SandboxSpec | None = None,
) -> tuple[list[str], list[str]]:
    argv, blob = command_line(
        tools=TOOLS,
        uid=70123,
        instance=INSTANCE,
        spec=the_spec or spec(),
        command=command,
        tmp_mb=64,
        egress_socket=egress,
        env=env if env is not None else {"A": "1"},
        options_fd=7,
    )
    assert blob.endswith(b"\0"), "every option ends with a NUL, the last one too"
    options = [o.decode() for o in blob.split(b"\0")[:-1]]
    return argv, options


def test_the_limits_the_user_and_bwrap_in_that_order() -> None:
    argv, _ = line()
    assert argv == [
        "/usr/bin/prlimit",
        f"--as={512 * MB}",
        f"--nproc={40 + EXTRA_PROCESSES}",
        f"--fsize={100 * MB}",
        "--cpu=30",
        "--core=0",
        "--",
        "/usr/bin/setpriv",
        "--reuid=70123",
        "--regid=70123",
        "--clear-groups",
        "--",
        "/usr/bin/bwrap",
        "--args",
        "7",
        "--",
        "/bin/sh",
        "-c",
        "echo hi",
    ]
    assert EXTRA_PROCESSES == 3


@pytest.mark.parametrize(
    ("override", "option"),
    [
        ({"memory_mb": 1}, f"--as={MB}"),
        ({"memory_mb": 2048}, f"--as={2048 * MB}"),
        ({"max_processes": 1}, f"--nproc={1 + EXTRA_PROCESSES}"),
        ({"max_file_mb": 1}, f"--fsize={MB}"),
        ({"max_file_mb": 7}, f"--fsize={7 * MB}"),
        ({"cpu_seconds": 1}, "--cpu=1"),
    ],
)
def test_each_limit_follows_the_spec(override: dict[str, int], option: str) -> None:
    argv, _ = line(the_spec=spec(**override))
    assert option in argv[: argv.index("--")]


def test_bwrap_makes_every_namespace_drops_everything_and_clears_the_environment() -> None:
    _, options = line()
    assert options[:16] == [
        "--unshare-user",
        "--unshare-all",
        "--disable-userns",
        "--uid",
        str(INNER_UID),
        "--gid",
        str(INNER_UID),
        "--hostname",
        "sandbox",
        "--die-with-parent",
        "--as-pid-1",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--clearenv",
        "--ro-bind",
    ]
    assert INNER_UID == 1000
    assert "--share-net" not in options
    assert options[15:][: len(system_binds())] == system_binds()


def test_the_file_system_the_environment_and_the_read_only_root() -> None:
    _, options = line(env={"A": "1", "B": "two words"})
    rest = options[15 + len(system_binds()) :]
    assert rest == [
        "--setenv",
        "A",
        "1",
        "--setenv",
        "B",
        "two words",
        "--ro-bind",
        f"{INSTANCE}/etc/passwd",
        "/etc/passwd",
        "--ro-bind",
        f"{INSTANCE}/etc/group",
        "/etc/group",
        "--ro-bind",
        f"{INSTANCE}/etc/hosts",
        "/etc/hosts",
        "--ro-bind",
        f"{INSTANCE}/etc/nsswitch.conf",
        "/etc/nsswitch.conf",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        str(64 * MB),
        "--tmpfs",
        "/tmp",  # noqa: S108 - the sandbox's own
        "--bind",
        f"{INSTANCE}/workspace",
        "/workspace",
        "--chdir",
        "/workspace",
        "--remount-ro",
        "/",
    ]


def test_with_egress_the_run_folder_is_read_only_and_the_forwarder_starts_first() -> None:
    argv, options = line(egress="egress.sock", command="curl x")
    _, without = line(command="curl x")
    assert options == [*without[:-2], "--ro-bind", f"{INSTANCE}/run", RUN, *without[-2:]]
    assert options[-5:] == ["--ro-bind", f"{INSTANCE}/run", RUN, "--remount-ro", "/"]
    assert RUN == "/run/agentsvc"
    assert argv[argv.index("/usr/bin/bwrap") :] == [
        "/usr/bin/bwrap",
        "--args",
        "7",
        "--",
        "/py",
        "/run/agentsvc/forward.py",
        "3128",
        "/run/agentsvc/egress.sock",
        "--",
        "/bin/sh",
        "-c",
        "curl x",
    ]


def test_without_egress_nothing_of_run_is_bound() -> None:
    argv, options = line()
    assert RUN not in options
    assert "/py" not in argv


def test_the_command_s_environment_is_in_the_options_not_the_command_line() -> None:
    argv, options = line(env={"SECRET_TOKEN": "s3cr3t"})
    assert not any("s3cr3t" in a for a in argv)
    assert "s3cr3t" in options


def test_the_etc_files_of_each_sandbox() -> None:
    assert etc_files() == {
        "passwd": "sandbox:x:1000:1000:sandbox:/workspace:/bin/sh\n",
        "group": "sandbox:x:1000:\n",
        "hosts": "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost\n",
        "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
    }


def test_system_binds_read_only_usr_its_tops_and_a_few_etc_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a root of its own: bin a link into usr, lib a folder, sbin and the rest absent
    (tmp_path / "usr" / "bin").mkdir(parents=True)
    (tmp_path / "lib").mkdir()
    (tmp_path / "bin").symlink_to("usr/bin")
    real_path = Path

    def rooted(first: str, *rest: str) -> Path:
        assert first == "/"
        return real_path(tmp_path, *rest)

    monkeypatch.setattr(jail, "Path", rooted)
    args = system_binds()
    assert args[:9] == [
        "--ro-bind",
        "/usr",
        "/usr",
        "--symlink",
        "usr/bin",
        "/bin",
        "--ro-bind",
        str(tmp_path / "lib"),
        "/lib",
    ]
    etc = args[9:]
    assert etc[:3] == ["--ro-bind-try", "/etc/alternatives", "/etc/alternatives"]
    named = etc[1::3]
    assert named == [
        f"/etc/{n}"
        for n in (
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
    ]
    assert etc[0::3] == ["--ro-bind-try"] * 12
    assert etc[2::3] == named
    assert "/etc/shadow" not in args
    assert "/etc/passwd" not in args


@pytest.mark.parametrize("top", ["bin", "sbin", "lib", "lib32", "lib64", "libx32"])
def test_each_top_folder_is_linked_or_bound(
    top: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / top).mkdir()
    (tmp_path / "usr").mkdir()
    real_path = Path
    monkeypatch.setattr(jail, "Path", lambda _root, *rest: real_path(tmp_path, *rest))
    assert system_binds()[3:6] == ["--ro-bind", str(tmp_path / top), f"/{top}"]
    (tmp_path / top).rmdir()
    (tmp_path / top).symlink_to(f"usr/{top}")
    assert system_binds()[3:6] == ["--symlink", f"usr/{top}", f"/{top}"]


def test_the_command_s_environment() -> None:
    assert command_env(None, proxied=False) == {
        "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin",
        "HOME": "/workspace",
        "USER": "sandbox",
        "LOGNAME": "sandbox",
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",  # noqa: S108 - inside the sandbox
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def test_a_proxied_command_gets_the_proxy_in_both_spellings() -> None:
    env = command_env({"X": "1"}, proxied=True)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        assert env[name] == "http://127.0.0.1:3128"
    assert env["X"] == "1"
    assert len(env) == 7 + 4 + 1


def test_the_caller_s_variables_win_and_nothing_of_the_service_s_leaks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AGENTSVC_SECRET", "x")
    env = command_env({"PATH": "/mine", "HOME": "/h"}, proxied=False)
    assert env["PATH"] == "/mine"
    assert env["HOME"] == "/h"
    assert "AGENTSVC_SECRET" not in env
    assert os.environ["AGENTSVC_SECRET"] == "x"


def test_the_host_side_programs_get_a_bare_environment() -> None:
    assert HOST_ENV == {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
