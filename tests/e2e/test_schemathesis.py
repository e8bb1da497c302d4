"""Schemathesis (v4) against the served OpenAPI document, authenticated.

It generates valid and invalid requests for every operation and checks that the
service never answers 5xx and that every answer (status, content type, body)
matches what the document declares.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import E2E_KEY
from tests.e2e.service import Service

pytestmark = pytest.mark.e2e

SCHEMATHESIS = str(Path(sys.executable).parent / "schemathesis")
CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_schema_conformance",
        "response_headers_conformance",
    ]
)


def test_api_conforms_to_its_openapi_document(service: Service, tmp_path: Path) -> None:
    out = subprocess.run(
        [
            SCHEMATHESIS,
            "run",
            f"{service.url}/schema/openapi.json",
            "--url",
            service.url,
            "-H",
            f"Authorization: Bearer {E2E_KEY}",
            "--checks",
            CHECKS,
            "--max-examples",
            "40",
            "--seed",
            "1",
            "--generation-deterministic",
            "--continue-on-failure",
            "--no-color",
            # Revoking a key is covered by the web tests. Fuzzed, the stateful phase
            # lists the keys, finds the one it authenticates with and revokes it,
            # and every later request is a 401 that tests nothing.
            "--exclude-operation-id",
            "revokeKey",
            # These make the service contact URLs given in the request (MCP servers,
            # OAuth metadata, a credential resolver): fuzzed, they would send traffic
            # to whatever hosts Schemathesis invents. They are tested against servers
            # on loopback elsewhere (tests/web/test_mcp_*.py, tests/e2e/test_*_e2e.py).
            "--exclude-operation-id",
            "testMcpServer",
            "--exclude-operation-id",
            "startMcpOAuth",
            "--exclude-operation-id",
            "attachAgentMcpServer",
            "--exclude-operation-id",
            "putAgentCredentials",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=tmp_path,
    )
    report = out.stdout[-6000:] + out.stderr[-2000:]
    assert out.returncode == 0, report
    assert "passed" in out.stdout.lower(), report
    # Every operation must have been exercised with working credentials.
    assert "Authentication failed" not in out.stdout, report
