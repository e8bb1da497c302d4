"""``serve_app``, what ``agentsvc serve`` runs, freezes the heap startup built."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from litestar.testing import TestClient

from agentsvc_web.app import create_app, serve_app


@pytest.fixture
def unfrozen(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("AGENTSVC_STORAGE", "memory")
    gc.unfreeze()
    try:
        yield
    finally:
        gc.unfreeze()  # frozen objects are never collected: give the test's back


def test_serve_app_freezes_what_startup_built(unfrozen: None) -> None:
    with TestClient(serve_app()) as client:
        assert gc.get_freeze_count() > 10_000
        assert client.get("/healthz").json() == {"ok": True}


def test_create_app_alone_freezes_nothing(unfrozen: None) -> None:
    with TestClient(create_app()) as client:
        assert gc.get_freeze_count() == 0
        assert client.get("/healthz").json() == {"ok": True}
