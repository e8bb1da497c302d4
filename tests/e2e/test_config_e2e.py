"""Configuration that only a real process shows: the platform default model, and the
re-encryption of stored secrets with `agentsvc secrets rotate` (the CLI, a subprocess)
between two service runs with different AGENTSVC_ENCRYPTION_KEYS."""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from agentsvc_adapters.postgres import migrate
from tests.e2e.secret_scan import SCAN
from tests.e2e.service import AGENTSVC, Service, client
from tests.mcp_servers.server import HttpMcpServer
from tests.pg import fresh_database

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

KEY = f"ask_e2e_{uuid.uuid4().hex}"
MCP_TOKEN = "mcp-gate-token-only-the-sealed-header-knows"


def key_spec(kid: str) -> str:
    return f"{kid}:{base64.urlsafe_b64encode(os.urandom(32)).decode()}"


@pytest.fixture
def own_db(pg_admin_url: str) -> Iterator[str]:
    """A database of its own: `secrets rotate` re-seals every organization's rows, and
    other tests' rows on the session's database are sealed with other keys."""
    with fresh_database(pg_admin_url) as url:
        asyncio.run(migrate(url))
        yield url


def start(db: str, tmp_path: Path, name: str, **env: str) -> Service:
    svc = Service(
        {
            "AGENTSVC_DATABASE_URL": db,
            "AGENTSVC_BOOTSTRAP_API_KEY": KEY,
            "AGENTSVC_BOOTSTRAP_ORG": "config-e2e",
            "AGENTSVC_ALLOW_PRIVATE_NETWORK": "true",
            "AGENTSVC_DATA_DIR": str(tmp_path / "data"),
            **env,
        },
        log=tmp_path / f"{name}.log",
    )
    try:
        svc.wait_ready()
    except BaseException:
        svc.stop()
        raise
    return svc


def test_an_agent_created_without_a_model_gets_the_configured_default(
    own_db: str, tmp_path: Path
) -> None:
    svc = start(own_db, tmp_path, "svc", AGENTSVC_DEFAULT_MODEL="gpt-house-default")
    try:
        with client(svc, KEY, timeout=30) as c:
            made = c.post("/api/agents", json={"name": "No model given"})
            assert made.status_code == 201, made.text
            assert made.json()["default_model"] == "gpt-house-default"
            given = c.post("/api/agents", json={"name": "Mine", "defaultModel": "claude-x"})
            assert given.json()["default_model"] == "claude-x"
            assert c.get(f"/api/agents/{made.json()['id']}").json()["default_model"] == (
                "gpt-house-default"
            )
    finally:
        svc.stop()


def sealed_credentials(db: str, mcp_id: str) -> str:
    with psycopg.connect(db) as conn:
        sql = "SELECT credentials FROM mcp_servers WHERE id = %s"
        row = conn.execute(sql, (mcp_id,)).fetchone()
    assert row is not None
    return str(row[0])


def test_secrets_rotate_reseals_with_the_newest_key(own_db: str, tmp_path: Path) -> None:
    k1, k2 = key_spec("k1"), key_spec("k2")
    for spec in (k1, k2):
        SCAN.secret(spec.split(":", 1)[1], "an encryption key")
    SCAN.secret(MCP_TOKEN, "a credential sealed in the database")
    mcp = HttpMcpServer("streamable_http", token=MCP_TOKEN)
    mcp.start()
    try:
        svc = start(own_db, tmp_path, "k1", AGENTSVC_ENCRYPTION_KEYS=k1)
        try:
            with client(svc, KEY, timeout=30) as c:
                made = c.post(
                    "/api/mcps",
                    json={
                        "name": "Gated",
                        "transport": "streamable_http",
                        "url": mcp.url,
                        "credentials": {"headers": {"Authorization": f"Bearer {MCP_TOKEN}"}},
                    },
                )
                assert made.status_code == 201, made.text
                mcp_id = made.json()["id"]
                assert c.post(f"/api/mcps/{mcp_id}/test").json()["ok"] is True
                # a webhook tool's sealed headers, and sealed records: the agent's
                # delegation and the organization's signing secret
                tool = c.post(
                    "/api/tools",
                    json={
                        "name": "gated_tool",
                        "url": mcp.url,
                        "headers": {"Authorization": f"Bearer {MCP_TOKEN}"},
                    },
                ).json()
                agent = c.post("/api/agents", json={"name": "Rotated"}).json()
                put = c.put(f"/api/agents/{agent['id']}/delegated", json={"toolIds": [tool["id"]]})
                assert put.status_code == 200, put.text
                signing = c.get("/api/orgs/settings").json()["signing_secret"]
                # a runner's webhook step with sealed headers
                runner = c.post(
                    "/api/runners",
                    json={
                        "name": "rotated",
                        "steps": [
                            {
                                "id": "call",
                                "kind": "webhook",
                                "url": mcp.url,
                                "headers": {"Authorization": f"Bearer {MCP_TOKEN}"},
                            }
                        ],
                    },
                )
                assert runner.status_code == 201, runner.text
        finally:
            svc.stop()
        assert sealed_credentials(own_db, mcp_id).startswith("v1.k1.")

        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSVC_")}
        env |= {
            "AGENTSVC_DATABASE_URL": own_db,
            "AGENTSVC_ENCRYPTION_KEYS": k2,  # k1, which sealed them, left out by mistake
            "AGENTSVC_DATA_DIR": str(tmp_path / "data"),
        }

        def rotate() -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [AGENTSVC, "secrets", "rotate"],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )

        # one line naming the missing key and what to do; no traceback, no secret
        refused = rotate()
        assert refused.returncode != 0, refused.stdout
        said = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
        assert len(said) == 1, refused.stderr
        assert "'k1'" in said[0]
        assert "AGENTSVC_ENCRYPTION_KEYS" in said[0]
        assert "Traceback" not in refused.stderr
        assert "SecretUnreadable" not in refused.stderr
        for secret in (k1.split(":", 1)[1], k2.split(":", 1)[1], MCP_TOKEN):
            assert secret not in refused.stdout + refused.stderr
        assert sealed_credentials(own_db, mcp_id).startswith("v1.k1.")

        env["AGENTSVC_ENCRYPTION_KEYS"] = f"{k2},{k1}"
        done = rotate()
        assert done.returncode == 0, done.stderr
        # the MCP credentials, the tool's headers, the delegation, the signing secret
        # and the runner step's headers
        assert "re-encrypted 5 stored secret(s)" in done.stdout
        for secret in (k1.split(":", 1)[1], k2.split(":", 1)[1], MCP_TOKEN):
            assert secret not in done.stdout + done.stderr
        assert sealed_credentials(own_db, mcp_id).startswith("v1.k2.")

        svc = start(own_db, tmp_path, "k2", AGENTSVC_ENCRYPTION_KEYS=k2)  # k1 is gone
        try:
            with client(svc, KEY, timeout=30) as c:
                tested = c.post(f"/api/mcps/{mcp_id}/test").json()
                assert tested["ok"] is True, tested
                assert c.get(f"/api/mcps/{mcp_id}").json()["hasCredentials"] is True
                assert c.get("/api/orgs/settings").json()["signing_secret"] == signing
                delegated = c.get(f"/api/agents/{agent['id']}/delegated").json()
                assert delegated["tool_ids"] == [tool["id"]]
                executed = c.post("/api/tools/execute", json={"name": "gated_tool"}).json()
                assert executed["error"] is None or "HTTP" in executed["error"], executed
                # the step's headers open with k2: its call is made (the MCP server's
                # answer to it is not the point)
                rid = runner.json()["id"]
                run = c.post(f"/api/runners/{rid}/runs", json={"input": {}}).json()
                deadline = time.monotonic() + 30
                while (got := c.get(f"/api/runners/{rid}/runs/{run['id']}").json())[
                    "status"
                ] not in ("succeeded", "failed"):
                    assert time.monotonic() < deadline, got
                    time.sleep(0.1)
                step = got["steps"][0]
                assert step["status"] == "succeeded" or "the webhook answered" in (
                    step["error"] or ""
                ), step
        finally:
            svc.stop()
    finally:
        mcp.stop()


def test_a_forced_500_answers_internal_error_and_logs_the_trace(
    own_db: str, tmp_path: Path
) -> None:
    """A statement that cannot run (its table renamed away under the running service)
    is no client's fault: 500 INTERNAL_ERROR with the fixed detail, nothing of the
    exception in the answer, the whole trace in the service's log."""
    svc = start(own_db, tmp_path, "svc")
    try:
        with client(svc, KEY, timeout=30) as c:
            assert c.get("/api/agents").status_code == 200
            with psycopg.connect(own_db, autocommit=True) as conn:
                conn.execute("ALTER TABLE agents RENAME TO agents_moved_away")
            r = c.get("/api/agents")
            assert r.status_code == 500, r.text
            assert r.headers["content-type"].startswith("application/json")
            assert r.json() == {"error": "INTERNAL_ERROR", "detail": "internal error"}
            for internal in ("Traceback", "agents_moved_away", "relation", "psycopg", "File "):
                assert internal not in r.text
    finally:
        svc.stop()
    log = (tmp_path / "svc.log").read_text(errors="replace")
    assert "Traceback (most recent call last)" in log
    assert "UndefinedTable" in log
    assert 'relation "agents" does not exist' in log
