"""``agentsvc backup`` and ``agentsvc restore`` against the embedded default, as
docs/deploy.md ("Backups") gives them: a dump taken while the service runs, restored
into the running service, brings back exactly what was dumped; and a backup works with
the service stopped too (the command starts the server itself)."""

from __future__ import annotations

import os
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.service import AGENTSVC, Service

pytestmark = pytest.mark.e2e


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A data folder the embedded server's user can reach (as root it is not root)."""
    with tempfile.TemporaryDirectory(prefix="agentsvc-e2e-") as tmp:
        Path(tmp).chmod(0o711)
        yield Path(tmp) / "data"


def agentsvc(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AGENTSVC, *args],
        env={**{k: v for k, v in os.environ.items() if not k.startswith("AGENTSVC_")}, **env},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def names(svc: Service, h: dict[str, str]) -> list[str]:
    r = httpx.get(f"{svc.url}/api/agents", headers=h)
    assert r.status_code == 200, r.text
    return sorted(a["name"] for a in r.json())


def test_backup_then_restore_brings_back_what_was_dumped(tmp_path: Path, data_dir: Path) -> None:
    key = f"ask_e2e_{uuid.uuid4().hex}"
    env = {"AGENTSVC_DATA_DIR": str(data_dir), "AGENTSVC_BOOTSTRAP_API_KEY": key}
    h = {"Authorization": f"Bearer {key}"}
    dump = tmp_path / "agentsvc.dump"

    svc = Service(env, log=tmp_path / "service.log")
    try:
        svc.wait_ready(timeout=90)
        assert httpx.post(f"{svc.url}/api/agents", json={"name": "kept"}, headers=h).is_success
        done = agentsvc(env, "backup", str(dump))
        assert done.returncode == 0, done.stderr
        assert dump.stat().st_size > 0
        assert httpx.post(f"{svc.url}/api/agents", json={"name": "later"}, headers=h).is_success
        assert names(svc, h) == ["kept", "later"]

        done = agentsvc(env, "restore", str(dump))
        assert done.returncode == 0, done.stderr
        assert names(svc, h) == ["kept"]
    finally:
        assert svc.stop() == 0, svc.output()

    # The password of the embedded server is never shown.
    password = (data_dir / "pgdata" / "password").read_text().strip()
    assert password not in done.stdout + done.stderr

    # With the service stopped, the command starts the server, and stops it again.
    done = agentsvc(env, "backup", str(tmp_path / "again.dump"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "again.dump").stat().st_size > 0
    assert not (data_dir / "pgdata" / "cluster" / "postmaster.pid").exists()


def test_memory_storage_has_nothing_to_back_up(tmp_path: Path) -> None:
    done = agentsvc({"AGENTSVC_STORAGE": "memory"}, "backup", str(tmp_path / "x.dump"))
    assert done.returncode == 2
    assert "nothing to back up" in done.stderr
