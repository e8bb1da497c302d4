"""The MCP registry client (``GET {base}/v0.1/servers?search=&limit=&version=latest``).

The official registry answers ``{"servers": [{"server": {...server.json...},
"_meta": {...}}], "metadata": {"nextCursor", "count"}}``; each ``server`` has
``name``, ``title``, ``description``, ``version``, ``repository.url``,
``websiteUrl``, ``remotes`` (``type``, ``url``) and ``packages``
(``registryType``, ``identifier``, ``version``, ``transport.type``). Decoding is
lenient: unknown fields are ignored, a malformed entry is skipped, not fatal.

The registry's URL is the operator's, but the client is the outbound guard's like
every other (``agentsvc_adapters.outbound``): a registry on a private network needs
``AGENTSVC_ALLOW_PRIVATE_NETWORK``, and proxies from the environment are ignored.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx
import msgspec

from agentsvc_adapters.outbound import OutboundGuard, refusal_of
from agentsvc_core.errors import Upstream
from agentsvc_core.ports.registry import (
    McpRegistry,
    RegistryEntry,
    RegistryPackage,
    RegistryRemote,
)

log = logging.getLogger("agentsvc.registry")
_MAX_BYTES = 4 * 1024 * 1024


class _Repo(msgspec.Struct):
    url: str | None = None


class _Remote(msgspec.Struct):
    type: str = ""
    url: str = ""


class _Transport(msgspec.Struct):
    type: str | None = None


class _Package(msgspec.Struct, rename="camel"):
    registry_type: str = ""
    identifier: str = ""
    version: str | None = None
    transport: _Transport | None = None


class _Server(msgspec.Struct, rename="camel"):
    name: str
    title: str | None = None
    description: str = ""
    version: str | None = None
    repository: _Repo | None = None
    website_url: str | None = None
    remotes: list[_Remote] = []
    packages: list[_Package] = []


_server = msgspec.json.Decoder(_Server)
_envelope = msgspec.json.Decoder(dict[str, Any])


def _entry(raw: Any) -> RegistryEntry | None:
    item = raw.get("server", raw) if isinstance(raw, dict) else None
    if not isinstance(item, dict):
        return None
    try:
        s = _server.decode(msgspec.json.encode(item))
    except msgspec.ValidationError:
        return None
    return RegistryEntry(
        name=s.name,
        title=s.title,
        description=s.description,
        version=s.version,
        repository_url=s.repository.url if s.repository else None,
        website_url=s.website_url,
        remotes=tuple(RegistryRemote(transport=r.type, url=r.url) for r in s.remotes if r.url),
        packages=tuple(
            RegistryPackage(
                registry_type=p.registry_type,
                identifier=p.identifier,
                version=p.version,
                transport=p.transport.type if p.transport else None,
            )
            for p in s.packages
            if p.identifier
        ),
    )


class HttpMcpRegistry(McpRegistry):
    def __init__(self, base_url: str, guard: OutboundGuard, *, timeout_s: float = 10.0) -> None:
        self._url = base_url.rstrip("/") + "/v0.1/servers"
        self._http = guard.http_client(timeout=timeout_s)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def search(self, query: str, limit: int) -> list[RegistryEntry]:
        params: dict[str, str | int] = {"limit": limit, "version": "latest"}
        if query:
            params["search"] = query
        try:
            async with self._http.stream("GET", self._url, params=params) as resp:
                if resp.status_code != 200:
                    raise Upstream(
                        f"the MCP registry answered {resp.status_code}", code="REGISTRY_UNAVAILABLE"
                    )
                body = b""
                async for chunk in resp.aiter_bytes():
                    body += chunk
                    if len(body) > _MAX_BYTES:
                        raise Upstream(
                            "the MCP registry answer is too large", code="REGISTRY_UNAVAILABLE"
                        )
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            why = refusal_of(exc)
            if why is None:  # a refusal is logged by the guard (once)
                log.warning("MCP registry request failed: %s", type(exc).__name__)
            detail = "the MCP registry could not be reached"
            raise Upstream(
                f"{detail} ({why})" if why else detail, code="REGISTRY_UNAVAILABLE"
            ) from None
        try:
            envelope = _envelope.decode(body)
        except msgspec.DecodeError:
            raise Upstream(
                "the MCP registry answered something that is not JSON", code="REGISTRY_UNAVAILABLE"
            ) from None
        servers = envelope.get("servers", [])
        found = (
            [e for e in (_entry(raw) for raw in servers if raw) if e is not None]
            if isinstance(servers, list)
            else []
        )
        return found[:limit]
