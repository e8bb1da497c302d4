"""PostgreSQL end to end: the embedded default keeps data across restarts, and
several processes serve one organization consistently from one database."""

from __future__ import annotations

import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from agentsvc_adapters.postgres.migrate import migrations
from tests.e2e.service import AGENTSVC, Service
from tests.pg import fresh_database

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]


def key() -> str:
    return f"ask_e2e_{uuid.uuid4().hex}"


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A data folder the embedded server's user can reach (as root it is not root)."""
    with tempfile.TemporaryDirectory(prefix="agentsvc-e2e-") as tmp:
        Path(tmp).chmod(0o711)
        yield Path(tmp) / "data"


def test_embedded_default_keeps_agents_across_restarts(tmp_path: Path, data_dir: Path) -> None:
    """No AGENTSVC_STORAGE, no AGENTSVC_DATABASE_URL: the embedded PostgreSQL in the data folder."""
    k = key()
    env = {"AGENTSVC_DATA_DIR": str(data_dir), "AGENTSVC_BOOTSTRAP_API_KEY": k}
    h = {"Authorization": f"Bearer {k}"}

    first = Service(env, log=tmp_path / "first.log")
    try:
        first.wait_ready(timeout=90)
        r = httpx.post(f"{first.url}/api/agents", json={"name": "Persistent"}, headers=h)
        assert r.status_code == 201, r.text
        agent = r.json()
    finally:
        assert first.stop() == 0, first.output()
    assert (data_dir / "pgdata").is_dir()
    # The service stopped the embedded server it started: nothing is left running.
    assert not (data_dir / "pgdata" / "cluster" / "postmaster.pid").exists()

    second = Service(env, log=tmp_path / "second.log")
    try:
        second.wait_ready(timeout=90)
        r = httpx.get(f"{second.url}/api/agents/{agent['id']}", headers=h)
        assert r.status_code == 200, second.output()
        assert r.json() == agent
    finally:
        second.stop()


def test_two_processes_share_one_database(pg_url: str, tmp_path: Path) -> None:
    k = key()
    env = {
        "AGENTSVC_DATABASE_URL": pg_url,
        "AGENTSVC_BOOTSTRAP_API_KEY": k,
        "AGENTSVC_BOOTSTRAP_ORG": f"two-{uuid.uuid4().hex[:8]}",
        # valid keys stay cached for an hour: only the revocation notice can end them
        "AGENTSVC_API_KEY_CACHE_S": "3600",
    }
    a = Service(env, log=tmp_path / "a.log")
    b = Service(env, log=tmp_path / "b.log")
    h = {"Authorization": f"Bearer {k}"}
    try:
        a.wait_ready()
        b.wait_ready()
        with httpx.Client(headers=h, timeout=10) as c:
            agent = c.post(f"{a.url}/api/agents", json={"name": "Shared"}).json()
            assert c.get(f"{b.url}/api/agents/{agent['id']}").json() == agent

            # Concurrent PATCHes through both processes all succeed, and afterwards
            # both processes read the same agent.
            def patch(i: int) -> int:
                field = "description" if i % 2 else "stablePreamble"
                url = f"{(a.url, b.url)[i % 2]}/api/agents/{agent['id']}"
                return c.patch(url, json={field: f"v{i}"}).status_code

            with ThreadPoolExecutor(8) as pool:
                assert set(pool.map(patch, range(40))) == {200}
            seen_a = c.get(f"{a.url}/api/agents/{agent['id']}").json()
            seen_b = c.get(f"{b.url}/api/agents/{agent['id']}").json()
            assert seen_a == seen_b

            # A key revoked through one process is refused by it at once, and by the
            # other as soon as the notice arrives, although both had it cached.
            issued = c.post(f"{a.url}/api/keys", json={"name": "temp"}).json()
            other = {"Authorization": f"Bearer {issued['key']}"}
            for svc in (a, b, a, b):
                assert httpx.get(f"{svc.url}/api/agents", headers=other).status_code == 200
            assert c.delete(f"{b.url}/api/keys/{issued['id']}").status_code == 200
            assert httpx.get(f"{b.url}/api/agents", headers=other).status_code == 401
            deadline = time.monotonic() + 2
            while httpx.get(f"{a.url}/api/agents", headers=other).status_code != 401:
                assert time.monotonic() < deadline, "A still accepts the revoked key"
                time.sleep(0.01)

            # Deleted through B, gone for A.
            assert c.delete(f"{b.url}/api/agents/{agent['id']}").json() == {"ok": True}
            assert c.get(f"{a.url}/api/agents/{agent['id']}").status_code == 404
    finally:
        a.stop()
        b.stop()


def test_serve_with_several_workers(pg_url: str, tmp_path: Path) -> None:
    k = key()
    env = {
        "AGENTSVC_DATABASE_URL": pg_url,
        "AGENTSVC_BOOTSTRAP_API_KEY": k,
        "AGENTSVC_BOOTSTRAP_ORG": f"workers-{uuid.uuid4().hex[:8]}",
    }
    svc = Service(env, ("--workers", "2"), log=tmp_path / "w.log")
    h = {"Authorization": f"Bearer {k}"}
    try:
        svc.wait_ready(timeout=60)
        with httpx.Client(base_url=svc.url, headers=h, timeout=10) as c:
            ids = {c.post("/api/agents", json={"name": f"w{i}"}).json()["id"] for i in range(20)}
            # New connections land on either worker; every one sees every agent.
            for _ in range(10):
                with httpx.Client(base_url=svc.url, headers=h, timeout=10) as fresh:
                    assert {x["id"] for x in fresh.get("/api/agents").json()} == ids
    finally:
        assert svc.stop() == 0, svc.output()


def test_keys_create_prints_a_key_the_service_accepts(pg_url: str, service: Service) -> None:
    """The key the command writes to the database is accepted by a service on it
    (the session's, on the same database)."""
    org = f"cli-{uuid.uuid4().hex[:8]}"
    env = {"AGENTSVC_DATABASE_URL": pg_url, "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [AGENTSVC, "keys", "create", "--org", org, "--name", "from-cli"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    token = out.stdout.strip()
    assert token.startswith("ask_")
    assert "shown once" in out.stderr
    assert token not in out.stderr
    r = httpx.get(f"{service.url}/api/keys", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200
    assert [(k["org_id"], k["name"]) for k in r.json()] == [(org, "from-cli")]


def test_migrate_command(pg_admin_url: str) -> None:
    with fresh_database(pg_admin_url) as url:
        env = {"AGENTSVC_DATABASE_URL": url, "PATH": "/usr/bin:/bin"}
        first = subprocess.run(
            [AGENTSVC, "migrate"], env=env, capture_output=True, text=True, check=True
        )
        versions = [v for v, _, _ in migrations()]
        assert f"applied migrations: {versions}" in first.stdout
        again = subprocess.run(
            [AGENTSVC, "migrate"], env=env, capture_output=True, text=True, check=True
        )
        assert "up to date" in again.stdout
