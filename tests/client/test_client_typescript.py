"""The TypeScript client (clients/typescript): its checked-in generated code is what
the running service's document generates; its package builds (``tsc``: ESM with
``.d.ts``) and its types check (``tsc --noEmit`` without Node.js's types, with a
user's typed code against the built declarations); and Node's own test runner runs
its tests (``clients/typescript/test/*.test.mjs``: a streamed reply, a connection cut
through a proxy, a client tool, errors, webhooks) against the real service.

``make test`` installs its node_modules (``npm ci``, when package-lock.json is newer
than the stamp ``node_modules/.installed``)."""

from __future__ import annotations

import http.server
import importlib.util
import os
import re
import shutil
import subprocess
import threading
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


class _Files(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, directory=str(TS), **kwargs)

    def log_message(self, format: str, *args: Any) -> None:
        pass


# In the page: the client from dist/, a reply streamed, re-attached after its second
# event, and a 404 with its error body and request id (both exposed by CORS)
IN_THE_PAGE = """async ([url, key]) => {
  const { AgentsvcClient, NotFound } = await import("/dist/index.js");
  const c = new AgentsvcClient({ baseUrl: url, apiKey: key });
  const agent = await c.agents.create({ name: "Browser" });
  const thread = await c.threads.create({ agentId: agent.id });
  const stream = c.sendMessage(thread.id, "Hello from Chromium");
  const events = [];
  let text = "";
  for await (const e of stream) {
    events.push([e.type, e.id]);
    if (e.type === "token") text += e.data.delta;
  }
  const again = [];
  for await (const e of c.threads.attach(thread.id, { runId: stream.runId, lastEventId: 2 })) {
    again.push(e.id);
  }
  let error = null;
  try {
    await c.agents.get(crypto.randomUUID());
  } catch (exc) {
    error = { notFound: exc instanceof NotFound, status: exc.status, code: exc.error,
              requestId: exc.requestId };
  }
  const stored = (await c.threads.messages.list(thread.id)).messages.map((m) => m.content);
  return { events, again, text, stored, key: stream.idempotencyKey, error };
}"""


def test_the_client_works_in_a_browser(built: Path, memory_service: Service) -> None:
    """Chromium (Debian's, as the playground's test) loads dist/ from a page served on
    another loopback origin and calls the service through CORS."""
    from playwright import sync_api  # noqa: PLC0415 - only this test drives a browser

    from tests.e2e.console_support import chromium  # noqa: PLC0415

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    problems: list[str] = []
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
            try:
                page = browser.new_page()
                page.on("pageerror", lambda e: problems.append(str(e)))
                page.goto(f"http://127.0.0.1:{server.server_address[1]}/package.json")
                got = page.evaluate(IN_THE_PAGE, [memory_service.url, KEY])
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()
    assert not problems, problems
    ids = [event_id for _, event_id in got["events"]]
    assert ids == list(range(1, len(ids) + 1))
    assert got["events"][0][0] == "meta"
    assert got["events"][-1][0] == "done"
    assert got["again"] == ids[2:]
    assert "Hello from Chromium" in got["text"]
    assert got["stored"] == ["Hello from Chromium", got["text"]]
    assert re.fullmatch(
        r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", got["key"]
    )
    assert got["error"]["notFound"] is True
    assert (got["error"]["status"], got["error"]["code"]) == (404, "NOT_FOUND")
    assert got["error"]["requestId"]
