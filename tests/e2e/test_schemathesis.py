"""Schemathesis against the served document (tests/e2e/schemathesis_run.py): the
stateful phase over every operation, and the per-operation phases over the first
groups of tags; tests/e2e/test_schemathesis_operations.py runs the others, so that
two test processes share the run."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.e2e.schemathesis_run import (
    FIRST,
    GROUPS,
    PER_OPERATION,
    SECOND,
    TIMEOUT,
    operations,
    run_schemathesis,
)
from tests.e2e.service import Service

pytestmark = pytest.mark.e2e


def test_the_groups_hold_every_operation_once(service: Service) -> None:
    """Every operation has one tag, and every tag is in exactly one group: the
    per-operation phases miss no operation and run none twice."""
    ops = operations(httpx.get(f"{service.url}/schema/openapi.json", timeout=120).json())
    assert len(ops) >= 100
    assert {op: len(tags) for op, tags in ops.items() if len(tags) != 1} == {}
    grouped = [tag for tags in GROUPS.values() for tag in tags]
    assert len(grouped) == len(set(grouped))
    assert set(grouped) == {tags[0] for tags in ops.values()}
    assert sorted([*FIRST, *SECOND]) == sorted(GROUPS)  # each group runs, once


@pytest.mark.timeout(TIMEOUT + 60)
def test_the_stateful_phase_over_every_operation(service: Service, tmp_path: Path) -> None:
    run_schemathesis(service, tmp_path, "stateful")


@pytest.mark.timeout(TIMEOUT + 60)
@pytest.mark.parametrize("group", FIRST)
def test_each_operation_conforms(service: Service, tmp_path: Path, group: str) -> None:
    run_schemathesis(service, tmp_path, PER_OPERATION, GROUPS[group])
