"""GET /api/mcp-registry/search against a fake MCP registry on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
import pytest
from litestar.testing import TestClient

from agentsvc_web.app import create_app
from agentsvc_web.settings import Settings
from tests.fakes.registry import FakeRegistry
from tests.web.conftest import memory_only
from tests.web.live import serve


@pytest.fixture
def registry() -> Iterator[tuple[FakeRegistry, str]]:
    fake = FakeRegistry()
    with serve(fake) as url:
        yield fake, url


@memory_only
def test_search_normalises_the_registry_answer(
    settings: Settings, auth: dict[str, str], registry: tuple[FakeRegistry, str]
) -> None:
    fake, url = registry
    # a registry on loopback is a private one: the outbound guard needs the switch
    local = msgspec.structs.replace(settings, mcp_registry_url=url, allow_private_network=True)
    with TestClient(create_app(local)) as c:
        r = c.get("/api/mcp-registry/search", params={"q": "weather", "limit": 5}, headers=auth)
        assert r.status_code == 200, r.text
        servers = r.json()["servers"]
        assert servers[0] == {
            "name": "io.github.example/weather",
            "title": "Weather",
            "description": "Forecasts for any city",
            "version": "1.2.0",
            "repositoryUrl": "https://github.com/example/weather",
            "websiteUrl": "https://weather.example",
            "remotes": [{"transport": "streamable-http", "url": "https://mcp.weather.example/mcp"}],
            "packages": [
                {
                    "registryType": "pypi",
                    "identifier": "weather-mcp",
                    "version": "1.2.0",
                    "transport": "stdio",
                }
            ],
        }
        assert [s["name"] for s in servers] == [
            "io.github.example/weather",
            "io.github.example/minimal",
        ]
        assert fake.queries[-1] == {"search": ["weather"], "limit": ["5"], "version": ["latest"]}
        assert (
            c.get("/api/mcp-registry/search", params={"limit": 0}, headers=auth).status_code == 422
        )


@memory_only
def test_an_unreachable_registry_is_502(settings: Settings, auth: dict[str, str]) -> None:
    broken = msgspec.structs.replace(
        settings, mcp_registry_url="http://127.0.0.1:1", allow_private_network=True
    )
    with TestClient(create_app(broken)) as c:
        r = c.get("/api/mcp-registry/search", params={"q": "x"}, headers=auth)
        assert r.status_code == 502
        assert r.json() == {
            "error": "REGISTRY_UNAVAILABLE",
            "detail": "the MCP registry could not be reached",
        }
