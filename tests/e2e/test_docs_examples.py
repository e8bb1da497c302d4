"""The client examples in docs/examples run against the real service as written."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.e2e.conftest import E2E_KEY
from tests.e2e.receivers import EXAMPLES
from tests.e2e.service import Service

pytestmark = pytest.mark.e2e


def test_python_client_example(service: Service) -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "chat.py"), service.url, E2E_KEY, "Hello!", "Again?"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert 'You said: "Hello!"' in out.stdout
    assert 'Before that you said: "Hello!"' in out.stdout
    assert "history: 4 messages" in out.stdout


def test_javascript_client_example(service: Service) -> None:
    # Never skipped: `make test` installs node where it can (see `make node`), and a
    # machine without it fails here rather than passing in silence.
    assert shutil.which("node") is not None, "node is not installed: run `make node`"
    out = subprocess.run(
        ["node", str(EXAMPLES / "chat.mjs"), service.url, E2E_KEY, "Hi from JS"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert 'You said: "Hi from JS"' in out.stdout
    assert "history: 2 messages" in out.stdout
