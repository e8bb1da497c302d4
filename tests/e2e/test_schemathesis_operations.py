"""Schemathesis' per-operation phases over the groups of tags that
tests/e2e/test_schemathesis.py leaves (tests/e2e/schemathesis_run.py): a file of
their own, so that a second test process takes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.schemathesis_run import GROUPS, PER_OPERATION, SECOND, TIMEOUT, run_schemathesis
from tests.e2e.service import Service

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(TIMEOUT + 60)
@pytest.mark.parametrize("group", SECOND)
def test_each_operation_conforms(service: Service, tmp_path: Path, group: str) -> None:
    run_schemathesis(service, tmp_path, PER_OPERATION, GROUPS[group])
