"""The container image and compose file (docs/deploy.md, "Containers").

Where a Docker daemon answers, the image is built and started against this
machine's PostgreSQL and holds a conversation. Where none answers, that test is
skipped and says why; the others check what can be checked without Docker: the
Dockerfile's user, command, environment and health check (the last two by running
the real console script with the image's environment and the real health check
command against it), the compose file, the build context, and the build stage's
wheel.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
import uuid
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from agentsvc_web.settings import Settings
from tests.e2e.service import AGENTSVC, Service, free_port, running
from tests.sse import parse, tokens

pytestmark = [pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = ROOT / "compose.yaml"
DOCKERIGNORE = ROOT / ".dockerignore"
# 32 bytes of base64 for the service's encryption keys; made here, never a real one
TEST_KEYS = "k1:" + "A" * 43 + "="
SECRET_WORDS = ("KEY", "SECRET", "PASSWORD", "TOKEN")


# --- reading the files ------------------------------------------------------


class Instruction:
    """One Dockerfile instruction: its keyword, its text, and its stage's name."""

    def __init__(self, keyword: str, text: str, stage: str) -> None:
        self.keyword = keyword
        self.text = text
        self.stage = stage

    def exec_form(self) -> list[str]:
        """The JSON array of ``CMD ["a", "b"]`` (after any ``--option=``s)."""
        body = self.text
        while body.startswith("--"):
            body = body.split(None, 1)[1]
        if body.startswith("CMD "):
            body = body[4:]
        value = yaml.safe_load(body)  # a JSON array is YAML too
        assert isinstance(value, list), f"{self.keyword} is not in exec form: {self.text}"
        return [str(v) for v in value]


def dockerfile() -> list[Instruction]:
    """The instructions, continuation lines joined and comments dropped."""
    logical: list[str] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, "the Dockerfile ends with a continuation"
    out: list[Instruction] = []
    stage = ""
    for line in logical:
        keyword, _, text = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            parts = text.split()
            stage = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else ""
        out.append(Instruction(keyword, text.strip(), stage))
    return out


def runtime_stage() -> list[Instruction]:
    """The instructions of the last stage: the image that runs."""
    items = dockerfile()
    last = max(i for i, ins in enumerate(items) if ins.keyword == "FROM")
    return items[last:]


def image_env() -> dict[str, str]:
    """The runtime stage's ``ENV`` (``NAME=value`` pairs)."""
    env: dict[str, str] = {}
    for ins in runtime_stage():
        if ins.keyword == "ENV":
            for pair in shlex.split(ins.text):
                name, sep, value = pair.partition("=")
                assert sep, f"ENV {ins.text!r}: write NAME=value"
                env[name] = value
    return env


def one(keyword: str) -> Instruction:
    found = [ins for ins in runtime_stage() if ins.keyword == keyword]
    assert found, f"the runtime stage has no {keyword}"
    return found[-1]  # the last one is the one that counts


def console_script() -> str:
    """The name pyproject.toml gives the service's console script."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    names = [name for name, target in scripts.items() if target == "agentsvc_web.cli:main"]
    assert len(names) == 1, scripts
    return str(names[0])


def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict)
    return data


def compose_environment(service: str) -> dict[str, str]:
    env = compose()["services"][service].get("environment", {})
    if isinstance(env, list):  # the NAME=value list form
        env = dict(item.partition("=")[::2] for item in env)
    return {str(k): str(v) for k, v in env.items()}


class _Recording(dict[str, str]):
    """An environment that remembers every name read from it."""

    def __init__(self) -> None:
        super().__init__()
        self.read: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> str:
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return super().__contains__(key)


def setting_names() -> set[str]:
    """The ``AGENTSVC_*`` names ``Settings.from_env`` reads."""
    env = _Recording()
    Settings.from_env(env)
    return {name for name in env.read if name.startswith("AGENTSVC_")}


# --- the Dockerfile ----------------------------------------------------------


def test_the_image_runs_as_an_unprivileged_user() -> None:
    user = one("USER").text.split(":")[0]
    assert user not in ("root", "0", ""), f"USER {user}"
    # the user is made in the image, with that id
    made = " ".join(ins.text for ins in runtime_stage() if ins.keyword == "RUN")
    assert re.search(rf"useradd\b[^&]*--uid {re.escape(user)}\b", made), made
    # the group too, never root's
    group = one("USER").text.partition(":")[2]
    assert group not in ("root", "0"), f"USER {one('USER').text}"


def test_the_image_runs_the_projects_console_script() -> None:
    entrypoint = one("ENTRYPOINT").exec_form()
    command = one("CMD").exec_form()
    assert entrypoint == [console_script()]
    assert command == ["serve", "--host", "0.0.0.0"]
    exposed = one("EXPOSE").text.split()
    # the port it listens on: AGENTSVC_PORT's default, as the image does not set it
    assert "AGENTSVC_PORT" not in image_env()
    assert exposed == [str(Settings().port)]


def test_the_build_stage_makes_a_wheel_the_runtime_stage_installs() -> None:
    items = dockerfile()
    stages = [ins for ins in items if ins.keyword == "FROM"]
    assert len(stages) == 2, [s.text for s in stages]
    build = [ins for ins in items if ins.stage == stages[0].stage and ins.keyword == "RUN"]
    assert any("pip wheel" in ins.text for ins in build)
    install = [ins.text for ins in runtime_stage() if ins.keyword == "RUN"]
    assert any(f"from={stages[0].stage}" in t and "--no-index" in t for t in install), install
    # a slim Python 3.11, in both stages
    assert all("python:3.11-slim" in _base(ins) for ins in stages), [s.text for s in stages]
    env = image_env()
    assert env["PYTHONUNBUFFERED"] == "1"
    assert env["PIP_NO_CACHE_DIR"] == "1"


def _base(stage: Instruction) -> str:
    image = stage.text.split()[0]
    args = {
        ins.text.partition("=")[0]: ins.text.partition("=")[2]
        for ins in dockerfile()
        if ins.keyword == "ARG" and "=" in ins.text
    }
    return re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), ""), image)


def test_every_agentsvc_variable_is_a_setting() -> None:
    known = setting_names()
    assert "AGENTSVC_DATABASE_URL" in known  # the recording works
    assert "AGENTSVC_LOCAL_DEFAULTS" in known
    used = set(image_env())
    compose_text = COMPOSE.read_text()
    for service in compose()["services"]:
        used |= set(compose_environment(service))
    used |= set(re.findall(r"AGENTSVC_\w+", compose_text))  # comments too
    used |= set(re.findall(r"AGENTSVC_\w+", DOCKERFILE.read_text()))
    ours = {name for name in used if name.startswith("AGENTSVC_")}
    assert len(ours) >= 5, ours
    assert ours <= known, f"not settings: {sorted(ours - known)}"


def test_the_image_bakes_in_no_secret() -> None:
    for ins in dockerfile():
        if ins.keyword in ("ENV", "ARG", "LABEL"):
            for pair in shlex.split(ins.text):
                name = pair.partition("=")[0].upper()
                assert not any(w in name for w in SECRET_WORDS), f"{ins.keyword} {ins.text}"
    # nothing from the repository but the package's sources goes in
    copied = [ins.text.split() for ins in dockerfile() if ins.keyword in ("COPY", "ADD")]
    sources = {s for parts in copied if not parts[0].startswith("--from") for s in parts[:-1]}
    assert sources == {"pyproject.toml", "README.md", "src"}, sources


# --- the image's environment and command, run here ---------------------------


def _image_env_here(tmp: Path, **extra: str) -> dict[str, str]:
    """The image's ``ENV`` with its data folder moved into ``tmp``, and ``extra``."""
    env = image_env()
    env["AGENTSVC_DATA_DIR"] = str(tmp / "data")
    env.update(extra)
    return env


def _image_process_env(tmp: Path, **extra: str) -> dict[str, str]:
    """This machine's environment (no ``AGENTSVC_*`` from outside) with the image's
    over it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSVC_")}
    env.update(_image_env_here(tmp, **extra))
    return env


def _loopback(command: list[str]) -> list[str]:
    """The image's command with its listen address made 127.0.0.1: tests listen
    on loopback only (the container's own loopback is not this machine's)."""
    out = list(command)
    out[out.index("--host") + 1] = "127.0.0.1"
    return out


def _run_image_command(env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    script = str(Path(AGENTSVC).parent / one("ENTRYPOINT").exec_form()[0])
    return subprocess.run(
        [script, *_loopback(one("CMD").exec_form())],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_without_a_database_url_the_image_refuses_to_start(tmp_path: Path) -> None:
    env = _image_process_env(tmp_path, AGENTSVC_PORT=str(free_port()))
    done = _run_image_command(env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "configuration error" in done.stderr
    assert "AGENTSVC_DATABASE_URL and AGENTSVC_ENCRYPTION_KEYS must be set" in done.stderr
    assert "AGENTSVC_STORAGE=memory" in done.stderr  # the way to just try it
    # no embedded server was started, no key generated
    assert not (tmp_path / "data" / "pgdata").exists()
    assert not (tmp_path / "data" / "encryption-keys").exists()


def test_without_encryption_keys_the_image_refuses_to_start(tmp_path: Path) -> None:
    url = "postgresql://agentsvc:pw-never-used@127.0.0.1:1/agentsvc"
    env = _image_process_env(tmp_path, AGENTSVC_PORT=str(free_port()), AGENTSVC_DATABASE_URL=url)
    done = _run_image_command(env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "AGENTSVC_ENCRYPTION_KEYS must be set" in done.stderr
    assert "AGENTSVC_DATABASE_URL and" not in done.stderr
    assert "pw-never-used" not in done.stdout + done.stderr
    assert not (tmp_path / "data" / "encryption-keys").exists()


def _healthcheck() -> list[str]:
    command = one("HEALTHCHECK").exec_form()
    assert command[0] == "python", command  # the image's Python, no curl
    return [sys.executable, *command[1:]]


def _healthy(port: int) -> bool:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSVC_")}
    env["AGENTSVC_PORT"] = str(port)
    done = subprocess.run(_healthcheck(), env=env, capture_output=True, timeout=30, check=False)
    return done.returncode == 0


@pytest.fixture
def image_service(pg_url: str, tmp_path: Path) -> Iterator[tuple[Service, str]]:
    """The service as the image runs it: its environment, its command (on
    loopback), with the variables compose.yaml passes."""
    key = f"ask_container_{uuid.uuid4().hex}"
    env = _image_env_here(  # Service adds this machine's environment, no AGENTSVC_*
        tmp_path,
        AGENTSVC_DATABASE_URL=pg_url,
        AGENTSVC_ENCRYPTION_KEYS=TEST_KEYS,
        AGENTSVC_BOOTSTRAP_API_KEY=key,
        AGENTSVC_BOOTSTRAP_ORG=f"container-{uuid.uuid4().hex[:8]}",
    )
    args = tuple(_loopback(one("CMD").exec_form())[1:])
    assert one("CMD").exec_form()[0] == "serve"
    with running(env, args=args, log=tmp_path / "service.log") as svc:
        yield svc, key


@pytest.mark.postgres
def test_run_as_the_image_runs_it_the_service_converses_and_passes_its_health_check(
    image_service: tuple[Service, str],
) -> None:
    svc, key = image_service
    assert _healthy(svc.port)
    assert not _healthy(free_port())  # nobody listens there
    # JSON logs, as the image asks
    assert any(_is_json_log(line) for line in svc.output().splitlines()), svc.output()
    _converse(svc.url, key)
    # SIGTERM, as `docker stop` sends: a clean exit
    assert svc.stop() == 0, svc.output()
    assert not _healthy(svc.port)


def _is_json_log(line: str) -> bool:
    try:
        entry = json.loads(line)
    except ValueError:
        return False
    return isinstance(entry, dict) and "level" in entry and "message" in entry


def _converse(base: str, key: str) -> None:
    """Create an agent and stream a reply of the ``local`` model."""
    with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=30) as c:
        agent = c.post(f"{base}/api/agents", json={"name": "Boxed", "defaultModel": "local"})
        assert agent.status_code == 201, agent.text
        thread = c.post(f"{base}/api/threads", json={"agentId": agent.json()["id"]})
        assert thread.status_code == 200, thread.text
        reply = c.post(
            f"{base}/api/threads/{thread.json()['id']}/messages", json={"content": "hello box"}
        )
        assert reply.status_code == 200, reply.text
        events = parse(reply.text)
        assert events[0].event == "meta", events[:2]
        assert events[-1].event == "done", events[-2:]
        assert tokens(events) == events[-1].data["content"]
        assert events[-1].data["content"]


# --- the compose file and the build context ----------------------------------


def test_compose_runs_the_service_on_a_healthy_postgres_with_pgvector() -> None:
    data = compose()
    db = data["services"]["db"]
    svc = data["services"]["agentsvc"]
    assert "pgvector" in db["image"]
    assert db["healthcheck"]["test"]
    assert svc["depends_on"]["db"]["condition"] == "service_healthy"
    assert svc["build"] == "."
    volumes = data["volumes"]
    assert any(str(v).split(":")[0] in volumes for v in db["volumes"]), db["volumes"]
    url = compose_environment("agentsvc")["AGENTSVC_DATABASE_URL"]
    assert re.fullmatch(
        r"postgresql://agentsvc:\$\{POSTGRES_PASSWORD:\?[^}]*\}@db:5432/agentsvc", url
    )


def test_compose_names_no_secret_value() -> None:
    checked = 0
    for service in compose()["services"]:
        for name, raw in compose_environment(service).items():
            value = raw
            secret = any(w in name.upper() for w in SECRET_WORDS)
            if name.endswith("_URL") and "@" in raw:  # a password in a URL
                value = raw.split("://", 1)[1].split("@", 1)[0].partition(":")[2]
                secret = True
            if not secret:
                continue
            checked += 1
            # only variables from .env: required (${X:?why}) or empty (${X:-})
            assert re.fullmatch(r"\$\{\w+(:\?[^}]*|:-)?\}", value), f"{service}: {name}={value}"
    assert checked >= 5
    # the required ones say so: no default a deployment could run with
    env = compose_environment("agentsvc")
    assert env["AGENTSVC_ENCRYPTION_KEYS"].startswith("${AGENTSVC_ENCRYPTION_KEYS:?")
    assert compose_environment("db")["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD:?")


def test_compose_leaves_the_bootstrap_key_optional() -> None:
    """A start with a revoked bootstrap key fails, so .env must be able to drop it
    once real keys exist (docs/deploy.md): compose then passes it empty, and an
    empty value is no bootstrap key."""
    env = compose_environment("agentsvc")
    assert env["AGENTSVC_BOOTSTRAP_API_KEY"] == "${AGENTSVC_BOOTSTRAP_API_KEY:-}"
    assert Settings.from_env({"AGENTSVC_BOOTSTRAP_API_KEY": ""}).bootstrap_api_key is None
    deploy = (ROOT / "docs" / "deploy.md").read_text()
    assert "Remove the bootstrap key once real keys exist" in deploy


def _worker_examples() -> list[dict[str, Any]]:
    """The ``worker`` service of docs/deploy.md's example and of compose.yaml's
    comment (uncommented)."""
    deploy = (ROOT / "docs" / "deploy.md").read_text()
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", deploy, re.DOTALL) if "worker" in b]
    commented = re.search(r"^  # worker:\n(?:  #.*\n)+", COMPOSE.read_text(), re.MULTILINE)
    assert blocks, "a worker service in docs/deploy.md"
    assert commented, "a worker service in compose.yaml's comments"
    uncommented = re.sub(r"^  # ?", "  ", commented.group(0), flags=re.MULTILINE)
    return [yaml.safe_load(text)["worker"] for text in (blocks[0], uncommented)]


def test_a_worker_container_has_no_http_health_check() -> None:
    """``agentsvc worker`` serves no HTTP: with the image's check (/healthz) it
    would be unhealthy forever, so the documented worker service disables it."""
    assert "/healthz" in one("HEALTHCHECK").text
    docs, commented = _worker_examples()
    assert docs == commented
    assert docs["command"] == ["worker"]
    assert docs["healthcheck"] == {"disable": True}
    served = compose()["services"]["agentsvc"]
    assert docs["image"] == served["image"]
    env = {k: str(v) for k, v in docs["environment"].items()}
    for name in ("AGENTSVC_DATABASE_URL", "AGENTSVC_ENCRYPTION_KEYS"):  # the same database
        assert env[name] == compose_environment("agentsvc")[name], name
    assert "AGENTSVC_BOOTSTRAP_API_KEY" not in env


def _dockerignore() -> list[str]:
    return [
        line.strip()
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]


def _ignored(path: str, patterns: list[str]) -> bool:
    """Whether Docker leaves ``path`` (relative to the context) out: a pattern is
    anchored at the root, ``**`` spans any number of folders, ``*`` and ``?`` stay
    within one, and a matched folder takes everything under it."""

    def regex(pattern: str) -> str:
        out, i = "", 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                out, i = out + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                out, i = out + ".*", i + 2
            elif pattern[i] == "*":
                out, i = out + "[^/]*", i + 1
            elif pattern[i] == "?":
                out, i = out + "[^/]", i + 1
            elif pattern[i] == "[":
                end = pattern.index("]", i)
                out, i = out + pattern[i : end + 1], end + 1
            else:
                out, i = out + re.escape(pattern[i]), i + 1
        return out + "(?:/.*)?"

    return any(re.fullmatch(regex(p.strip("/")), path) for p in patterns)


def test_dockerignore_keeps_local_state_out_of_the_build_context() -> None:
    patterns = _dockerignore()
    assert not [p for p in patterns if p.startswith("!")]  # no exception to reason about
    for needed in (".venv", ".git", ".agentsvc", ".env", "test-output", "**/.env", "**/.env.*"):
        assert needed in patterns, needed
    for path in (
        ".env",
        ".env.local",
        "src/agentsvc_web/.env",
        "clients/python/.env.production",
        ".venv/bin/python",
        "clients/python/.venv/bin/python",
        "src/agentsvc_core/__pycache__/errors.cpython-311.pyc",
        "clients/python/.pytest_cache/v/cache/nodeids",
        "clients/python/.mypy_cache/3.11/x.json",
        "clients/python/.ruff_cache/CACHEDIR.TAG",
        "tests/.hypothesis/examples/x",
        "bench/results/run.json",
        ".git/HEAD",
        "test-output/playground/01-page.png",
    ):
        assert _ignored(path, patterns), path
    for kept in ("pyproject.toml", "README.md", "src/agentsvc_web/app.py"):
        assert not _ignored(kept, patterns), kept
    # what the build copies is all there
    migrations = sorted((ROOT / "src").rglob("*.sql"))
    assert migrations
    for migration in migrations:
        assert not _ignored(migration.relative_to(ROOT).as_posix(), patterns), migration


def test_the_build_stage_wheel_holds_the_whole_package(tmp_path: Path) -> None:
    """What the build stage runs (``pip wheel`` on the files it copies), here: the
    wheel holds every file of ``src/`` (the migrations and package data too) and
    the console script. No index is asked: the build runs with this venv's
    setuptools (a dev dependency)."""
    context = tmp_path / "context"
    context.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, context / name)
    tracked = subprocess.run(
        ["git", "ls-files", "src"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert tracked
    for name in tracked:
        (context / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, context / name)
    out = tmp_path / "wheels"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "--quiet", "--wheel-dir", str(out), str(context)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = out.glob("agentsvc-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        scripts = z.read(entry_points).decode()
    missing = [n for n in tracked if n.removeprefix("src/") not in names]
    assert not missing, missing
    assert any(n.startswith("agentsvc_adapters/postgres/migrations/") for n in names)
    assert f"{console_script()} = agentsvc_web.cli:main" in scripts


# --- the image itself, where Docker runs -------------------------------------


def _docker_daemon() -> str | None:
    """None when a Docker daemon answers; else why not."""
    if shutil.which("docker") is None:
        return "no docker client on PATH"
    try:
        info = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return "`docker info` did not answer within 30 s"
    if info.returncode != 0:
        lines = (info.stderr or info.stdout).strip().splitlines()
        return f"`docker info` failed: {lines[-1] if lines else info.returncode}"
    return None


def _docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.mark.postgres
def test_the_image_serves_a_conversation(pg_url: str) -> None:
    why = _docker_daemon()
    if why is not None:
        pytest.skip(f"no Docker daemon: {why}")
    tag = f"agentsvc-test:{uuid.uuid4().hex[:12]}"
    built = _docker("build", "--tag", tag, str(ROOT), timeout=1800)
    assert built.returncode == 0, built.stderr[-4000:]
    name = f"agentsvc-test-{uuid.uuid4().hex[:12]}"
    port = free_port()
    key = f"ask_container_{uuid.uuid4().hex}"
    try:
        # host networking: the container reaches the PostgreSQL on 127.0.0.1 and
        # listens on a free port of this machine, on loopback only (the image's
        # command with its address changed, as elsewhere in this file)
        run = _docker(
            "run", "--detach", "--name", name, "--network", "host",
            "--env", f"AGENTSVC_DATABASE_URL={pg_url}",
            "--env", f"AGENTSVC_ENCRYPTION_KEYS={TEST_KEYS}",
            "--env", f"AGENTSVC_BOOTSTRAP_API_KEY={key}",
            "--env", f"AGENTSVC_BOOTSTRAP_ORG=container-{uuid.uuid4().hex[:8]}",
            "--env", f"AGENTSVC_PORT={port}",
            tag, *_loopback(one("CMD").exec_form()),
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        user = _docker("exec", name, "id", "-u").stdout.strip()
        assert user not in ("", "0"), user
        _wait_healthy(name)
        _converse(f"http://127.0.0.1:{port}", key)
        stopped = _docker("stop", "--time", "30", name, timeout=60)
        assert stopped.returncode == 0, stopped.stderr
        code = _docker("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip()
        assert code == "0", _docker("logs", name).stderr[-4000:]
    finally:
        _docker("rm", "--force", name)
        _docker("image", "rm", "--force", tag)


def _wait_healthy(name: str) -> None:
    """Until Docker's own health check (the image's HEALTHCHECK) says healthy."""
    for _ in range(120):
        status = _docker("inspect", "--format", "{{.State.Health.Status}}", name).stdout.strip()
        if status == "healthy":
            return
        if (
            status == "unhealthy"
            or _docker("inspect", "--format", "{{.State.Running}}", name).stdout.strip() != "true"
        ):
            break
        time.sleep(1)
    logs = _docker("logs", name)
    pytest.fail(f"the container did not become healthy: {(logs.stdout + logs.stderr)[-4000:]}")
