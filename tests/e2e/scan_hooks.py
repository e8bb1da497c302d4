"""The standing secret scan's fixture and hooks (tests/e2e/secret_scan.py), for a
folder's conftest to import: tests/e2e and tests/client both join the scan.

The tap is open while a test of the importing folder (its fixtures included) runs,
and only then: conftest hooks are called for the items of their own folder alone,
so the other suites' in-process clients (and the scan's own unit tests) are not
scanned."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.secret_scan import SCAN, SecretScan

__all__ = [
    "pytest_runtest_call",
    "pytest_runtest_setup",
    "pytest_runtest_teardown",
    "secret_scan",
]


@pytest.fixture(scope="session", autouse=True)
def secret_scan() -> Iterator[SecretScan]:
    """After the folder's last test, no configured secret may be in any answer,
    stream or log line (a session running both folders checks the findings twice)."""
    yield SCAN
    found = SCAN.findings()
    SCAN.cleanup()
    assert not found, "secrets leaked:\n" + "\n".join(found)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with SCAN.tapping():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with SCAN.tapping():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    with SCAN.tapping():
        return (yield)
