"""Published chats (docs/publishing.md) through the real Litestar app, on memory
and PostgreSQL: the owner publishes, changes and unpublishes an agent's chat;
visitors talk to it through the public routes, each in threads of its own, from
the sites the owner allows; a private chat admits only signed visitors; the
daily cost cap and the rate limits refuse sends; listed agents with an active
public chat are in the public marketplace."""

from __future__ import annotations

import hashlib
import hmac
import time
import uuid
from typing import Any

from litestar.testing import TestClient

from tests.sse import parse
from tests.web.conftest import bearer, make_jwt

Client = TestClient[Any]
SITE = "https://shop.example.com"


def _ok(r: Any, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    return r.json()


def _slug() -> str:
    return f"chat-{uuid.uuid4().hex[:10]}"


def _agent(c: Client, auth: dict[str, str], name: str = "Helper") -> str:
    body = {"name": name, "defaultModel": "local"}
    return str(_ok(c.post("/api/agents", json=body, headers=auth), 201)["id"])


def _publish(c: Client, auth: dict[str, str], agent: str, **body: Any) -> dict[str, Any]:
    body = {"slug": _slug(), "allowedDomains": ["shop.example.com"], **body}
    return _ok(c.post(f"/api/agents/{agent}/publish", json=body, headers=auth), 201)  # type: ignore[no-any-return]


def _session(c: Client, slug: str, **body: Any) -> dict[str, str]:
    made = _ok(c.post(f"/api/public/chat/{slug}/sessions", json=body), 201)
    return bearer(made["token"])


def _visitor_thread(c: Client, slug: str, who: dict[str, str]) -> str:
    return str(_ok(c.post(f"/api/public/chat/{slug}/threads", json={}, headers=who), 201)["id"])


def _sign(secret: str, visitor: str, expires: int) -> str:
    return hmac.new(secret.encode(), f"{visitor}.{expires}".encode(), hashlib.sha256).hexdigest()


def test_publish_read_change_and_unpublish(client: Client, auth: dict[str, str]) -> None:
    agent = _agent(client, auth, "Concierge")
    slug = _slug()
    made = _publish(client, auth, agent, slug=slug, welcomeMessage="Hi!", starterPrompts=["Hours?"])
    assert made["identity_secret"].startswith("pcs_")
    assert (made["slug"], made["title"], made["visibility"]) == (slug, "Concierge", "public")
    assert made["url"] == f"/c/{slug}"
    assert (made["rate_limit_per_min"], made["daily_cost_cap_usd"]) == (20, 5.0)
    assert (made["cost_today_usd"], made["cap_reached"]) == (0.0, False)
    read = _ok(client.get(f"/api/agents/{agent}/publish", headers=auth))
    assert "identity_secret" not in read  # shown once
    assert read["starter_prompts"] == ["Hours?"]
    listed = _ok(client.get(f"/api/agents/{agent}", headers=auth))
    assert listed["published_chats"] == [{"slug": slug, "is_active": True}]
    changed = _ok(
        client.patch(
            f"/api/agents/{agent}/publish",
            json={"isActive": False, "title": "Ask us"},
            headers=auth,
        )
    )
    assert (changed["is_active"], changed["title"], changed["slug"]) == (False, "Ask us", slug)
    assert "identity_secret" not in changed
    assert client.get(f"/api/public/chat/{slug}").status_code == 404  # inactive
    again = _ok(
        client.post(f"/api/agents/{agent}/publish", json={"slug": _slug()}, headers=auth), 409
    )
    assert again["error"] == "ALREADY_PUBLISHED"
    _ok(client.delete(f"/api/agents/{agent}/publish", headers=auth))
    assert client.get(f"/api/agents/{agent}/publish", headers=auth).status_code == 404
    assert _ok(client.get(f"/api/agents/{agent}", headers=auth))["published_chats"] == []
    assert client.delete(f"/api/agents/{agent}/publish", headers=auth).status_code == 404
    assert client.get(f"/api/agents/{uuid.uuid4()}/publish", headers=auth).status_code == 404


def test_a_slug_is_one_chats_across_the_service(client: Client, auth: dict[str, str]) -> None:
    slug = _slug()
    _publish(client, auth, _agent(client, auth), slug=slug)
    other_org = bearer(make_jwt("boss", f"other-{uuid.uuid4().hex[:8]}", role="admin"))
    other = _agent(client, other_org)
    taken = _ok(
        client.post(f"/api/agents/{other}/publish", json={"slug": slug}, headers=other_org), 409
    )
    assert taken["error"] == "SLUG_TAKEN"
    bad = client.post(f"/api/agents/{other}/publish", json={"slug": "No Caps!"}, headers=other_org)
    assert bad.status_code == 422


def test_a_visitor_talks_to_the_chat_and_reads_only_its_own_threads(
    client: Client, auth: dict[str, str]
) -> None:
    agent = _agent(client, auth)
    slug = _publish(client, auth, agent, welcomeMessage="Welcome")["slug"]
    face = _ok(client.get(f"/api/public/chat/{slug}"))
    assert set(face) == {
        "slug",
        "title",
        "description",
        "welcome_message",
        "starter_prompts",
        "identity_required",
    }
    assert (face["welcome_message"], face["identity_required"]) == ("Welcome", False)
    alice = _session(client, slug)
    thread = _visitor_thread(client, slug, alice)
    r = client.post(
        f"/api/public/chat/{slug}/threads/{thread}/messages",
        json={"content": "**hello** there"},
        headers=alice,
    )
    assert r.status_code == 200, r.text
    events = parse(r.text)
    assert next(e.event for e in events) == "meta"
    assert events[-1].event == "done"
    assert "**hello** there" in "".join(e.data["delta"] for e in events if e.event == "token")
    history = _ok(client.get(f"/api/public/chat/{slug}/threads/{thread}/messages", headers=alice))
    assert [m["role"] for m in history["messages"]] == ["user", "assistant"]
    assert set(history["messages"][0]) == {"id", "role", "content", "created_at"}
    # another visitor: none of alice's threads
    bob = _session(client, slug)
    for method, path in (
        ("GET", f"/threads/{thread}/messages"),
        ("POST", f"/threads/{thread}/stop"),
    ):
        assert (
            client.request(method, f"/api/public/chat/{slug}{path}", headers=bob).status_code == 404
        )
    stolen = client.post(
        f"/api/public/chat/{slug}/threads/{thread}/messages", json={"content": "hi"}, headers=bob
    )
    assert stolen.status_code == 404
    # an ordinary thread of the organization is not a visitor's either
    own = _ok(client.post("/api/threads", json={"agentId": agent}, headers=auth))["id"]
    assert (
        client.get(f"/api/public/chat/{slug}/threads/{own}/messages", headers=alice).status_code
        == 404
    )
    # no token, a wrong one, a token on the organization's API
    assert client.post(f"/api/public/chat/{slug}/threads", json={}).status_code == 401
    forged = bearer("vt_v1.k.AAAA")
    assert (
        client.post(f"/api/public/chat/{slug}/threads", json={}, headers=forged).status_code == 401
    )
    assert client.get("/api/agents", headers=alice).status_code == 401
    assert client.get(f"/api/threads/{thread}/messages", headers=alice).status_code == 401
    # the owner sees the visitor's thread, with its visitor and its usage
    seen = _ok(client.get(f"/api/agents/{agent}/publish/threads", headers=auth))
    assert [(t["thread_id"], t["kind"], t["identified"]) for t in seen["threads"]] == [
        (thread, "visitor", False)
    ]
    assert seen["threads"][0]["visitor_id"].startswith("anon-")
    assert _ok(client.get(f"/api/threads/{thread}/messages", headers=auth))["total"] == 2
    owned = _ok(client.get(f"/api/threads/{thread}", headers=auth))
    assert owned["metadata"] == {
        "visitor_id": seen["threads"][0]["visitor_id"],
        "published_chat": slug,
    }


def test_a_visitor_token_is_one_chats(client: Client, auth: dict[str, str]) -> None:
    first = _publish(client, auth, _agent(client, auth))["slug"]
    second = _publish(client, auth, _agent(client, auth))["slug"]
    who = _session(client, first)
    assert (
        client.post(f"/api/public/chat/{second}/threads", json={}, headers=who).status_code == 401
    )


def test_only_the_chats_sites_may_use_it(client: Client, auth: dict[str, str]) -> None:
    slug = _publish(client, auth, _agent(client, auth))["slug"]
    allowed = client.get(f"/api/public/chat/{slug}", headers={"Origin": SITE})
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == SITE
    refused = client.get(f"/api/public/chat/{slug}", headers={"Origin": "https://evil.example"})
    assert refused.status_code == 403
    assert "access-control-allow-origin" not in refused.headers
    session = client.post(
        f"/api/public/chat/{slug}/sessions", json={}, headers={"Origin": "https://evil.example"}
    )
    assert session.status_code == 403
    pre = client.options(
        f"/api/public/chat/{slug}/sessions",
        headers={"Origin": SITE, "Access-Control-Request-Method": "POST"},
    )
    assert pre.status_code == 204
    assert pre.headers["access-control-allow-origin"] == SITE
    assert "Authorization" in pre.headers["access-control-allow-headers"]
    evil = client.options(
        f"/api/public/chat/{slug}/sessions",
        headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
    )
    assert "access-control-allow-origin" not in evil.headers
    # no list of its own: the organization's embed domains
    org_default = _publish(client, auth, _agent(client, auth), allowedDomains=None)["slug"]
    assert (
        client.get(f"/api/public/chat/{org_default}", headers={"Origin": SITE}).status_code == 403
    )
    _ok(
        client.post(
            "/api/orgs/settings", json={"allowedEmbedDomains": ["shop.example.com"]}, headers=auth
        )
    )
    assert (
        client.get(f"/api/public/chat/{org_default}", headers={"Origin": SITE}).status_code == 200
    )


def test_a_private_chat_admits_only_signed_visitors(client: Client, auth: dict[str, str]) -> None:
    agent = _agent(client, auth)
    made = _publish(client, auth, agent, visibility="private")
    slug, secret = made["slug"], made["identity_secret"]
    assert _ok(client.get(f"/api/public/chat/{slug}"))["identity_required"] is True
    assert client.post(f"/api/public/chat/{slug}/sessions", json={}).status_code == 401
    expires = int(time.time()) + 600
    signed = {
        "visitorId": "user-42",
        "expiresAt": expires,
        "signature": _sign(secret, "user-42", expires),
    }
    session = _ok(client.post(f"/api/public/chat/{slug}/sessions", json=signed), 201)
    assert (session["visitor_id"], session["identified"]) == ("user-42", True)
    wrong = {**signed, "signature": _sign("pcs_not-the-secret", "user-42", expires)}
    assert client.post(f"/api/public/chat/{slug}/sessions", json=wrong).status_code == 401
    other = {**signed, "visitorId": "user-43"}
    assert client.post(f"/api/public/chat/{slug}/sessions", json=other).status_code == 401
    far = int(time.time()) + 25 * 3600
    too_long = {"visitorId": "u", "expiresAt": far, "signature": _sign(secret, "u", far)}
    assert client.post(f"/api/public/chat/{slug}/sessions", json=too_long).status_code == 401
    past = int(time.time()) - 1
    expired = {"visitorId": "u", "expiresAt": past, "signature": _sign(secret, "u", past)}
    assert client.post(f"/api/public/chat/{slug}/sessions", json=expired).status_code == 401
    partial = {"visitorId": "u"}
    assert client.post(f"/api/public/chat/{slug}/sessions", json=partial).status_code == 422
    # a rotation shows the new secret once; the old one still signs for an hour
    rotated = _ok(
        client.patch(
            f"/api/agents/{agent}/publish", json={"rotateIdentitySecret": True}, headers=auth
        )
    )
    new = rotated["identity_secret"]
    assert new != secret
    assert rotated["identity_secret_rotated_at"] is not None
    assert "identity_secret" not in _ok(client.get(f"/api/agents/{agent}/publish", headers=auth))
    for key in (new, secret):
        body = {"visitorId": "v", "expiresAt": expires, "signature": _sign(key, "v", expires)}
        assert client.post(f"/api/public/chat/{slug}/sessions", json=body).status_code == 201
    # an anonymous visitor's token of the chat made private later is refused
    public = _publish(client, auth, _agent(client, auth))
    anon = _session(client, public["slug"])
    owner = public["agent_id"]
    _ok(client.patch(f"/api/agents/{owner}/publish", json={"visibility": "private"}, headers=auth))
    assert (
        client.post(f"/api/public/chat/{public['slug']}/threads", json={}, headers=anon).status_code
        == 401
    )


def test_the_daily_cost_cap_refuses_sends(client: Client, auth: dict[str, str]) -> None:
    agent = _agent(client, auth)
    slug = _publish(client, auth, agent, dailyCostCapUsd=0)["slug"]
    who = _session(client, slug)
    thread = _visitor_thread(client, slug, who)
    r = client.post(
        f"/api/public/chat/{slug}/threads/{thread}/messages", json={"content": "hi"}, headers=who
    )
    assert r.status_code == 429, r.text
    assert r.json()["error"] == "DAILY_COST_CAP_REACHED"
    assert int(r.headers["retry-after"]) >= 1
    shown = _ok(client.get(f"/api/agents/{agent}/publish", headers=auth))
    assert shown["cap_reached"] is True
    # analytics says why: the chat's spending today against its cap
    report = _ok(client.get("/api/analytics", params={"agentId": agent}, headers=auth))
    assert report["published_chats"] == [
        {
            "agent_id": agent,
            "slug": slug,
            "is_active": True,
            "daily_cost_cap_usd": 0.0,
            "cost_today_usd": 0.0,
            "cap_reached": True,
        }
    ]
    other = _ok(client.get("/api/analytics", params={"agentId": str(uuid.uuid4())}, headers=auth))
    assert other["published_chats"] == []
    # no cap: sends go
    _ok(client.patch(f"/api/agents/{agent}/publish", json={"dailyCostCapUsd": None}, headers=auth))
    ok = client.post(
        f"/api/public/chat/{slug}/threads/{thread}/messages", json={"content": "hi"}, headers=who
    )
    assert ok.status_code == 200, ok.text


def test_rate_limits_per_visitor(client: Client, auth: dict[str, str]) -> None:
    slug = _publish(client, auth, _agent(client, auth), rateLimitPerMin=2)["slug"]
    who = _session(client, slug)
    _visitor_thread(client, slug, who)
    r = client.post(f"/api/public/chat/{slug}/threads", json={}, headers=who)
    assert r.status_code == 429, r.text
    assert r.json()["error"] == "RATE_LIMITED"
    assert int(r.headers["retry-after"]) >= 1


def test_the_public_marketplace_lists_listed_agents_with_a_public_chat(
    client: Client, auth: dict[str, str]
) -> None:
    word = uuid.uuid4().hex[:10]
    listed = _agent(client, auth, "Listed")
    _ok(
        client.put(
            f"/api/agents/{listed}/marketplace",
            json={
                "displayName": f"Travel {word}",
                "tagline": "Plans trips",
                "listed": True,
                "categories": ["travel"],
            },
            headers=auth,
        )
    )
    slug = _publish(client, auth, listed)["slug"]
    hidden = _agent(client, auth, "Unlisted chat")
    _ok(
        client.put(
            f"/api/agents/{hidden}/marketplace",
            json={"displayName": f"Hidden {word}", "listed": True},
            headers=auth,
        )
    )
    _publish(client, auth, hidden, visibility="unlisted")
    page = _ok(client.get("/api/public/marketplace", params={"q": word}))
    assert [a["slug"] for a in page["agents"]] == [slug]
    entry = page["agents"][0]
    assert set(entry) == {
        "agent_id",
        "slug",
        "chat_url",
        "handle",
        "display_name",
        "tagline",
        "description",
        "categories",
        "capabilities",
        "avatar_url",
        "published_at",
    }
    assert page["nextCursor"] is None
    assert (
        _ok(client.get("/api/public/marketplace", params={"q": word, "category": "food"}))["agents"]
        == []
    )
    assert (
        len(
            _ok(client.get("/api/public/marketplace", params={"q": word, "category": "travel"}))[
                "agents"
            ]
        )
        == 1
    )
    _ok(client.patch(f"/api/agents/{listed}/publish", json={"isActive": False}, headers=auth))
    assert _ok(client.get("/api/public/marketplace", params={"q": word}))["agents"] == []
