"""The uvicorn options ``agentsvc serve`` runs with: the read-limited protocol, and
forwarded client addresses only from proxies named in AGENTSVC_FORWARDED_ALLOW_IPS."""

from __future__ import annotations

import argparse
from typing import Any

from agentsvc_web.cli import _run_uvicorn
from agentsvc_web.settings import Settings
from agentsvc_web.shutdown import DRAIN_MARGIN_S


class FakeUvicorn:
    def __init__(self) -> None:
        self.options: dict[str, Any] = {}

    def run(self, app: str, **options: Any) -> None:
        self.options = options


def options(settings: Settings) -> dict[str, Any]:
    uvicorn = FakeUvicorn()
    args = argparse.Namespace(workers=1, access_log=False)
    _run_uvicorn(uvicorn, args, settings, "127.0.0.1", 8000)
    return uvicorn.options


def test_the_protocol_bounds_reading_requests() -> None:
    assert options(Settings())["http"] == "agentsvc_web.read_timeout:ReadTimeoutProtocol"


def test_forwarded_addresses_are_believed_only_from_named_proxies() -> None:
    plain = options(Settings())
    assert plain["proxy_headers"] is False
    behind = options(Settings(forwarded_allow_ips="10.0.0.5,10.0.0.6"))
    assert behind["proxy_headers"] is True
    assert behind["forwarded_allow_ips"] == "10.0.0.5,10.0.0.6"


def test_uvicorn_waits_for_open_streams_as_long_as_the_shutdown_drain_takes() -> None:
    """The drain (agentsvc_web.shutdown) ends every stream within the grace plus its
    margin; uvicorn must not cut one before that."""
    assert options(Settings())["timeout_graceful_shutdown"] == int(4 + DRAIN_MARGIN_S)
    assert options(Settings(shutdown_grace_s=10))["timeout_graceful_shutdown"] == int(
        10 + DRAIN_MARGIN_S
    )
