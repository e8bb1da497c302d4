"""GET /api/mcp-registry/search against a fake MCP registry on loopback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs

import msgspec
import pytest
from litestar.testing import TestClient

from agentsvc_web.app import create_app
from agentsvc_web.settings import Settings
from tests.web.live import serve

SERVERS = [
    {
        "server": {
            "name": "io.github.example/weather",
            "title": "Weather",
            "description": "Forecasts for any city",
            "version": "1.2.0",
            "repository": {"url": "https://github.com/example/weather", "source": "github"},
            "websiteUrl": "https://weather.example",
            "remotes": [{"type": "streamable-http", "url": "https://mcp.weather.example/mcp"}],
            "packages": [
                {
                    "registryType": "pypi",
                    "identifier": "weather-mcp",
                    "version": "1.2.0",
                    "transport": {"type": "stdio"},
                }
            ],
            "$schema": "https://static.modelcontextprotocol.io/schemas/2025-09-29/server.schema.json",
        },
        "_meta": {
            "io.modelcontextprotocol.registry/official": {"status": "active", "isLatest": True}
        },
    },
    {"server": {"name": "io.github.example/minimal", "description": "Bare"}},
    {"server": {"description": "no name: skipped"}},
]


class FakeRegistry:
    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.queries: list[dict[str, list[str]]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        self.queries.append(parse_qs(scope["query_string"].decode()))
        ok = scope["path"] == "/v0.1/servers" and self.status == 200
        body = json.dumps({"servers": SERVERS, "metadata": {"count": 3}}).encode() if ok else b"{}"
        await send(
            {
                "type": "http.response.start",
                "status": 200 if ok else self.status or 404,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})


@pytest.fixture
def registry() -> Iterator[tuple[FakeRegistry, str]]:
    fake = FakeRegistry()
    with serve(fake) as url:
        yield fake, url


def test_search_normalises_the_registry_answer(
    settings: Settings, auth: dict[str, str], registry: tuple[FakeRegistry, str]
) -> None:
    fake, url = registry
    with TestClient(create_app(msgspec.structs.replace(settings, mcp_registry_url=url))) as c:
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


def test_an_unreachable_registry_is_502(settings: Settings, auth: dict[str, str]) -> None:
    broken = msgspec.structs.replace(settings, mcp_registry_url="http://127.0.0.1:1")
    with TestClient(create_app(broken)) as c:
        r = c.get("/api/mcp-registry/search", params={"q": "x"}, headers=auth)
        assert r.status_code == 502
        assert r.json() == {
            "error": "REGISTRY_UNAVAILABLE",
            "detail": "the MCP registry could not be reached",
        }
