"""The public routes of published chats, as an attacker sees them, against the real
service process (docs/publishing.md, docs/security.md):

- a visitor token opens the visitor's own threads of its own chat and nothing
  else: not another visitor's thread, not another chat, not one operation of the
  organization's API (every authenticated operation of the served document is
  401 with it); a forged or altered token is 401, and the organization's API key
  is no visitor token;
- a site that is not the chat's gets 403 and no CORS on every public route, no
  CORS on a preflight, no widget script, and the page lets only the chat's sites
  frame it;
- no secret in an answer: the identity secret is in the answer that made it
  only (the standing secret scan checks every answer and log for it, and for each
  visitor token), the sealed value is never shown, and the public answers hold
  nothing but what the owner published;
- wrong visitor proofs count as failed authentications of the address, which
  its budget then refuses (429).
"""

from __future__ import annotations

import hashlib
import hmac
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import E2E_JWT_SECRET
from tests.e2e.service import Service, client, new_org, running

pytestmark = pytest.mark.e2e
SITE = "https://shop.example.com"
EVIL = "https://evil.example"


def _publish(api: httpx.Client, **body: Any) -> tuple[str, dict[str, Any]]:
    agent = api.post("/api/agents", json={"name": "Guarded", "defaultModel": "local"})
    assert agent.status_code == 201, agent.text
    made = api.post(
        f"/api/agents/{agent.json()['id']}/publish",
        json={
            "slug": f"sec-{uuid.uuid4().hex[:10]}",
            "allowedDomains": ["shop.example.com"],
            **body,
        },
    )
    assert made.status_code == 201, made.text
    return agent.json()["id"], made.json()


def _token(base: str, slug: str, **body: Any) -> str:
    r = httpx.post(f"{base}/api/public/chat/{slug}/sessions", json=body)
    assert r.status_code == 201, r.text
    return str(r.json()["token"])


@pytest.fixture
def org_api(service: Service) -> Iterator[httpx.Client]:
    _, key = new_org(service.url, E2E_JWT_SECRET, "sec")
    with client(service, key) as api:
        yield api


def test_a_visitor_token_opens_its_own_threads_and_nothing_else(
    service: Service, org_api: httpx.Client
) -> None:
    base = service.url
    _, chat = _publish(org_api)
    _, other_chat = _publish(org_api)
    slug = chat["slug"]
    alice = {"Authorization": f"Bearer {_token(base, slug)}"}
    bob = {"Authorization": f"Bearer {_token(base, slug)}"}
    pub = f"{base}/api/public/chat/{slug}"
    thread = httpx.post(f"{pub}/threads", json={}, headers=alice).json()["id"]
    assert httpx.get(f"{pub}/threads/{thread}/messages", headers=alice).status_code == 200
    for path in (f"/threads/{thread}/messages",):
        assert httpx.get(pub + path, headers=bob).status_code == 404
    assert httpx.post(f"{pub}/threads/{thread}/stop", headers=bob).status_code == 404
    sent = httpx.post(f"{pub}/threads/{thread}/messages", json={"content": "x"}, headers=bob)
    assert sent.status_code == 404
    # alice's token at another chat, even for her own thread's id
    elsewhere = f"{base}/api/public/chat/{other_chat['slug']}"
    assert httpx.post(f"{elsewhere}/threads", json={}, headers=alice).status_code == 401
    assert httpx.get(f"{elsewhere}/threads/{thread}/messages", headers=alice).status_code == 401
    # forged and altered tokens; the organization's own key is no visitor token
    real = alice["Authorization"].removeprefix("Bearer ")
    for forged in (
        "vt_",
        "vt_v1.k1.AAAA",
        real[:-2] + ("AA" if real[-2:] != "AA" else "BB"),
        real.removeprefix("vt_"),
        org_api.headers["authorization"].removeprefix("Bearer "),
    ):
        r = httpx.post(f"{pub}/threads", json={}, headers={"Authorization": f"Bearer {forged}"})
        assert r.status_code == 401, (forged[:12], r.text)
    # the organization's API: every authenticated operation of the document is 401
    doc = httpx.get(f"{base}/schema/openapi.json", timeout=120).json()
    checked = 0
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if not isinstance(op, dict) or op.get("security") == [] or not path.startswith("/api/"):
                continue
            url = base + path.replace("{", "").replace("}", "")  # ids as words: any 4xx
            filled = url
            for name in ("agent_id", "thread_id", "mcp_id", "runner_id", "plan_id"):
                filled = filled.replace(name, str(uuid.uuid4()))
            r = httpx.request(method.upper(), filled, headers=alice, json={})
            assert r.status_code in (401, 404, 405), (method, path, r.status_code, r.text)
            if r.status_code == 401:
                checked += 1
    assert checked >= 100


def test_another_site_is_refused_everywhere(service: Service, org_api: httpx.Client) -> None:
    base = service.url
    _, chat = _publish(org_api)
    slug = chat["slug"]
    pub = f"{base}/api/public/chat/{slug}"
    token = {"Authorization": f"Bearer {_token(base, slug)}"}
    thread = httpx.post(f"{pub}/threads", json={}, headers=token).json()["id"]
    calls = [
        ("GET", "", None),
        ("POST", "/sessions", {}),
        ("POST", "/threads", {}),
        ("POST", f"/threads/{thread}/messages", {"content": "hi"}),
        ("POST", f"/threads/{thread}/stop", None),
        ("GET", f"/threads/{thread}/messages", None),
    ]
    for method, path, body in calls:
        refused = httpx.request(method, pub + path, json=body, headers={**token, "Origin": EVIL})
        assert refused.status_code == 403, (path, refused.text)
        assert "access-control-allow-origin" not in refused.headers
        pre = httpx.options(
            pub + path, headers={"Origin": EVIL, "Access-Control-Request-Method": method}
        )
        assert "access-control-allow-origin" not in pre.headers, path
        allowed = httpx.options(
            pub + path, headers={"Origin": SITE, "Access-Control-Request-Method": method}
        )
        assert allowed.headers["access-control-allow-origin"] == SITE, path
    # the widget's script, and framing the page
    widget = httpx.get(f"{base}/c/{slug}/widget.js", headers={"Referer": f"{EVIL}/page"})
    assert widget.status_code == 403
    assert (
        httpx.get(f"{base}/c/{slug}/widget.js", headers={"Referer": f"{SITE}/"}).status_code == 200
    )
    page = httpx.get(f"{base}/c/{slug}")
    csp = page.headers["content-security-policy"]
    assert "frame-ancestors https://shop.example.com" in csp
    assert "evil" not in csp
    assert "script-src 'self'" in csp
    # an inactive or unknown chat: nothing at all
    assert httpx.get(f"{base}/api/public/chat/no-such-chat").status_code == 404
    assert httpx.get(f"{base}/c/no-such-chat").status_code == 404


def test_no_secret_in_any_answer(service: Service, org_api: httpx.Client) -> None:
    base = service.url
    agent, chat = _publish(org_api, visibility="private")
    secret = chat["identity_secret"]
    slug = chat["slug"]
    expires = int(time.time()) + 300
    sig = hmac.new(secret.encode(), f"v-1.{expires}".encode(), hashlib.sha256).hexdigest()
    token = _token(base, slug, visitorId="v-1", expiresAt=expires, signature=sig)
    visitor = {"Authorization": f"Bearer {token}"}
    thread = httpx.post(f"{base}/api/public/chat/{slug}/threads", json={}, headers=visitor)
    answers = [
        org_api.get(f"/api/agents/{agent}/publish"),
        org_api.get(f"/api/agents/{agent}"),
        org_api.get("/api/agents"),
        org_api.get(f"/api/agents/{agent}/publish/threads"),
        org_api.patch(f"/api/agents/{agent}/publish", json={"title": "Changed"}),
        httpx.get(f"{base}/api/public/chat/{slug}"),
        thread,
        httpx.get(
            f"{base}/api/public/chat/{slug}/threads/{thread.json()['id']}/messages", headers=visitor
        ),
        httpx.get(f"{base}/api/public/marketplace"),
        httpx.get(f"{base}/c/{slug}"),
    ]
    for r in answers:
        assert r.status_code in {200, 201}, r.text
        assert secret not in r.text
        assert "identity_sealed" not in r.text
        assert "previous_sealed" not in r.text
        assert 'identity_secret"' not in r.text
    face = answers[5].json()
    assert set(face) == {
        "slug",
        "title",
        "description",
        "welcome_message",
        "starter_prompts",
        "identity_required",
    }
    # a rotation shows the new secret once, and not the old
    rotated = org_api.patch(f"/api/agents/{agent}/publish", json={"rotateIdentitySecret": True})
    assert rotated.json()["identity_secret"] not in (secret, None)
    assert secret not in rotated.text


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, str]]:
    """A service whose budget of failed authentications per address is 3 a minute."""
    tmp: Path = tmp_path_factory.mktemp("strict")
    key = f"ask_e2e_{uuid.uuid4().hex}"
    with running(
        {
            "AGENTSVC_STORAGE": "memory",
            "AGENTSVC_BOOTSTRAP_API_KEY": key,
            "AGENTSVC_AUTH_FAILURES_PER_MIN": "3",
            "AGENTSVC_DATA_DIR": str(tmp / "data"),
        },
        log=tmp / "svc.log",
    ) as svc:
        yield svc, key


def test_wrong_visitor_proofs_are_failed_authentications(strict: tuple[Service, str]) -> None:
    service, key = strict
    with client(service, key) as api:
        _, chat = _publish(api, visibility="private")
    pub = f"{service.url}/api/public/chat/{chat['slug']}"
    expires = int(time.time()) + 60
    wrong = {"visitorId": "v", "expiresAt": expires, "signature": "0" * 64}
    for _ in range(3):
        assert httpx.post(f"{pub}/sessions", json=wrong).status_code == 401
    refused = httpx.post(f"{pub}/threads", json={}, headers={"Authorization": "Bearer vt_x"})
    assert refused.status_code == 429
    assert int(refused.headers["retry-after"]) >= 1
