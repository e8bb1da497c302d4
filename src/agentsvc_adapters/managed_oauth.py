"""The catalogue of managed OAuth MCP providers: the shipped
``data/managed_oauth.json``, with this deployment's environment applied.

For a provider ``<ID>`` (its id upper-cased, e.g. ``GITHUB``), the environment
variables ``AGENTSVC_MANAGED_OAUTH_<ID>_...``:

- ``CLIENT_ID`` and ``CLIENT_SECRET``: the deployment's OAuth app at the provider
  (registered with the callback ``{AGENTSVC_PUBLIC_URL}/api/mcps/managed-oauth/callback``);
  without them the provider is listed ``available: false``, the reason naming them;
- ``MCP_URL``, ``AUTHORIZE_URL``, ``TOKEN_URL``, ``REVOKE_URL``: replace the
  catalogue's addresses (a provider whose catalogue has no MCP server URL, Google
  and Slack, needs ``MCP_URL``). Tests point them at loopback fakes.

The file is checked when the service starts: a malformed catalogue stops it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib import resources
from urllib.parse import urlsplit

import msgspec

from agentsvc_core.ports.managed_oauth import ManagedCatalogue, ManagedProvider, ManagedService

PREFIX = "AGENTSVC_MANAGED_OAUTH_"
_ID = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_URL_FIELDS = {
    "MCP_URL": "mcp_url",
    "AUTHORIZE_URL": "authorization_endpoint",
    "TOKEN_URL": "token_endpoint",
    "REVOKE_URL": "revocation_endpoint",
}


class _Service(msgspec.Struct, forbid_unknown_fields=True):
    id: str
    name: str
    scopes: list[str] = []
    tools: list[str] = []


class _Provider(msgspec.Struct, forbid_unknown_fields=True):
    id: str
    name: str
    mcp_url: str | None
    authorization_endpoint: str
    token_endpoint: str
    services: list[_Service]
    description: str = ""
    docs_url: str | None = None
    revocation_endpoint: str | None = None
    scopes_separator: str = " "
    pkce: bool = True
    scopes: list[str] = []
    authorize_params: dict[str, str] = {}
    transport: str = "streamable_http"


class _File(msgspec.Struct):
    providers: list[_Provider]


def _check_url(where: str, url: str | None) -> None:
    if url is None:
        return
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{where}: {url!r} is not an http(s) URL")


def _check(p: _Provider) -> None:
    if not _ID.match(p.id):
        raise ValueError(f"managed OAuth provider id {p.id!r}: lowercase letters, digits, _")
    if not p.services:
        raise ValueError(f"managed OAuth provider {p.id}: no services")
    ids = [s.id for s in p.services]
    if len(set(ids)) != len(ids) or not all(_ID.match(i) for i in ids):
        raise ValueError(f"managed OAuth provider {p.id}: service ids must be unique slugs")
    if p.transport not in ("streamable_http", "sse"):
        raise ValueError(f"managed OAuth provider {p.id}: transport {p.transport!r}")
    for field in _URL_FIELDS.values():
        _check_url(f"managed OAuth provider {p.id} {field}", getattr(p, field))


def _configure(p: _Provider, env: Mapping[str, str]) -> ManagedProvider:
    var = f"{PREFIX}{p.id.upper()}_"
    urls: dict[str, str | None] = {f: getattr(p, f) for f in _URL_FIELDS.values()}
    for suffix, field in _URL_FIELDS.items():
        value = (env.get(var + suffix) or "").strip()
        if value:
            _check_url(var + suffix, value)
            urls[field] = value
    client_id = (env.get(var + "CLIENT_ID") or "").strip() or None
    client_secret = (env.get(var + "CLIENT_SECRET") or "").strip() or None
    missing = [
        name
        for name, value in (
            (var + "CLIENT_ID", client_id),
            (var + "CLIENT_SECRET", client_secret),
            (var + "MCP_URL", urls["mcp_url"]),
        )
        if value is None
    ]
    return ManagedProvider(
        id=p.id,
        name=p.name,
        description=p.description,
        docs_url=p.docs_url,
        mcp_url=urls["mcp_url"],
        transport=p.transport,
        authorization_endpoint=str(urls["authorization_endpoint"]),
        token_endpoint=str(urls["token_endpoint"]),
        revocation_endpoint=urls["revocation_endpoint"],
        scopes_separator=p.scopes_separator,
        pkce=p.pkce,
        scopes=tuple(p.scopes),
        authorize_params=dict(p.authorize_params),
        services=tuple(
            ManagedService(id=s.id, name=s.name, scopes=tuple(s.scopes), tools=tuple(s.tools))
            for s in p.services
        ),
        client_id=client_id,
        client_secret=client_secret,
        missing=tuple(missing),
    )


def parse(raw: bytes, env: Mapping[str, str]) -> list[ManagedProvider]:
    """The providers of a catalogue file; raises ``ValueError`` on a malformed one."""
    try:
        data = msgspec.json.decode(raw, type=_File)
    except msgspec.ValidationError as exc:
        raise ValueError(f"the managed OAuth catalogue is malformed: {exc}") from None
    seen: set[str] = set()
    for p in data.providers:
        _check(p)
        if p.id in seen:
            raise ValueError(f"managed OAuth provider {p.id} is listed twice")
        seen.add(p.id)
    return [_configure(p, env) for p in data.providers]


class ShippedManagedCatalogue(ManagedCatalogue):
    """The shipped catalogue (or ``raw``, a test's) configured by ``env``."""

    def __init__(self, env: Mapping[str, str], raw: bytes | None = None) -> None:
        if raw is None:
            raw = (
                resources.files("agentsvc_adapters") / "data" / "managed_oauth.json"
            ).read_bytes()
        self._providers = parse(raw, env)
        self._by_id = {p.id: p for p in self._providers}

    def providers(self) -> list[ManagedProvider]:
        return list(self._providers)

    def get(self, provider_id: str) -> ManagedProvider | None:
        return self._by_id.get(provider_id)
