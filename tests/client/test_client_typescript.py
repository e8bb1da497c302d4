"""The TypeScript client (clients/typescript): its checked-in generated code is what
the running service's document generates; its package builds (``tsc``: ESM with
``.d.ts``) and its types check (``tsc --noEmit`` without Node.js's types, with a
user's typed code against the built declarations); and Node's own test runner runs
its tests (``clients/typescript/test/*.test.mjs``: a streamed reply, a connection cut
through a proxy, a client tool, errors, webhooks) against the real service.

``make test`` installs its node_modules (``npm ci``, when package-lock.json is newer
than the stamp ``node_modules/.installed``)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.client.conftest import KEY
from tests.e2e.service import Service

pytestmark = pytest.mark.e2e

TS = Path(__file__).resolve().parents[2] / "clients" / "typescript"
STAMP = TS / "node_modules" / ".installed"
TSC = TS / "node_modules" / ".bin" / "tsc"


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("agentsvc_ts_generate", TS / "generate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(*args: str | Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args],
        cwd=TS,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"{' '.join(map(str, args))}: exit {done.returncode}\n" + (
        done.stdout[-6000:] + done.stderr[-4000:]
    )
    return done.stdout


@pytest.fixture(scope="module")
def document(memory_service: Service) -> dict[str, Any]:
    r = httpx.get(f"{memory_service.url}/schema/openapi.json", timeout=30)
    r.raise_for_status()
    doc: dict[str, Any] = r.json()
    return doc


@pytest.fixture(scope="module")
def built() -> Path:
    """The package, built into dist/ (``tsc -p tsconfig.json``)."""
    lock = TS / "package-lock.json"
    if not STAMP.exists() or STAMP.stat().st_mtime < lock.stat().st_mtime:
        pytest.fail(
            "clients/typescript/node_modules is missing or older than package-lock.json:"
            " `make test` installs it (or run `make clients/typescript/node_modules/.installed`)"
        )
    shutil.rmtree(TS / "dist", ignore_errors=True)
    _run(TSC, "-p", "tsconfig.json")
    return TS / "dist"


@pytest.fixture(scope="module")
def type_check(built: Path) -> Iterator[subprocess.Popen[str]]:
    """``tsc --noEmit -p tsconfig.check.json``, started at once: it runs while the node
    tests do (each waits for a service or a slow reply most of the time)."""
    with subprocess.Popen(
        [str(TSC), "--noEmit", "-p", "tsconfig.check.json"],
        cwd=TS,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as proc:
        yield proc
        proc.kill()


def test_the_checked_in_code_is_what_the_document_generates(document: dict[str, Any]) -> None:
    for name, text in _generator().render(document).items():
        assert (TS / "src" / name).read_text() == text, (
            f"clients/typescript/src/{name} differs from what the service's document"
            " generates: run `make client` and commit the result"
        )


def test_a_new_operation_fails_the_generator(document: dict[str, Any]) -> None:
    changed = {**document, "paths": dict(document["paths"])}
    changed["paths"]["/api/brand-new"] = {
        "get": {"operationId": "brandNew", "responses": {"200": {"description": "ok"}}}
    }
    with pytest.raises(SystemExit, match="brandNew"):
        _generator().render(changed)


def test_the_node_tests_pass_against_the_service(
    built: Path, type_check: subprocess.Popen[str], memory_service: Service
) -> None:
    tests = sorted(p.name for p in (TS / "test").glob("*.test.mjs"))
    # every test of the files runs and passes: none skipped, none left out
    written = sum(
        len(re.findall(r"^test\(", (TS / "test" / t).read_text(), re.MULTILINE)) for t in tests
    )
    assert written >= 14
    env = {**os.environ, "AGENTSVC_URL": memory_service.url, "AGENTSVC_KEY": KEY}
    node = shutil.which("node")
    assert node, "node (Node.js 18+) is needed: `make test` installs it"
    # the files side by side where Node has the option (20.10+; 18 runs them in turn)
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True)
    major, minor = (int(x) for x in version.stdout.strip().lstrip("v").split(".")[:2])
    parallel = ["--test-concurrency=4"] if (major, minor) >= (20, 10) else []
    out = _run(node, "--test", *parallel, *(f"test/{t}" for t in tests), env=env)
    counts = dict(re.findall(r"^# (pass|fail|skipped|todo|cancelled) (\d+)$", out, re.MULTILINE))
    assert counts == {
        "pass": str(written),
        "fail": "0",
        "skipped": "0",
        "todo": "0",
        "cancelled": "0",
    }, out[-3000:]


def test_the_package_builds_and_its_types_check(
    built: Path, type_check: subprocess.Popen[str]
) -> None:
    for name in ("index", "client", "stream", "tools", "webhooks", "models", "resources"):
        assert (built / f"{name}.js").is_file(), name
        assert (built / f"{name}.d.ts").is_file(), name
    # ESM: import/export, no require
    assert re.search(r"^export \{", (built / "index.js").read_text(), re.MULTILINE)
    # the browser's part without Node's types; a user's typed code (test/types.ts,
    # whose @ts-expect-error lines must stay errors)
    out, _ = type_check.communicate(timeout=300)
    assert type_check.returncode == 0, f"tsc --noEmit -p tsconfig.check.json:\n{out[-6000:]}"
