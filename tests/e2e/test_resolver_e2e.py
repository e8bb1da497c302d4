"""Bring-your-own-key end to end: the real service, the fake 'beta' provider, and a
resolver on loopback that checks every signature with the docs' receiver
(docs/examples/resolver_receiver.py, written from docs/byok.md, "Verifying the
signature", not from the service's code)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import jwt
import psycopg
import pytest

from tests.e2e.receivers import load_example, read_request
from tests.e2e.secret_scan import SCAN
from tests.e2e.service import Service, client, new_org
from tests.fakes.providers import FakeProvider, Reply, ToolCallSpec
from tests.mcp_servers.server import HttpMcpServer
from tests.sse import names, parse
from tests.web.live import serve

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

receiver_example = load_example("resolver_receiver")

PLATFORM_KEY = "sk-platform-key-0123456789"
JWT_SECRET = "resolver-e2e-jwt-secret-0123456789abcdefghijklmnop"


class Resolver:
    """Answers by mode; records every call and whether its signature verified."""

    def __init__(self) -> None:
        self.mode = "key"
        self.secrets: list[str] = []
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body, headers = await read_request(scope, receive)
        sigs = headers.get("x-service-signature", "").split()
        # Each secret is judged on its own against the receiver's nonce store as it
        # stood before this call, so that the second secret of a rotation does not see
        # this call's own nonce as a replay; the store keeps every earlier call's nonce
        # (for the whole session), so a nonce the service repeats fails verification.
        seen_before = dict(receiver_example._seen_nonces)
        verdicts = {}
        for secret in self.secrets:
            receiver_example._seen_nonces.clear()
            receiver_example._seen_nonces.update(seen_before)
            verdicts[secret] = receiver_example.verify(secret, headers, body) is None
        self.calls.append(
            {"body": body, "headers": headers, "verdicts": verdicts, "signatures": sigs}
        )
        status, payload, extra = 200, b'{"apiKey": "sk-alice-own-key", "source": "byok"}', []
        if self.mode == "null":
            payload = b'{"apiKey": null, "source": "platform"}'
        elif self.mode == "error":
            status = 500
        elif self.mode == "slow":
            await asyncio.sleep(5)
        elif self.mode == "redirect":
            status, extra = 302, [(b"location", b"http://127.0.0.1:1/elsewhere")]
        elif self.mode == "huge":
            payload = b'{"apiKey": "' + b"x" * 200_000 + b'"}'
        elif self.mode == "malformed":
            payload = b"<html>not json</html>"
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), *extra],
            }
        )
        await send({"type": "http.response.body", "body": payload})


@pytest.fixture(scope="module")
def served(
    own_pg_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Service, FakeProvider, Resolver, str]]:
    """One service for the module (on a database of its own: memory collection's
    job must run in this service), the fake provider and the resolver it calls."""
    SCAN.secret("sk-alice-own-key", "a BYOK key the resolver returned")
    tmp = tmp_path_factory.mktemp("resolver")
    resolver = Resolver()
    fake = FakeProvider("beta")
    base = fake.start()
    svc = Service(
        {
            "AGENTSVC_DATABASE_URL": own_pg_url,
            "AGENTSVC_BOOTSTRAP_API_KEY": f"ask_e2e_{uuid.uuid4().hex}",
            "AGENTSVC_BOOTSTRAP_ORG": f"byok-{uuid.uuid4().hex[:8]}",
            "AGENTSVC_BETA_BASE_URL": f"{base}/v1",
            "AGENTSVC_BETA_API_KEY": PLATFORM_KEY,
            "AGENTSVC_ALLOW_PRIVATE_NETWORK": "true",
            "AGENTSVC_JWT_SECRET": JWT_SECRET,
            "AGENTSVC_DATA_DIR": str(tmp / "data"),
        },
        log=tmp / "svc.log",
    )
    with serve(resolver) as resolver_url:
        try:
            svc.wait_ready()
            yield svc, fake, resolver, resolver_url
        finally:
            svc.stop()
            fake.stop()


@pytest.fixture
def world(
    served: tuple[Service, FakeProvider, Resolver, str], own_pg_url: str
) -> Iterator[dict[str, Any]]:
    """Each test: an organization of its own (its signing secret, its admin and
    Alice), the resolver answering with Alice's key, the fake with nothing scripted."""
    svc, fake, resolver, resolver_url = served
    resolver.mode, resolver.secrets, resolver.calls = "key", [], []
    fake.reset()
    org, key = new_org(svc.url, JWT_SECRET, "byok")
    admin = client(svc, key, timeout=30)
    alice_token = jwt.encode(
        {"sub": "alice", "org_id": org, "exp": int(time.time()) + 3600},
        JWT_SECRET,
        algorithm="HS256",
    )
    alice = client(svc, alice_token, timeout=30)
    yield {
        "svc": svc,
        "admin": admin,
        "alice": alice,
        "fake": fake,
        "resolver": resolver,
        "url": f"{resolver_url}/resolve",
        "pg": own_pg_url,
    }
    admin.close()
    alice.close()
    log = svc.log_path.read_text(errors="replace")
    assert "sk-alice-own-key" not in log, "the user's key leaked into the log"


def setup_agent(w: dict[str, Any], **config: Any) -> tuple[str, str]:
    admin = w["admin"]
    w["resolver"].secrets = [admin.get("/api/orgs/settings").json()["signing_secret"]]
    agent = admin.post("/api/agents", json={"name": "BYOK", "defaultModel": "gpt-byok"}).json()
    r = admin.put(
        f"/api/agents/{agent['id']}/credentials",
        json={"enabled": True, "resolverUrl": w["url"], "timeoutMs": 1000, **config},
    )
    assert r.status_code == 200, r.text
    thread = w["alice"].post("/api/threads", json={"agentId": agent["id"]}).json()
    return agent["id"], thread["id"]


def key_sources(pg_url: str, thread_id: str) -> list[str]:
    with psycopg.connect(pg_url) as db:
        rows = db.execute(
            "SELECT key_source FROM usage_records WHERE thread_id = %s ORDER BY created_at",
            (thread_id,),
        ).fetchall()
    return [r[0] for r in rows]


def test_the_users_key_serves_the_call_and_every_signature_verifies(world: dict[str, Any]) -> None:
    agent_id, tid = setup_agent(world)
    r = world["alice"].post(f"/api/threads/{tid}/messages", json={"content": "hello"})
    assert names(parse(r.text))[-1] == "done"
    assert world["fake"].requests[-1].headers["authorization"] == "Bearer sk-alice-own-key"
    call = world["resolver"].calls[-1]
    assert all(call["verdicts"].values())
    sent = json.loads(call["body"])
    assert set(sent) == {"userId", "orgId", "provider", "model"}
    assert (sent["userId"], sent["provider"], sent["model"]) == ("alice", "beta", "gpt-byok")
    assert key_sources(world["pg"], tid) == ["byok"]
    config = world["admin"].get(f"/api/agents/{agent_id}/credentials").json()
    assert config == {
        "agent_id": agent_id,
        "org_id": config["org_id"],
        "enabled": True,
        "resolver_url": world["url"],
        "timeout_ms": 1000,
    }


def test_every_attempt_has_a_fresh_nonce_and_timestamp(world: dict[str, Any]) -> None:
    """Every attempt carries a fresh nonce and timestamp (the receiver of docs/byok.md
    refuses a replayed nonce and a stale timestamp). The receiver keeps the
    nonces it has seen, so a repeated nonce is refused as a replay; the timestamp is
    compared across two attempts made in different seconds."""
    _, tid = setup_agent(world)
    calls = world["resolver"].calls
    first = len(calls)
    for n in range(3):
        r = world["alice"].post(f"/api/threads/{tid}/messages", json={"content": f"hi {n}"})
        assert names(parse(r.text))[-1] == "done"
        if n == 1:
            # the next attempt starts in a later second than the ones before
            stamp = int(calls[-1]["headers"]["x-service-timestamp"])
            deadline = time.monotonic() + 3
            while time.time() < stamp + 1:
                assert time.monotonic() < deadline
                time.sleep(0.05)
    made = calls[first:]
    assert len(made) == 3
    assert [all(c["verdicts"].values()) for c in made] == [True, True, True]
    nonces = [c["headers"]["x-service-nonce"] for c in made]
    assert len(set(nonces)) == 3, nonces
    assert all(str(uuid.UUID(n)) == n for n in nonces)
    stamps = [int(c["headers"]["x-service-timestamp"]) for c in made]
    assert stamps[2] > stamps[1], stamps
    assert all(abs(s - time.time()) < 60 for s in stamps)
    assert key_sources(world["pg"], tid) == ["byok"] * 3


@pytest.mark.parametrize("mode", ["null", "error", "redirect", "huge", "malformed"])
def test_every_fallback_uses_the_platform_key(world: dict[str, Any], mode: str) -> None:
    _, tid = setup_agent(world)
    world["resolver"].mode = mode
    r = world["alice"].post(f"/api/threads/{tid}/messages", json={"content": "hi"})
    assert names(parse(r.text))[-1] == "done"
    assert world["fake"].requests[-1].headers["authorization"] == f"Bearer {PLATFORM_KEY}"
    assert key_sources(world["pg"], tid) == ["platform"]


def test_a_slow_resolver_is_cut_off_at_its_timeout(world: dict[str, Any]) -> None:
    _, tid = setup_agent(world, timeoutMs=500)
    world["resolver"].mode = "slow"  # answers after 5 s
    t0 = time.monotonic()
    r = world["alice"].post(f"/api/threads/{tid}/messages", json={"content": "hi"})
    elapsed = time.monotonic() - t0
    assert names(parse(r.text))[-1] == "done"
    assert elapsed < 0.5 + 1.0, elapsed
    assert world["fake"].requests[-1].headers["authorization"] == f"Bearer {PLATFORM_KEY}"


def test_rotation_sends_both_signatures_during_the_grace_period(world: dict[str, Any]) -> None:
    _, tid = setup_agent(world)
    old = world["resolver"].secrets[0]
    new = (
        world["admin"]
        .post("/api/orgs/settings", json={"rotateSigningSecret": True})
        .json()["signing_secret"]
    )
    assert new != old
    world["resolver"].secrets = [new, old]
    world["alice"].post(f"/api/threads/{tid}/messages", json={"content": "after rotation"})
    call = world["resolver"].calls[-1]
    assert len(call["signatures"]) == 2
    assert call["verdicts"] == {new: True, old: True}


def test_invalid_configurations_are_422(world: dict[str, Any]) -> None:
    admin = world["admin"]
    agent = admin.post("/api/agents", json={"name": "x"}).json()
    url = f"/api/agents/{agent['id']}/credentials"
    assert admin.get(url).json() == {
        "agent_id": agent["id"],
        "org_id": agent["org_id"],
        "enabled": False,
        "resolver_url": "",
        "timeout_ms": 5000,
    }
    for body in (
        {"enabled": True},
        {"enabled": True, "resolverUrl": "ftp://x.example/r"},
        {"enabled": False, "timeoutMs": 50},
        {"enabled": False, "timeoutMs": 60000},
        {"resolverUrl": "https://x.example"},
    ):
        r = admin.put(url, json=body)
        assert (r.status_code, r.json()["error"]) == (422, "VALIDATION_ERROR"), (body, r.text)
    assert world["alice"].get("/api/orgs/settings").status_code == 403


def test_one_resolver_call_serves_a_turn_with_tool_steps_and_its_summary(
    world: dict[str, Any],
) -> None:
    """The resolver is called once per message, not per model call (docs/byok.md): a turn
    with a compaction summary and three server tool steps (five model calls) makes one
    signed call; every call is paid with the user's key and recorded as byok."""
    admin, alice, fake = world["admin"], world["alice"], world["fake"]
    agent_id, tid = setup_agent(world)
    for i in range(3):  # a history long enough to summarise (3 x ~2,000 characters)
        r = alice.post(f"/api/threads/{tid}/messages", json={"content": f"{i} " + "long " * 400})
        assert names(parse(r.text))[-1] == "done"
    r = admin.put(
        f"/api/agents/{agent_id}/compaction", json={"enabled": True, "betaCompactThreshold": 1000}
    )
    assert r.status_code == 200, r.text
    mcp = HttpMcpServer("streamable_http")
    mcp.start()
    try:
        server = admin.post(
            "/api/mcps", json={"name": "Test Tools", "transport": "streamable_http", "url": mcp.url}
        ).json()
        r = admin.post(f"/api/agents/{agent_id}/mcps", json={"mcpServerId": server["id"]})
        assert r.status_code in (200, 201), r.text
        step = [
            Reply(
                text="",
                tool_calls=[ToolCallSpec(f"c{i}", "test-tools__echo", {"text": f"step {i}"})],
            )
            for i in range(3)
        ]
        fake.enqueue(Reply(text="The summary."), *step, Reply(text="All three steps done."))
        calls_before, requests_before = len(world["resolver"].calls), len(fake.requests)
        r = alice.post(f"/api/threads/{tid}/messages", json={"content": "now the tools"})
        events = parse(r.text)
        assert names(events)[-1] == "done", r.text
        assert [e.data["result"] for e in events if e.event == "tool_result"] == [
            "step 0",
            "step 1",
            "step 2",
        ]
    finally:
        mcp.stop()
    turn_requests = fake.requests[requests_before:]
    assert len(turn_requests) == 5  # the summary, three tool steps, the answer
    assert {q.headers["authorization"] for q in turn_requests} == {"Bearer sk-alice-own-key"}
    assert len(world["resolver"].calls) - calls_before == 1
    sources = key_sources(world["pg"], tid)
    assert sources[-5:] == ["byok"] * 5  # the summary's record too


def test_memory_collection_after_a_turn_pays_with_the_users_key(world: dict[str, Any]) -> None:
    """auto_collect: after Alice's turn, a background job asks the agent's model
    (the same router, Alice's key from the signed resolver) for the facts worth
    keeping; each memory_save call is saved and the call's usage is recorded."""
    agent_id, tid = setup_agent(world)
    admin, fake = world["admin"], world["fake"]
    r = admin.put(f"/api/agents/{agent_id}/memory", json={"autoCollect": True})
    assert r.json()["auto_collect"] is True
    fake.enqueue(
        Reply(text="Noted, no meat then."),
        Reply(
            text="",
            tool_calls=[
                ToolCallSpec(
                    "c1", "memory_save", {"content": "Alice is vegetarian", "key": "diet"}
                ),
                # a scope named in the call is not the model's to choose (the
                # transcript is the user's text): the fact goes to Alice's scope
                ToolCallSpec(
                    "c2",
                    "memory_save",
                    {"content": "Releases ship on Fridays", "key": "release", "scope": "agent"},
                ),
                ToolCallSpec("c3", "memory_save", {"key": "no content"}),  # malformed: skipped
            ],
        ),
    )
    r = world["alice"].post(
        f"/api/threads/{tid}/messages",
        json={"content": "I am vegetarian", "metadata": {"team": "kitchen"}},
    )
    assert names(parse(r.text))[-1] == "done"
    deadline = time.monotonic() + 20
    memories: list[dict[str, Any]] = []
    while len(memories) < 2 and time.monotonic() < deadline:
        memories = admin.get(f"/api/agents/{agent_id}/memories").json()["memories"]
        time.sleep(0.05)
    got = {(m["content"], m["key"], m["scope"], m["scope_id"]) for m in memories}
    assert got == {
        ("Alice is vegetarian", "diet", "user", "alice"),
        ("Releases ship on Fridays", "release", "user", "alice"),
    }
    collect = fake.requests[-1]
    assert collect.headers["authorization"] == "Bearer sk-alice-own-key"
    body = collect.json
    assert body["model"] == "gpt-byok"
    assert [t["function"]["name"] for t in body["tools"]] == ["memory_save"]
    assert set(body["tools"][0]["function"]["parameters"]["properties"]) == {"content", "key"}
    assert body["messages"][0]["role"] == "system"
    assert body["messages"][0]["content"].startswith("You keep an assistant's long-term memory.")
    said = body["messages"][-1]["content"]
    assert "user: I am vegetarian" in said
    assert "assistant: Noted, no meat then." in said
    assert all(all(c["verdicts"].values()) for c in world["resolver"].calls[-2:])
    with psycopg.connect(world["pg"]) as db:
        rows = db.execute(
            "SELECT purpose, key_source, metadata->>'team' FROM usage_records WHERE thread_id = %s"
            " ORDER BY created_at",
            (tid,),
        ).fetchall()
    assert rows == [("reply", "byok", "kitchen"), ("memory", "byok", "kitchen")]
