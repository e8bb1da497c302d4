"""``agentsvc --version`` prints the version that pyproject.toml gives, the same one
the OpenAPI document states (docs/operations.md, "Version")."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from agentsvc_web.app import VERSION
from agentsvc_web.cli import main

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
DECLARED = tomllib.loads(PYPROJECT.read_text())["project"]["version"]


def test_version_flag_prints_the_declared_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"agentsvc {DECLARED}"


def test_the_installed_command_answers_version() -> None:
    script = Path(sys.executable).parent / "agentsvc"
    out = subprocess.run(
        [str(script), "--version"], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == f"agentsvc {DECLARED}"


def test_the_api_document_states_the_same_version() -> None:
    assert VERSION == DECLARED
