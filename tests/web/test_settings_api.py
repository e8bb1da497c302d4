"""Resolver and compaction settings through the web app, with the default outbound policy."""

from __future__ import annotations

import pytest

from tests.web.conftest import bearer, make_jwt
from tests.web.harness import SharedHarness

H = dict[str, str]


@pytest.mark.parametrize(
    "url",
    [
        "http://resolver.example.com/r",  # plain http: only with AGENTSVC_ALLOW_PRIVATE_NETWORK
        "https://127.0.0.1/resolve",
        "https://10.1.2.3/resolve",
        "https://169.254.169.254/latest/meta-data",
        "https://[::1]/r",
        "https://2130706433/r",
        "https://keys.example.com/re solve",
        " https://keys.example.com/resolve",
        "https://keys.example.com/resolve\n",
        "https://keys.example.com/\u0000resolve",
    ],
)
def test_resolver_urls_are_refused_without_private_network(
    harness: SharedHarness, auth: H, url: str
) -> None:
    with harness.client() as c:
        agent = c.post("/api/agents", json={"name": "A"}, headers=auth).json()
        r = c.put(
            f"/api/agents/{agent['id']}/credentials",
            json={"enabled": True, "resolverUrl": url},
            headers=auth,
        )
        assert (r.status_code, r.json()["error"]) == (422, "VALIDATION_ERROR"), r.text
        assert "resolverUrl" in r.json()["detail"]
        ok = c.put(
            f"/api/agents/{agent['id']}/credentials",
            json={"enabled": True, "resolverUrl": "https://keys.example.com/resolve"},
            headers=auth,
        )
        assert ok.status_code == 200


def test_settings_are_per_organization_and_admin_only(
    harness: SharedHarness, auth: H, org_id: str
) -> None:
    with harness.client() as c:
        agent = c.post("/api/agents", json={"name": "A"}, headers=auth).json()
        stranger = bearer(make_jwt(org="some-other-org"))
        for path in ("credentials", "compaction"):
            assert c.get(f"/api/agents/{agent['id']}/{path}", headers=stranger).status_code == 404
        user = bearer(make_jwt(sub="u", org=org_id))
        assert c.get("/api/orgs/settings", headers=user).status_code == 403
        first = c.get("/api/orgs/settings", headers=auth).json()
        assert first["signing_secret"].startswith("whsec_")
        assert c.get("/api/orgs/settings", headers=auth).json() == first  # stable until rotated
        changed = c.post(
            "/api/orgs/settings", json={"allowedEmbedDomains": ["app.example.com"]}, headers=auth
        ).json()
        assert changed["allowed_embed_domains"] == ["app.example.com"]
        assert changed["signing_secret"] == first["signing_secret"]


@pytest.mark.parametrize(
    "domain",
    ["not a domain!!", "https://app.example.com", "app.example.com/path", "*", "a..b", "x:99999"],
)
def test_embed_domains_must_be_host_names(harness: SharedHarness, auth: H, domain: str) -> None:
    with harness.client() as c:
        r = c.post("/api/orgs/settings", json={"allowedEmbedDomains": [domain]}, headers=auth)
        assert (r.status_code, r.json()["error"]) == (422, "VALIDATION_ERROR"), r.text
        assert "allowedEmbedDomains" in r.json()["detail"]
        good = ["app.example.com", "*.example.com", "localhost:3000", "bücher.example"]
        r = c.post("/api/orgs/settings", json={"allowedEmbedDomains": good}, headers=auth)
        assert r.status_code == 200, r.text
        assert r.json()["allowed_embed_domains"] == good
