"""A fake MCP registry (the official registry's v0.1 API) for tests: loopback only."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs

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
