"""Start the real ``agentsvc serve`` process on a free port for end-to-end tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx
import jwt

from tests.e2e.secret_scan import SCAN

AGENTSVC = str(Path(sys.executable).parent / "agentsvc")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Service:
    """One service process. ``stop()`` terminates it; its output is kept for failures."""

    def __init__(
        self, env: Mapping[str, str], args: tuple[str, ...] = (), log: Path | None = None
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSVC_")}
        full_env.update(env)
        full_env["AGENTSVC_PORT"] = str(self.port)
        temporary = log is None  # every service's output is kept for the secret scan
        if log is None:
            fd, name = tempfile.mkstemp(prefix="agentsvc-", suffix=".log")
            os.close(fd)
            log = Path(name)
        self.log_path = log
        self._log = open(log, "wb")  # noqa: SIM115
        SCAN.service_env(full_env, full_env.get("AGENTSVC_DATA_DIR"))
        SCAN.log_file(log, temporary=temporary)
        self.proc = subprocess.Popen(
            [AGENTSVC, "serve", *args], env=full_env, stdout=self._log, stderr=subprocess.STDOUT
        )

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"service exited with {self.proc.returncode}: {self.output()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        # stopped here, since a caller that sees the error has no service to stop:
        # a process left running outlives the suite (one did, after a run on a
        # machine so loaded that starts took over 30 s; the wait is 120 s since a
        # clean-clone CI on a slow machine timed out at 30 s)
        self.stop()
        raise RuntimeError(f"service not ready after {timeout}s: {self.output()}")

    def output(self) -> str:
        if self.log_path and self.log_path.exists():
            return self.log_path.read_text(errors="replace")[-4000:]
        return "(no log)"

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


@contextmanager
def running(
    env: Mapping[str, str], log: Path | None = None, args: tuple[str, ...] = ()
) -> Iterator[Service]:
    """A ready service process for the block's length, stopped after it."""
    svc = Service(env, args, log)
    try:
        svc.wait_ready()
        yield svc
    finally:
        svc.stop()


def client(svc: Service, key: str, timeout: float = 60) -> httpx.Client:
    """An HTTP client of ``svc`` that authenticates with ``key``."""
    return httpx.Client(
        base_url=svc.url, headers={"Authorization": f"Bearer {key}"}, timeout=timeout
    )


def new_org(url: str, jwt_secret: str, prefix: str = "e2e") -> tuple[str, str]:
    """A fresh organization on a running service, and an API key of it.

    The tests of a module share one service process (a start imports, builds and
    migrates the whole app); each test works in an organization of its own, so
    that none sees another's agents, threads, settings or signing secret. The
    organization's admin JWT (the service runs with ``AGENTSVC_JWT_SECRET``)
    makes the key; the secret scan learns the key from that answer."""
    org = f"{prefix}-{uuid.uuid4().hex[:8]}"
    token = jwt.encode(
        {"sub": f"{prefix}-admin", "org_id": org, "role": "admin", "exp": int(time.time()) + 3600},
        jwt_secret,
        algorithm="HS256",
    )
    r = httpx.post(
        f"{url}/api/keys", json={}, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    assert r.status_code == 201, r.text
    return org, str(r.json()["key"])
