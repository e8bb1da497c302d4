"""The ``e2b`` sandbox provider against the loopback fake of E2B (tests/fakes/e2b.py),
on the contract of agentsvc_core/ports/sandboxes.py: a started sandbox runs a
command and streams its stdout and stderr, then its exit code; a command past its
time is killed with what it printed; output past ``max_output`` is dropped and
the exit says so; leaving a command early kills it; files are written, read and
listed by workspace path and a path out of the workspace is refused; a persistent
sandbox keeps its files across a stop and a resume; a sandbox E2B lost comes back
new with ``state_lost``; destroy is idempotent; without an API key every call is
``SandboxUnavailable`` naming the variable; E2B's refusals read clearly and carry
no secret; the API key goes only to the API and the sandbox token only to the
sandbox."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_adapters.sandboxes.e2b import E2BSandboxes
from agentsvc_core.errors import InvalidInput, NotFound
from agentsvc_core.ports.sandboxes import (
    ExecExit,
    ExecOutput,
    SandboxGone,
    SandboxSpec,
    SandboxUnavailable,
)
from tests.fakes.e2b import API_KEY, FakeE2B
from tests.web.live import serve

SPEC = SandboxSpec(instance_id="inst-1", org_id="org-1", persistent=True, memory_mb=512)
EPHEMERAL = SandboxSpec(instance_id="inst-2", org_id="org-1", persistent=False, memory_mb=512)


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FakeE2B, str]]:
    e2b = FakeE2B(tmp_path_factory.mktemp("e2b"))
    with serve(e2b) as url:
        yield e2b, url


def provider(url: str, **over: str) -> E2BSandboxes:
    env = {
        "AGENTSVC_E2B_API_KEY": API_KEY,
        "AGENTSVC_E2B_API_URL": url,
        "AGENTSVC_E2B_SANDBOX_URL": url,
    } | over
    return E2BSandboxes.from_env(env, OutboundGuard(allow_private_network=True))


@pytest.fixture
async def e2b(fake: tuple[FakeE2B, str]) -> AsyncIterator[E2BSandboxes]:
    sandboxes = provider(fake[1])
    yield sandboxes
    await sandboxes.aclose()


def running(command: str) -> bool:
    """Whether a process of this exact command line runs on this machine (the
    fake runs commands for real)."""
    found = subprocess.run(["pgrep", "-f", f"^{command}$"], capture_output=True, check=False)
    return found.returncode == 0


async def run(e2b: E2BSandboxes, ref: str, command: str, **kw: float) -> tuple[str, str, ExecExit]:
    out, err, exit_ = "", "", None
    async for item in e2b.exec(ref, SPEC, command, **kw):  # type: ignore[arg-type]
        if isinstance(item, ExecOutput):
            if item.stream == "stdout":
                out += item.data
            else:
                err += item.data
        else:
            assert exit_ is None, "exactly one exit"
            exit_ = item
    assert exit_ is not None
    return out, err, exit_


async def test_start_creates_a_sandbox_as_configured(
    e2b: E2BSandboxes, fake: tuple[FakeE2B, str]
) -> None:
    started = await e2b.start(SPEC)
    assert not started.state_lost
    box = fake[0].sandboxes[started.ref]
    assert box.body["templateID"] == "base"
    assert box.body["autoPause"] is True  # persistent: E2B's timeout pauses
    assert box.body["allow_internet_access"] is False
    assert box.body["metadata"] == {"agentsvc_instance": "inst-1", "agentsvc_org": "org-1"}
    assert (box.root / "workspace").is_dir()
    other = await e2b.start(
        SandboxSpec(
            instance_id="i",
            org_id="o",
            persistent=False,
            memory_mb=1,
            network="allowlist",
            allowed_hosts=("pypi.org",),
        )
    )
    body = fake[0].sandboxes[other.ref].body
    assert body["autoPause"] is False
    assert body["network"]["allowOut"] == ["pypi.org"]
    assert body["network"]["denyOut"] == ["0.0.0.0/0"]
    assert "allow_internet_access" not in body


async def test_exec_streams_stdout_stderr_and_the_exit_code(e2b: E2BSandboxes) -> None:
    ref = (await e2b.start(SPEC)).ref
    items = [
        item
        async for item in e2b.exec(
            ref, SPEC, "echo out; echo err >&2; sleep 0.3; echo more; exit 3", timeout_s=20
        )
    ]
    streams = [(i.stream, i.data) for i in items if isinstance(i, ExecOutput)]
    assert ("stdout", "out\n") in streams
    assert ("stderr", "err\n") in streams
    assert streams[-1] == ("stdout", "more\n")  # as it came, not batched at the end
    exit_ = items[-1]
    assert isinstance(exit_, ExecExit)
    assert exit_.exit_code == 3
    assert not exit_.timed_out
    assert not exit_.truncated
    assert exit_.signal is None
    out, _, ok = await run(e2b, ref, "pwd; echo $G", timeout_s=20)
    assert ok.exit_code == 0
    assert out.endswith("workspace\n\n")
    items = [i async for i in e2b.exec(ref, SPEC, "echo $G", timeout_s=20, env={"G": "hi"})]
    assert items[0] == ExecOutput(stream="stdout", data="hi\n")


async def test_a_command_past_its_time_is_killed_with_its_partial_output(
    e2b: E2BSandboxes, fake: tuple[FakeE2B, str]
) -> None:
    ref = (await e2b.start(SPEC)).ref
    began = time.monotonic()
    command = "echo started; sleep 31.25 & sleep 31.5; echo never"
    out, _, exit_ = await run(e2b, ref, command, timeout_s=1)
    assert time.monotonic() - began < 10
    assert out == "started\n"
    assert exit_.timed_out
    assert exit_.exit_code is None
    assert exit_.signal == "SIGKILL"
    assert exit_.duration_ms >= 1000
    assert not fake[0].sandboxes[ref].procs  # killed, not left running
    assert not running("sleep 31.25")  # nor what it started
    assert not running("sleep 31.5")


async def test_output_past_max_output_is_dropped_and_said(e2b: E2BSandboxes) -> None:
    ref = (await e2b.start(SPEC)).ref
    out, err, exit_ = await run(
        e2b, ref, "head -c 5000 /dev/zero | tr '\\0' a; echo e >&2", timeout_s=20, max_output=100
    )
    assert out == "a" * 100
    assert err == "e\n"
    assert exit_.truncated
    assert exit_.exit_code == 0
    out, _, exit_ = await run(e2b, ref, "printf 12345", timeout_s=20, max_output=5)
    assert out == "12345"
    assert not exit_.truncated


async def test_leaving_a_command_early_kills_it(
    e2b: E2BSandboxes, fake: tuple[FakeE2B, str]
) -> None:
    ref = (await e2b.start(SPEC)).ref
    stream = e2b.exec(ref, SPEC, "echo go; sleep 32.5 & sleep 32.25", timeout_s=60)
    first = await anext(stream)
    assert first == ExecOutput(stream="stdout", data="go\n")
    assert fake[0].sandboxes[ref].procs
    await stream.aclose()  # type: ignore[attr-defined]
    for _ in range(100):
        if not fake[0].sandboxes[ref].procs:
            break
        await asyncio.sleep(0.05)
    assert not fake[0].sandboxes[ref].procs
    assert not running("sleep 32.5")
    assert not running("sleep 32.25")


async def test_files_write_read_and_list(e2b: E2BSandboxes, fake: tuple[FakeE2B, str]) -> None:
    ref = (await e2b.start(SPEC)).ref
    await e2b.write_file(ref, "src/app/main.py", b"print('hi')\n")
    await e2b.write_file(ref, "notes.txt", b"one")
    await e2b.write_file(ref, "notes.txt", b"two!")  # replaces
    assert await e2b.read_file(ref, "src/app/main.py") == b"print('hi')\n"
    assert await e2b.read_file(ref, "/workspace/notes.txt") == b"two!"
    uploads = [h["content-type"] for _, m, p, h in fake[0].log if (m, p) == ("POST", "/files")]
    assert uploads[-1] == "application/octet-stream"  # envd 0.5.7 takes raw bytes
    host = fake[0].sandboxes[ref].root / "workspace"
    assert (host / "src" / "app" / "main.py").read_bytes() == b"print('hi')\n"
    (host / "a_dir").mkdir()
    entries = await e2b.list_files(ref)
    assert [(e.path, e.is_dir, e.size) for e in entries] == [
        ("a_dir", True, 0),
        ("src", True, 0),
        ("notes.txt", False, 4),
    ]
    assert [e.path for e in await e2b.list_files(ref, "src/app")] == ["src/app/main.py"]
    assert len(await e2b.list_files(ref, ".", limit=2)) == 2
    out, _, _ = await run(e2b, ref, "cat notes.txt", timeout_s=20)
    assert out == "two!"  # the command sees what the file API wrote
    with pytest.raises(NotFound):
        await e2b.read_file(ref, "missing.txt")
    with pytest.raises(NotFound):
        await e2b.list_files(ref, "missing")
    with pytest.raises(InvalidInput, match="folder"):
        await e2b.read_file(ref, "src")
    with pytest.raises(InvalidInput, match="larger than 3 bytes"):
        await e2b.read_file(ref, "notes.txt", max_bytes=3)
    with pytest.raises(InvalidInput):
        await e2b.list_files(ref, "notes.txt")


@pytest.mark.parametrize(
    "path",
    [
        "../etc/passwd",
        "/etc/passwd",
        "src/../../root",
        "/workspace/../root",
        "//x",
        "/workspacex/a",
    ],
)
async def test_a_path_out_of_the_workspace_is_refused(
    e2b: E2BSandboxes, fake: tuple[FakeE2B, str], path: str
) -> None:
    ref = (await e2b.start(SPEC)).ref
    before = len(fake[0].log)
    with pytest.raises(InvalidInput, match="leaves the workspace"):
        await e2b.read_file(ref, path)
    with pytest.raises(InvalidInput, match="leaves the workspace"):
        await e2b.write_file(ref, path, b"x")
    with pytest.raises(InvalidInput, match="leaves the workspace"):
        await e2b.list_files(ref, path)
    assert len(fake[0].log) == before  # refused before anything was sent


async def test_a_persistent_sandbox_keeps_its_files_across_stop_and_resume(
    e2b: E2BSandboxes, fake: tuple[FakeE2B, str]
) -> None:
    ref = (await e2b.start(SPEC)).ref
    await e2b.write_file(ref, "keep.txt", b"kept")
    await e2b.stop(ref, SPEC)
    assert fake[0].sandboxes[ref].state == "paused"
    await e2b.stop(ref, SPEC)  # already paused: fine
    resumed = await e2b.start(SPEC, resume=ref)
    assert resumed.ref == ref
    assert not resumed.state_lost
    assert fake[0].sandboxes[ref].state == "running"
    assert await e2b.read_file(ref, "keep.txt") == b"kept"
    # a fresh provider (a restarted service) finds the sandbox by its ref alone
    again = provider(fake[1])
    try:
        assert await again.read_file(ref, "keep.txt") == b"kept"
    finally:
        await again.aclose()


async def test_stopping_an_ephemeral_sandbox_removes_it(
    e2b: E2BSandboxes, fake: tuple[FakeE2B, str]
) -> None:
    ref = (await e2b.start(EPHEMERAL)).ref
    await e2b.stop(ref, EPHEMERAL)
    assert ref not in fake[0].sandboxes


async def test_a_lost_sandbox_comes_back_new_with_state_lost(
    e2b: E2BSandboxes, fake: tuple[FakeE2B, str]
) -> None:
    ref = (await e2b.start(SPEC)).ref
    await e2b.write_file(ref, "keep.txt", b"kept")
    await e2b.stop(ref, SPEC)
    fake[0].lose(ref)
    started = await e2b.start(SPEC, resume=ref)
    assert started.state_lost
    assert started.ref != ref
    with pytest.raises(NotFound):
        await e2b.read_file(started.ref, "keep.txt")
    with pytest.raises(SandboxGone):
        await e2b.read_file(ref, "keep.txt")
    running = (await e2b.start(SPEC)).ref
    fake[0].lose(running)  # lost while running: the held connection is stale
    with pytest.raises(SandboxGone):
        await run(e2b, running, "true", timeout_s=5)
    with pytest.raises(SandboxGone):
        await e2b.stop(running, SPEC)


async def test_destroy_is_idempotent(e2b: E2BSandboxes, fake: tuple[FakeE2B, str]) -> None:
    ref = (await e2b.start(SPEC)).ref
    await e2b.destroy(ref)
    assert ref not in fake[0].sandboxes
    await e2b.destroy(ref)
    with pytest.raises(SandboxGone):
        await e2b.list_files(ref)


async def test_a_rotated_sandbox_token_is_fetched_again(
    e2b: E2BSandboxes, fake: tuple[FakeE2B, str]
) -> None:
    ref = (await e2b.start(SPEC)).ref
    fake[0].rotate_token(ref)
    await e2b.write_file(ref, "x.txt", b"x")  # 401, reconnect, retry
    assert await e2b.read_file(ref, "x.txt") == b"x"
    out, _, _ = await run(e2b, ref, "cat x.txt", timeout_s=20)
    assert out == "x"


async def test_disk_bytes(e2b: E2BSandboxes) -> None:
    ref = (await e2b.start(SPEC)).ref
    await e2b.write_file(ref, "big.bin", b"\0" * 50_000)
    assert await e2b.disk_bytes(ref) >= 50_000
    await e2b.destroy(ref)
    assert await e2b.disk_bytes(ref) == 0


async def test_without_an_api_key_every_call_names_the_variable(
    fake: tuple[FakeE2B, str],
) -> None:
    e2b = provider(fake[1], AGENTSVC_E2B_API_KEY="")
    before = len(fake[0].log)
    try:
        calls = [
            e2b.start(SPEC),
            e2b.start(SPEC, resume="x"),
            e2b.stop("x", SPEC),
            e2b.destroy("x"),
            e2b.read_file("x", "a"),
            e2b.write_file("x", "a", b""),
            e2b.list_files("x"),
        ]
        for call in calls:
            with pytest.raises(SandboxUnavailable, match="AGENTSVC_E2B_API_KEY"):
                await call
        with pytest.raises(SandboxUnavailable, match="AGENTSVC_E2B_API_KEY"):
            await run(e2b, "x", "true", timeout_s=1)
    finally:
        await e2b.aclose()
    assert len(fake[0].log) == before  # nothing was sent


async def test_a_wrong_api_key_is_a_clear_refusal_without_the_key(
    fake: tuple[FakeE2B, str],
) -> None:
    wrong = "e2b_wrong_key_0123456789"
    e2b = provider(fake[1], AGENTSVC_E2B_API_KEY=wrong)
    try:
        with pytest.raises(SandboxUnavailable) as caught:
            await e2b.start(SPEC)
    finally:
        await e2b.aclose()
    assert "refused the API key" in caught.value.detail
    assert "AGENTSVC_E2B_API_KEY" in caught.value.detail
    assert wrong not in caught.value.detail
    assert wrong not in repr(e2b)


async def test_other_refusals_read_clearly(fake: tuple[FakeE2B, str]) -> None:
    e2b = provider(fake[1], AGENTSVC_E2B_TEMPLATE="no-such-template")
    try:
        with pytest.raises(SandboxUnavailable, match="no template 'no-such-template'"):
            await e2b.start(SPEC)
    finally:
        await e2b.aclose()
    for env, words in [
        ({"AGENTSVC_E2B_API_URL": "http://127.0.0.1:1"}, "E2B cannot be reached"),
        ({"AGENTSVC_E2B_SANDBOX_URL": "http://{nope}"}, "AGENTSVC_E2B_SANDBOX_URL"),
        ({"AGENTSVC_E2B_TIMEOUT_S": "soon"}, "AGENTSVC_E2B_TIMEOUT_S"),
    ]:
        e2b = provider(fake[1], **env)
        try:
            with pytest.raises(SandboxUnavailable, match=words) as caught:
                await e2b.start(SPEC)
            assert API_KEY not in caught.value.detail
        finally:
            await e2b.aclose()
    guarded = E2BSandboxes.from_env(
        {"AGENTSVC_E2B_API_KEY": API_KEY, "AGENTSVC_E2B_API_URL": fake[1]},
        OutboundGuard(allow_private_network=False),
    )
    try:
        with pytest.raises(SandboxUnavailable, match="AGENTSVC_E2B_API_URL is refused"):
            await guarded.start(SPEC)
    finally:
        await guarded.aclose()


async def test_each_secret_goes_only_where_it_belongs(
    e2b: E2BSandboxes, fake: tuple[FakeE2B, str]
) -> None:
    ref = (await e2b.start(SPEC)).ref
    await run(e2b, ref, "true", timeout_s=20)
    await e2b.write_file(ref, "a.txt", b"a")
    await e2b.read_file(ref, "a.txt")
    token = fake[0].sandboxes[ref].token
    assert token
    seen = [(kind, headers) for kind, _, _, headers in fake[0].log]
    assert {kind for kind, _ in seen} == {"api", "envd"}
    for kind, headers in seen:
        values = " ".join(headers.values())
        if kind == "envd":
            assert API_KEY not in values
        else:
            assert token not in values
    assert token not in repr(e2b)
    assert API_KEY not in repr(e2b)


def test_the_fake_refuses_what_e2b_refuses(fake: tuple[FakeE2B, str], tmp_path: Path) -> None:
    """The fake is as strict as E2B where the adapter could get it wrong."""
    url = fake[1]
    with httpx.Client(base_url=url) as http:
        assert http.post("/sandboxes", json={"templateID": "base"}).status_code == 401
        key = {"X-API-Key": API_KEY}
        assert http.post("/sandboxes", content=b"{", headers=key).status_code == 400
        assert http.post("/sandboxes", json={"timeout": 5}, headers=key).status_code == 400
        bad = {"templateID": "base", "network": {"denyOut": ["example.com"]}}
        assert http.post("/sandboxes", json=bad, headers=key).status_code == 400
        assert (
            http.post("/sandboxes/nope/connect", json={"timeout": 5}, headers=key).status_code
            == 404
        )
        made = http.post("/sandboxes", json={"templateID": "base", "secure": True}, headers=key)
        assert made.status_code == 201
        sandbox = made.json()
        assert (
            http.post(
                f"/sandboxes/{sandbox['sandboxID']}/connect", json={}, headers=key
            ).status_code
            == 400
        )
        envd = {"E2b-Sandbox-Id": sandbox["sandboxID"], "E2b-Sandbox-Port": "49983"}
        listing = {"path": "/root", "depth": 1}
        rpc = "/filesystem.Filesystem/ListDir"
        assert http.post(rpc, json=listing, headers=envd).status_code == 401
        token = {"X-Access-Token": sandbox["envdAccessToken"]}
        assert http.post(rpc, json=listing, headers=envd | token).status_code == 200
        wrong_field = http.post(rpc, json={"path": "/", "deep": 1}, headers=envd | token)
        assert wrong_field.status_code == 400
        assert wrong_field.json()["code"] == "invalid_argument"
        other = {"E2b-Sandbox-Id": "nope", "E2b-Sandbox-Port": "49983"}
        assert http.post(rpc, json=listing, headers=other | token).status_code == 502
        files = http.get("/files", params={"path": "/root/x"}, headers=envd)
        assert files.status_code == 401


async def test_an_older_envd_gets_its_files_as_a_multipart_form(tmp_path: Path) -> None:
    old = FakeE2B(tmp_path, envd_version="0.4.2")
    with serve(old) as url:
        e2b = provider(url)
        try:
            ref = (await e2b.start(SPEC)).ref
            await e2b.write_file(ref, "dir/old.txt", b"\x00bytes\xff")
            assert await e2b.read_file(ref, "dir/old.txt") == b"\x00bytes\xff"
            kinds = [h.get("content-type", "") for _, m, p, h in old.log if p == "/files"]
            assert any(k.startswith("multipart/form-data") for k in kinds)
        finally:
            await e2b.aclose()


async def test_a_command_envd_refuses_is_a_clear_error(
    e2b: E2BSandboxes, fake: tuple[FakeE2B, str]
) -> None:
    ref = (await e2b.start(SPEC)).ref
    (fake[0].sandboxes[ref].root / "workspace").rmdir()  # envd cannot start in it
    with pytest.raises(SandboxUnavailable, match=r"could not run the command \(invalid_argument\)"):
        await run(e2b, ref, "true", timeout_s=5)


@pytest.mark.parametrize("ref", ["", "evil.example.com/x", "../sandboxes", "a b", "x?y=1"])
async def test_a_ref_that_is_no_sandbox_id_is_gone_without_a_call(
    e2b: E2BSandboxes, fake: tuple[FakeE2B, str], ref: str
) -> None:
    before = len(fake[0].log)
    for call in (e2b.read_file(ref, "a"), e2b.destroy(ref), e2b.stop(ref, SPEC)):
        with pytest.raises(SandboxGone):
            await call
    with pytest.raises(SandboxGone):
        await run(e2b, ref, "true", timeout_s=1)
    assert (await e2b.start(SPEC, resume=ref)).state_lost
    assert len(fake[0].log) == before + 2  # only the new sandbox: create, make the workspace


@pytest.mark.parametrize(
    ("status", "words"),
    [(429, "rate limiting"), (500, "E2B answered 500: Internal error"), (503, "answered 503")],
)
async def test_e2b_failures_read_clearly(
    e2b: E2BSandboxes, fake: tuple[FakeE2B, str], status: int, words: str
) -> None:
    fake[0].fail_next("api", status)
    with pytest.raises(SandboxUnavailable, match=words) as caught:
        await e2b.start(SPEC)
    assert API_KEY not in caught.value.detail
    assert (await e2b.start(SPEC)).ref  # the next call is served


async def test_a_sandbox_that_keeps_refusing_its_token_is_unavailable(
    e2b: E2BSandboxes, fake: tuple[FakeE2B, str]
) -> None:
    ref = (await e2b.start(SPEC)).ref
    token = fake[0].sandboxes[ref].token
    assert token
    fake[0].fail_next("envd", 401, 401)  # again after a fresh connection
    with pytest.raises(SandboxUnavailable, match="refused the sandbox's access token") as caught:
        await e2b.read_file(ref, "a.txt")
    assert token not in caught.value.detail
    fake[0].fail_next("envd", 401)  # once: the fresh connection is served
    await e2b.write_file(ref, "a.txt", b"a")
    fake[0].fail_next("envd", 507)
    with pytest.raises(SandboxUnavailable, match="disk is full"):
        await e2b.write_file(ref, "b.txt", b"b")


@pytest.mark.parametrize(
    ("path", "full"), [(".", ""), ("", ""), ("/workspace", ""), ("a/./b/../c", "a/c")]
)
async def test_paths_inside_the_workspace_are_taken(
    e2b: E2BSandboxes, path: str, full: str
) -> None:
    ref = (await e2b.start(SPEC)).ref
    if full:
        await e2b.write_file(ref, path, b"x")
        assert await e2b.read_file(ref, full) == b"x"
    else:
        assert await e2b.list_files(ref, path) == []
        with pytest.raises(InvalidInput):
            await e2b.write_file(ref, path, b"x")  # the workspace itself is no file


async def test_the_time_to_live_is_sent_and_bounded(fake: tuple[FakeE2B, str]) -> None:
    e2b = provider(fake[1], AGENTSVC_E2B_TIMEOUT_S="60")
    try:
        ref = (await e2b.start(SPEC)).ref
        assert fake[0].sandboxes[ref].body["timeout"] == 60
        await e2b.stop(ref, SPEC)
        await e2b.start(SPEC, resume=ref)
        connect = [h for _, m, p, h in fake[0].log if p == f"/sandboxes/{ref}/connect"]
        assert connect  # the resume went through /connect
    finally:
        await e2b.aclose()
    e2b = provider(fake[1], AGENTSVC_E2B_TIMEOUT_S="59")
    try:
        with pytest.raises(SandboxUnavailable, match="60 or more"):
            await e2b.start(SPEC)
    finally:
        await e2b.aclose()
