"""The shipped catalogue of managed OAuth providers (agentsvc_adapters/managed_oauth.py)
and the environment variables that configure it."""

from __future__ import annotations

import json

import pytest

from agentsvc_adapters.managed_oauth import ShippedManagedCatalogue, parse

GH = "AGENTSVC_MANAGED_OAUTH_GITHUB_"


def test_the_shipped_catalogue_has_the_known_providers_all_unavailable_by_default() -> None:
    catalogue = ShippedManagedCatalogue({})
    ids = [p.id for p in catalogue.providers()]
    assert ids == ["github", "linear", "notion", "slack", "atlassian", "google"]
    github = catalogue.get("github")
    assert github is not None
    assert github.mcp_url == "https://api.githubcopilot.com/mcp/"
    assert github.missing == (f"{GH}CLIENT_ID", f"{GH}CLIENT_SECRET")
    assert not github.available
    google = catalogue.get("google")
    assert google is not None
    assert [s.id for s in google.services] == ["gmail", "calendar", "drive"]
    assert google.mcp_url is None
    assert "AGENTSVC_MANAGED_OAUTH_GOOGLE_MCP_URL" in google.missing
    for p in catalogue.providers():
        assert p.services
        assert all(s.tools for s in p.services), p.id
        assert p.authorization_endpoint.startswith("https://")
        assert p.token_endpoint.startswith("https://")
    assert catalogue.get("nope") is None


def test_the_environment_gives_credentials_and_replaces_every_url() -> None:
    env = {
        f"{GH}CLIENT_ID": " id ",
        f"{GH}CLIENT_SECRET": "secret",
        f"{GH}MCP_URL": "http://127.0.0.1:1/mcp",
        f"{GH}AUTHORIZE_URL": "http://127.0.0.1:2/authorize",
        f"{GH}TOKEN_URL": "http://127.0.0.1:2/token",
        f"{GH}REVOKE_URL": "http://127.0.0.1:2/revoke",
        "AGENTSVC_MANAGED_OAUTH_SLACK_CLIENT_ID": "x",
    }
    catalogue = ShippedManagedCatalogue(env)
    github = catalogue.get("github")
    assert github is not None
    assert github.available
    assert (github.client_id, github.client_secret) == ("id", "secret")
    assert github.mcp_url == "http://127.0.0.1:1/mcp"
    assert github.authorization_endpoint == "http://127.0.0.1:2/authorize"
    assert github.token_endpoint == "http://127.0.0.1:2/token"
    assert github.revocation_endpoint == "http://127.0.0.1:2/revoke"
    slack = catalogue.get("slack")
    assert slack is not None
    assert slack.missing == (
        "AGENTSVC_MANAGED_OAUTH_SLACK_CLIENT_SECRET",
        "AGENTSVC_MANAGED_OAUTH_SLACK_MCP_URL",
    )
    with pytest.raises(ValueError, match="MCP_URL"):
        ShippedManagedCatalogue({f"{GH}MCP_URL": "ftp://x"})


def provider(**over: object) -> dict[str, object]:
    p: dict[str, object] = {
        "id": "acme",
        "name": "Acme",
        "mcp_url": "https://acme.example/mcp",
        "authorization_endpoint": "https://acme.example/authorize",
        "token_endpoint": "https://acme.example/token",
        "services": [{"id": "main", "name": "Main", "tools": ["t"]}],
    }
    return {**p, **over}


@pytest.mark.parametrize(
    ("providers", "problem"),
    [
        ([provider(id="Bad Id")], "lowercase"),
        ([provider(services=[])], "no services"),
        ([provider(services=[{"id": "a", "name": "A"}, {"id": "a", "name": "B"}])], "unique"),
        ([provider(transport="stdio")], "transport"),
        ([provider(token_endpoint="not a url")], "token_endpoint"),
        ([provider(), provider()], "twice"),
        ([provider(unknown=1)], "malformed"),
    ],
)
def test_a_malformed_catalogue_stops_the_start(providers: list[object], problem: str) -> None:
    raw = json.dumps({"providers": providers}).encode()
    with pytest.raises(ValueError, match=problem):
        parse(raw, {})


def test_a_well_formed_catalogue_parses() -> None:
    [acme] = parse(json.dumps({"providers": [provider()]}).encode(), {})
    assert (acme.id, acme.transport, acme.scopes_separator, acme.pkce) == (
        "acme",
        "streamable_http",
        " ",
        True,
    )
