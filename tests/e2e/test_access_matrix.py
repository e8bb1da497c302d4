"""The standing cross-organization and role matrix (docs/security.md, "Organizations are
walls" and "Roles").

Generated from the served OpenAPI document, so a route added later is covered
without anyone remembering to add it. Organization A owns one of everything;

- another organization's API key and admin JWT call every operation that names an
  id (in its path, or as a reference in its body) with A's ids and get 404
  ``NOT_FOUND``, exactly as for an id that exists nowhere;
- A's member (a JWT without the admin role) gets 403 ``FORBIDDEN`` on every
  operation the document marks as needing the admin role;
- nothing of A (its ids, its names, its message text) is in any answer the other
  organization gets: bodies, lists, counts, errors and streams.

Bodies are the smallest valid instance of each operation's request schema, with A's
ids where a field refers to a resource, so that the answer is about access, not
about validation. Everything here talks to the service on loopback; the MCP
server A registers is on loopback too and is never contacted.
"""

from __future__ import annotations

import io
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from PIL import Image
from psycopg.conninfo import conninfo_to_dict

from agentsvc_adapters.signing import sign
from tests.e2e.conftest import E2E_JWT_SECRET
from tests.e2e.service import running
from tests.pg import reader_role
from tests.sse import Event, parse_lines

pytestmark = pytest.mark.e2e

ORG_A, ORG_B = "matrix-a", "matrix-b"
KEY_A = "ask_matrix_org_a_0123456789abcdefghij"
MARK = "zz-matrix-marker-of-org-a"  # in every name and text A owns

# Path and body fields that name a resource, and the kind of resource.
ID_FIELDS = {
    "agent_id": "agent",
    "agentId": "agent",
    "thread_id": "thread",
    "mcp_id": "mcp",
    "mcpServerId": "mcp",
    "key_id": "key",
    "runner_id": "runner",
    "trace_id": "trace",
    "tool_id": "tool",
    "integration_id": "integration",
    "integrationId": "integration",
    "threadId": "thread",
    "plan_id": "plan",
    "todo_id": "todo",
    "dependsOn": "todo",
    "memory_id": "memory",
    "document_id": "document",
    "trigger_id": "trigger",
    "run_id": "run",
    "token": "webhook_token",
    "suggestionId": "suggestion",
    "project_id": "project",
    "projectId": "project",
    "sha256": "avatar",
    "slug": "chat_slug",
    "skill_id": "skill",
    "skillId": "skill",
    "channel_id": "channel",
    "contact_id": "contact",
    "channel_type": "channel_type",
    "instance_id": "computer_instance",
    "code_agent_id": "code_agent",
    "codeAgentId": "code_agent",
    "session_id": "code_session",
    "model_id": "model",
    "user_id": "user",
    "message_id": "message",
    "messageId": "message",
    "endpoint_id": "webhook_endpoint",
    "delivery_id": "webhook_delivery",
}

# Operations whose answer to another organization is not 404, and why. Each must
# still leak nothing of A.
NOT_404 = {
    # Public: the token (which starts runs of one runner and nothing else) is what
    # authenticates it, whoever holds it (tests/web/test_runners_api.py)
    "runnerWebhook": "authenticated by its token",
    # Public: the single-use state authenticates it, not a bearer token
    # (tests/web/test_mcp_oauth.py); any state B could send is 400.
    "mcpOAuthCallback": "authenticated by its state",
    "managedMcpOAuthCallback": "authenticated by its state",
    # Public: a marketplace avatar, reached by its URL (the agent's id and the
    # picture's digest); a picture holds none of A's text
    "getPublicAvatar": "a public picture",
    # Public: a published chat's face and its visitor sessions are for anyone (the
    # chat shows no text of A's but what its owner published); the visitor routes
    # take a visitor token, and B's credentials are refused (401) before any id is
    # looked up (tests/e2e/test_publishing_e2e.py: a visitor reaches its own threads)
    "getPublicChat": "public by purpose",
    "startVisitorSession": "public by purpose",
    "createVisitorThread": "authenticated by a visitor token",
    "sendVisitorMessage": "authenticated by a visitor token",
    "stopVisitorThread": "authenticated by a visitor token",
    "listVisitorMessages": "authenticated by a visitor token",
    # Public: a channel's inbound endpoint; the platform's proof (here the generic
    # channel's signature, which B cannot make) authenticates it: B's call is 401
    # (POST) or 405 (GET, which the generic channel does not take), never A's data
    "channelWebhook": "authenticated by the platform's signature",
    "channelWebhookCheck": "authenticated by the platform's proof",
    # A model id names no resource of an organization's: the deployment's models are
    # the same for every one (docs/models.md#listing)
    "getModel": "the deployment's, not an organization's",
    # A user id names no resource: it is read within the caller's organization, so
    # another organization erases and exports its own user of that id (nothing of A:
    # zeros, and an empty document; tests/e2e/test_erasure_e2e.py)
    "eraseUserData": "a user of the caller's organization",
    "exportUserData": "a user of the caller's organization",
}


def _jwt(sub: str, org: str, **claims: Any) -> str:
    return jwt.encode(
        {"sub": sub, "org_id": org, "exp": int(time.time()) + 3600, **claims},
        E2E_JWT_SECRET,
        algorithm="HS256",
    )


class World:
    """Organization A's resources, and the callers of the matrix."""

    def __init__(self, url: str, database_url: str, db_role: str) -> None:
        self.url = url
        self.database_url = database_url
        self.db_role = db_role
        self.a = httpx.Client(base_url=url, headers=_h(KEY_A), timeout=30)
        self.ids: dict[str, str] = {}

    def build(self) -> None:
        a = self.a
        project = _ok(a.post("/api/projects", json={"name": f"project {MARK}"}))
        self.ids["project"] = project["id"]
        # an event webhook endpoint for every event (on the loopback discard port:
        # its deliveries fail and wait for their retries)
        endpoint = _ok(
            a.post(
                "/api/webhooks",
                json={
                    "url": "http://127.0.0.1:9/events",
                    "events": [t["type"] for t in a.get("/api/webhooks/event-types").json()],
                    "description": f"endpoint {MARK}",
                },
            )
        )
        self.ids["webhook_endpoint"] = endpoint["endpoint"]["id"]
        agent = _ok(
            a.post("/api/agents", json={"name": f"agent {MARK}", "projectId": project["id"]})
        )
        self.ids["agent"] = agent["id"]
        # a marketplace profile with a handle and an avatar
        _ok(a.put(f"/api/agents/{agent['id']}/marketplace", json={"tagline": f"tag {MARK}"}))
        png = io.BytesIO()
        Image.new("RGB", (8, 8)).save(png, format="PNG")
        profile = _ok(
            a.post(
                f"/api/agents/{agent['id']}/marketplace/avatar",
                files={"file": ("a.png", png.getvalue(), "image/png")},
            )
        )
        self.ids["avatar"] = profile["avatar_url"].rsplit("/", 1)[1]
        # a published chat (its public face carries none of A's marked text)
        chat = _ok(
            a.post(
                f"/api/agents/{agent['id']}/publish",
                json={"slug": "zz-matrix-chat-a", "title": "Matrix chat"},
            )
        )
        self.ids["chat_slug"] = chat["slug"]
        mcp = _ok(
            a.post(
                "/api/mcps",
                json={
                    "name": f"mcp {MARK}",
                    "transport": "streamable_http",
                    "url": "http://127.0.0.1:9/mcp",  # loopback discard port: never called
                    "credentials": {"headers": {"X-Api-Key": f"mcp-secret-{MARK}"}},
                },
            )
        )
        self.ids["mcp"] = mcp["id"]
        thread = _ok(
            a.post(
                "/api/threads",
                json={"agentId": agent["id"], "title": f"thread {MARK}", "kind": "multiplayer"},
            )
        )
        self.ids["thread"] = thread["id"]
        _ok(a.post(f"/api/threads/{thread['id']}/participants", json={"userId": "carol"}))
        self.ids["user"] = "carol"  # a user of A's (their data: /api/users/{user_id})
        said = {"content": f"hello {MARK}", "senderId": "carol"}
        with a.stream("POST", f"/api/threads/{thread['id']}/messages", json=said) as r:
            assert r.status_code == 200, r.read()
            text = r.read().decode()
            assert "event: done" in text
        # the turn's stored trace (GET /api/logs/{traceId})
        self.ids["trace"] = text.split('"traceId":"', 1)[1][:32]
        # a message of the thread (edit, branch, fork name one)
        history = _ok(a.get(f"/api/threads/{thread['id']}/messages"))
        self.ids["message"] = history["messages"][0]["id"]
        # the message's delivery to the endpoint
        deliveries = f"/api/webhooks/{self.ids['webhook_endpoint']}/deliveries"
        self.ids["webhook_delivery"] = _ok(a.get(deliveries))["deliveries"][0]["id"]
        # a stored multiplayer configuration (its thread's events: GET .../events)
        _ok(a.put(f"/api/agents/{agent['id']}/multiplayer", json={"displayName": f"mp {MARK}"}))
        # a memory the model saved (before the MCP server is attached, as the reply above)
        _ok(a.put(f"/api/agents/{agent['id']}/memory", json={"enabled": True}))
        save = {
            "content": f'call memory_save {{"content": "memory {MARK}", "key": "k"}}',
            "senderId": "carol",
        }
        with a.stream("POST", f"/api/threads/{thread['id']}/messages", json=save) as r:
            assert r.status_code == 200, r.read()
            assert "event: tool_result" in r.read().decode()
        self.ids["memory"] = _ok(a.get(f"/api/agents/{agent['id']}/memories"))["memories"][0]["id"]
        self._computer(agent["id"], thread["id"])
        # attached after the reply, so the turn never lists the (unreachable) server's tools
        _ok(a.post(f"/api/agents/{agent['id']}/mcps", json={"mcpServerId": mcp["id"]}))
        plan = _ok(a.post("/api/plans", json={"threadId": thread["id"], "title": f"plan {MARK}"}))
        self.ids["plan"] = plan["id"]
        todos = [{"content": f"todo {MARK}"}, {"content": f"next {MARK}"}]
        plan = _ok(a.post(f"/api/plans/{plan['id']}/todos", json={"todos": todos}))
        self.ids["todo"] = plan["todos"][0]["id"]
        _ok(
            a.post(
                f"/api/plans/{plan['id']}/todos/{plan['todos'][1]['id']}/deps",
                json={"dependsOn": self.ids["todo"]},
            )
        )
        key = _ok(a.post("/api/keys", json={"name": f"key {MARK}"}))
        self.ids["key"] = key["id"]
        tool = _ok(
            a.post(
                "/api/tools",
                json={
                    "name": f"tool_{MARK}"[:64],
                    "description": f"tool {MARK}",
                    "url": "http://127.0.0.1:9/tool",  # loopback discard port: never called
                    "headers": {"X-Api-Key": f"tool-secret-{MARK}"},
                },
            )
        )
        self.ids["tool"] = tool["id"]
        _ok(a.put(f"/api/agents/{agent['id']}/delegated", json={"toolIds": [tool["id"]]}))
        # a database integration (the service's own database, on loopback), attached
        d = conninfo_to_dict(self.database_url)
        integration = _ok(
            a.post(
                "/api/integrations",
                json={
                    "name": f"integration {MARK}",
                    "type": "postgresql",
                    "connection": f"postgresql://{self.db_role}:db-pw-{MARK}@"
                    f"{d.get('host', '127.0.0.1')}:{d.get('port', '5432')}/{d['dbname']}",
                },
            )
        )
        self.ids["integration"] = integration["id"]
        _ok(
            a.post(
                f"/api/agents/{agent['id']}/integrations",
                json={"integrationId": integration["id"]},
            )
        )
        # a knowledge document of the organization, indexed (so that searches could find it)
        upload = a.post(
            "/api/knowledge/upload",
            files={
                "file": ("notes.md", f"# Notes {MARK}\n\nzebra {MARK}\n".encode(), "text/markdown")
            },
            data={"title": f"doc {MARK}"},
        )
        assert upload.status_code == 202, upload.text
        self.ids["document"] = upload.json()["id"]
        _indexed(a, self.ids["document"])
        self._runner(agent["id"], mcp["id"])
        self._channel(agent["id"])
        self._code_session()

    def _code_session(self) -> None:
        """A code agent (with a git credential) and a session of it on a loopback
        repository nobody serves: its job ends it ``error``, its timeline stays."""
        a = self.a
        code_agent = _ok(
            a.post(
                "/api/code-agents",
                json={
                    "name": f"coder {MARK}",
                    "model": "local",
                    "repoUrl": "http://127.0.0.1:9/repo.git",  # the discard port
                    "gitCredential": f"git-secret-{MARK}",
                    "preamble": f"preamble {MARK}",
                },
            )
        )
        self.ids["code_agent"] = code_agent["id"]
        session = _ok(
            a.post(
                "/api/code-sessions",
                json={"codeAgentId": code_agent["id"], "prompt": f"task {MARK}"},
            )
        )
        self.ids["code_session"] = session["id"]

    def _channel(self, agent_id: str) -> None:
        """A generic webhook channel and a contact of it (a signed message, answered
        by the worker; its reply goes to the loopback discard port and fails)."""
        a = self.a
        channel = _ok(
            a.post(
                f"/api/agents/{agent_id}/channels",
                json={
                    "type": "webhook",
                    "name": f"channel {MARK}",
                    "config": {"target_url": "http://127.0.0.1:9/replies"},
                },
            )
        )
        self.ids["channel"], self.ids["channel_type"] = channel["id"], "whatsapp_web"
        self.ids["model"] = "local"  # the deployment's, like a channel type
        body = (
            f'{{"eventId": "e1", "chatId": "chat {MARK}", "senderId": "s-{MARK}",'
            f' "text": "hi {MARK}"}}'
        ).encode()
        stamp, nonce = str(int(time.time())), str(uuid.uuid4())
        signature = sign(channel["signing_secret"], stamp, nonce, body)
        headers = {
            "X-Service-Timestamp": stamp,
            "X-Service-Nonce": nonce,
            "X-Service-Signature": signature,
        }
        _ok(
            httpx.post(
                f"{self.url}/api/channels/{channel['id']}/webhook",
                content=body,
                headers=headers,
                timeout=30,
            )
        )
        contacts_url = f"/api/agents/{agent_id}/channels/{channel['id']}/contacts"
        deadline = time.monotonic() + 60
        while not (contacts := _ok(a.get(contacts_url))["contacts"]):
            assert time.monotonic() < deadline, "the channel's message was not taken"
            time.sleep(0.1)
        self.ids["contact"] = contacts[0]["id"]

    def _runner(self, agent_id: str, mcp_id: str) -> None:
        """A runner (an agent step and a webhook step with a secret header), its
        MCP server, a webhook trigger, a run, and a scheduled task of the agent."""
        a = self.a
        runner = _ok(
            a.post(
                "/api/runners",
                json={
                    "name": f"runner {MARK}",
                    "projectId": self.ids["project"],
                    "steps": [
                        {"id": "ask", "kind": "agent", "agentId": agent_id, "prompt": f"hi {MARK}"},
                        {
                            "id": "hook",
                            "kind": "webhook",
                            "url": "http://127.0.0.1:9/hook",  # loopback discard port
                            "headers": {"X-Api-Key": f"step-secret-{MARK}"},
                        },
                    ],
                },
            )
        )
        self.ids["runner"] = runner["id"]
        # a skill, given to the agent and to the runner
        skill = _ok(
            a.post(
                "/api/skills",
                json={
                    "content": f"---\nname: matrix-skill\ndescription: skill {MARK}\n---\n"
                    f"body {MARK}",
                    "files": {"notes.md": f"notes {MARK}"},
                },
            )
        )
        self.ids["skill"] = skill["id"]
        _ok(a.post(f"/api/agents/{agent_id}/skills", json={"skillIds": [skill["id"]]}))
        _ok(a.post(f"/api/runners/{runner['id']}/skills", json={"skillIds": [skill["id"]]}))
        _ok(a.post(f"/api/runners/{runner['id']}/mcps", json={"mcpServerId": mcp_id}))
        trigger = _ok(a.post(f"/api/runners/{runner['id']}/triggers", json={"kind": "webhook"}))
        self.ids["trigger"], self.ids["webhook_token"] = trigger["id"], trigger["token"]
        run = _ok(a.post(f"/api/runners/{runner['id']}/runs", json={"input": {"m": MARK}}))
        self.ids["run"] = run["id"]
        # suggestions from the runs (the local model answers with what it was sent)
        made = a.post(f"/api/runners/{runner['id']}/suggestions")
        assert made.status_code == 201, made.text
        self.ids["suggestion"] = made.json()[0]["id"]
        _ok(
            a.put(
                f"/api/agents/{agent_id}/scheduled-tasks",
                json={"tasks": [{"prompt": f"task {MARK}", "cron": "0 9 * * 1"}]},
            )
        )

    def _computer(self, agent_id: str, thread_id: str) -> None:
        """A's computer, switched on, and the instance a turn's command made when the
        service has a sandbox provider (bubblewrap); without one no instance can
        exist, and an unknown id stands in (B's calls are 404 either way)."""
        _ok(self.a.put(f"/api/agents/{agent_id}/computer", json={"enabled": True}))
        call = {"content": 'call computer_exec {"command": "true"}', "senderId": "carol"}
        with self.a.stream("POST", f"/api/threads/{thread_id}/messages", json=call) as r:
            assert r.status_code == 200, r.read()
            assert "event: tool_result" in r.read().decode()
        made = self.a.get(f"/api/agents/{agent_id}/computer-instances").json()
        self.ids["computer_instance"] = made[0]["id"] if made else str(uuid.uuid4())

    def secrets_of_a(self) -> list[str]:
        # a channel type names no resource of A's: it is in the document itself, nor
        # does a model id (the deployment's); a user id is the caller's own words (its
        # answers echo it)
        skip = ("channel_type", "model", "user")
        return [v for k, v in self.ids.items() if k not in skip] + [MARK]


def _h(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _indexed(c: httpx.Client, document_id: str) -> None:
    """Wait for the background indexing (generous: it is not what is tested)."""
    deadline = time.monotonic() + 60
    while (d := _ok(c.get(f"/api/knowledge/{document_id}")))["status"] != "ready":
        assert d["status"] != "failed", d
        assert time.monotonic() < deadline, d
        time.sleep(0.1)


def _ok(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code in (200, 201), r.text
    return r.json()  # type: ignore[no-any-return]


# --- the document -----------------------------------------------------------------


class Op:
    def __init__(self, method: str, path: str, op: dict[str, Any]) -> None:
        self.method = method.upper()
        self.path = path
        self.id = str(op["operationId"])
        self.op = op
        self.admin = op.get("security") == [{"BearerToken": ["admin"]}]
        self.public = op.get("security") == []
        self.path_ids = [p["name"] for p in op.get("parameters", []) if p.get("in") == "path"]

    def __repr__(self) -> str:
        return f"{self.method} {self.path} ({self.id})"


def _resolve(schema: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = doc["components"]["schemas"][name]
    return schema


def instance(schema: dict[str, Any], doc: dict[str, Any], ids: dict[str, str], name: str) -> Any:
    """The smallest valid value of ``schema``: required fields only, A's ids in
    fields that refer to a resource."""
    schema = _resolve(schema, doc)
    for key in ("oneOf", "anyOf"):
        if key in schema:
            options = [o for o in schema[key] if _resolve(o, doc).get("type") != "null"]
            return instance(options[0], doc, ids, name)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next(k for k in kind if k != "null")
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object":
        props = schema.get("properties", {})
        return {
            field: instance(props[field], doc, ids, field) for field in schema.get("required", [])
        }
    if kind == "array":
        items = schema.get("items", {})
        return [instance(items, doc, ids, name) for _ in range(schema.get("minItems", 0))]
    if kind == "boolean":
        return False
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if name in ID_FIELDS:
        return ids[ID_FIELDS[name]]
    if schema.get("format") == "uuid":
        return str(uuid.uuid4())
    return "m" * max(1, schema.get("minLength", 1))


def _operations(doc: dict[str, Any]) -> list[Op]:
    return [
        Op(method, path, op)
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if isinstance(op, dict) and "operationId" in op and path.startswith("/api/")
    ]


def _call(client: httpx.Client, op: Op, doc: dict[str, Any], ids: dict[str, str]) -> httpx.Response:
    path = op.path
    for name in op.path_ids:
        assert name in ID_FIELDS, f"{op}: add the path parameter {name!r} to ID_FIELDS"
        path = path.replace("{" + name + "}", ids[ID_FIELDS[name]])
    params = {
        p["name"]: instance(p.get("schema", {}), doc, ids, p["name"])
        for p in op.op.get("parameters", [])
        if p.get("in") == "query" and p.get("required")
    }
    body_schema = (
        op.op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    )
    kw: dict[str, Any] = {"params": params}
    if body_schema is not None:
        kw["json"] = instance(body_schema, doc, ids, "")
    return client.request(op.method, path, **kw)


def _refers_to_a(op: Op, doc: dict[str, Any]) -> bool:
    """Whether a call names one of A's resources (in its path or its body)."""
    if op.path_ids:
        return True
    schema = op.op.get("requestBody", {}).get("content", {}).get("application/json", {})
    if "schema" not in schema:
        return False
    body = _resolve(schema["schema"], doc)
    return any(f in ID_FIELDS for f in body.get("required", []))


# --- the fixtures -----------------------------------------------------------------


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory, pg_admin_url: str, pg_url: str, registry_url: str
) -> Iterator[World]:
    tmp: Path = tmp_path_factory.mktemp("matrix")
    # an integration's role may not be a superuser: one of its own, that may connect
    with (
        reader_role(pg_admin_url, f"db-pw-{MARK}") as role,
        running(
            {
                "AGENTSVC_STORAGE": "postgres",
                "AGENTSVC_DATABASE_URL": pg_url,
                "AGENTSVC_BOOTSTRAP_API_KEY": KEY_A,
                "AGENTSVC_BOOTSTRAP_ORG": ORG_A,
                "AGENTSVC_JWT_SECRET": E2E_JWT_SECRET,
                "AGENTSVC_MCP_REGISTRY_URL": registry_url,
                "AGENTSVC_ALLOW_PRIVATE_NETWORK": "true",
                "AGENTSVC_DATA_DIR": str(tmp / "data"),
            },
            log=tmp / "service.log",
        ) as svc,
    ):
        w = World(svc.url, pg_url, role)
        w.build()
        yield w
        w.a.close()


@pytest.fixture(scope="module")
def doc(world: World) -> dict[str, Any]:
    # (the document is made on its first read: seconds on a loaded machine)
    return httpx.get(f"{world.url}/schema/openapi.json", timeout=120).json()  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def strangers(world: World) -> Iterator[dict[str, httpx.Client]]:
    """Another organization's admin JWT and an API key it made."""
    admin_jwt = _jwt("boss-b", ORG_B, role="admin")
    made = httpx.post(f"{world.url}/api/keys", json={}, headers=_h(admin_jwt), timeout=30)
    key = _ok(made)["key"]
    clients = {
        "key of B": httpx.Client(base_url=world.url, headers=_h(key), timeout=30),
        "admin JWT of B": httpx.Client(base_url=world.url, headers=_h(admin_jwt), timeout=30),
    }
    yield clients
    for c in clients.values():
        c.close()


# --- the matrix -------------------------------------------------------------------


def test_the_document_covers_the_routes(doc: dict[str, Any]) -> None:
    ops = _operations(doc)
    assert len(ops) >= 30
    admin = {o.id for o in ops if o.admin}
    # a sample of both kinds, so that a document without roles cannot pass
    assert {"createAgent", "deleteAgent", "createMcpServer", "listKeys"} <= admin
    assert {"sendMessage", "createThread", "getAgent", "listRunnerRunEvents"}.isdisjoint(admin)
    # changing an integration is an admin's; a user's own OAuth grant is its own
    # business (read and dropped by members too, each its own: tests/web/test_mcp_oauth.py)
    assert "updateIntegration" in admin
    assert {"getMcpOAuth", "disconnectMcpOAuth", "startMcpOAuth"} <= {o.id for o in ops} - admin


def test_another_organization_gets_404_for_every_id_of_a(
    world: World, doc: dict[str, Any], strangers: dict[str, httpx.Client]
) -> None:
    checked = []
    for op in _operations(doc):
        if not _refers_to_a(op, doc) or op.id in NOT_404:
            continue
        for who, client in strangers.items():
            r = _call(client, op, doc, world.ids)
            assert (r.status_code, r.json().get("error")) == (404, "NOT_FOUND"), (
                who,
                op,
                r.text,
            )
            checked.append(op.id)
    assert len(set(checked)) >= 20, sorted(set(checked))


def test_nothing_of_a_reaches_another_organization(
    world: World, doc: dict[str, Any], strangers: dict[str, httpx.Client]
) -> None:
    """Every operation another organization may call without naming A's ids
    (lists, counts, searches) and every 404 answer: none holds A's ids or text."""
    seen = 0
    for op in _operations(doc):
        if op.public:
            continue
        if op.method != "GET" and not _refers_to_a(op, doc):
            continue  # B's own writes: they touch only B
        for client in strangers.values():
            r = _call(client, op, doc, world.ids)
            seen += 1
            for value in world.secrets_of_a():
                assert value not in r.text, (op, value, r.text)
    assert seen >= 30


def test_a_runs_events_are_followed_by_its_organization_only(
    world: World, strangers: dict[str, httpx.Client]
) -> None:
    """The live variant of ``listRunnerRunEvents`` (an SSE stream, which the
    generated calls above do not ask for): 404 to another organization before any
    stream starts; A's member follows it (a read)."""
    path = f"/api/runners/{world.ids['runner']}/runs/{world.ids['run']}/events"
    live = {"Accept": "text/event-stream", "Last-Event-ID": "0"}
    for who, client in strangers.items():
        r = client.get(path, headers=live)
        assert (r.status_code, r.json().get("error")) == (404, "NOT_FOUND"), (who, r.text)
        assert MARK not in r.text
    member = httpx.Client(base_url=world.url, headers=_h(_jwt("mallory", ORG_A)), timeout=30)
    with member:
        with member.stream("GET", path, headers=live) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            first = next(e for e in parse_lines(r.iter_lines()) if isinstance(e, Event))
        assert (first.id, first.event) == (1, "run.started")
        assert _ok(member.get(path))["events"][0]["type"] == "run.started"


def test_an_optional_reference_to_a_project_of_a_is_404_or_finds_nothing(
    world: World, strangers: dict[str, httpx.Client]
) -> None:
    """``projectId`` is optional where it appears (the matrix above fills required
    fields only): naming A's project in a body is 404, filtering by it finds none."""
    pid = world.ids["project"]
    for client in strangers.values():
        mine = _ok(client.post("/api/agents", json={"name": "b's"}))
        runner = _ok(client.post("/api/runners", json={"name": "b's"}))
        for method, path, body in (
            ("POST", "/api/agents", {"name": "x", "projectId": pid}),
            ("PATCH", f"/api/agents/{mine['id']}", {"projectId": pid}),
            ("POST", "/api/runners", {"name": "x", "projectId": pid}),
            ("PATCH", f"/api/runners/{runner['id']}", {"projectId": pid}),
        ):
            r = client.request(method, path, json=body)
            assert (r.status_code, r.json()) == (
                404,
                {"error": "NOT_FOUND", "detail": "project not found"},
            ), (method, path, r.text)
        for path in ("/api/agents", "/api/runners"):
            assert _ok(client.get(path, params={"projectId": pid})) == []  # type: ignore[comparison-overlap]
        assert _ok(client.get(f"/api/agents/{mine['id']}"))["project_id"] is None


def test_another_organization_finds_nothing_of_a_by_search(
    world: World, strangers: dict[str, httpx.Client]
) -> None:
    search = {"agentId": world.ids["agent"], "q": MARK}
    found = _ok(world.a.get("/api/threads", params=search))["threads"]
    assert world.ids["thread"] in [t["id"] for t in found]
    for who, client in strangers.items():
        r = client.get("/api/threads", params=search)
        assert (r.status_code, r.json()["threads"]) == (200, []), (who, r.text)
        assert MARK not in r.text, who


def test_a_member_gets_403_on_every_admin_operation(world: World, doc: dict[str, Any]) -> None:
    member = httpx.Client(base_url=world.url, headers=_h(_jwt("mallory", ORG_A)), timeout=30)
    admin_ops = [op for op in _operations(doc) if op.admin]
    assert admin_ops
    with member:
        for op in admin_ops:
            r = _call(member, op, doc, world.ids)
            assert (r.status_code, r.json().get("error")) == (403, "FORBIDDEN"), (op, r.text)
        # ... and changed nothing
        agent = world.a.get(f"/api/agents/{world.ids['agent']}")
        assert agent.status_code == 200
        assert MARK in agent.json()["name"]
        assert world.a.get(f"/api/mcps/{world.ids['mcp']}").json()["hasCredentials"] is True
        integration = world.a.get(f"/api/integrations/{world.ids['integration']}")
        assert integration.json()["has_connection"] is True
        assert MARK in integration.json()["name"]  # the member's PATCH changed nothing
        attached = world.a.get(f"/api/agents/{world.ids['agent']}/integrations").json()
        assert [i["id"] for i in attached] == [world.ids["integration"]]


def test_a_member_reads_but_does_not_see_another_users_thread(
    world: World, doc: dict[str, Any]
) -> None:
    """The thread rule under the role rule: a member reads the organization's
    agents but gets 403 on a thread another user (here: A's key) opened."""
    member = httpx.Client(base_url=world.url, headers=_h(_jwt("mallory", ORG_A)), timeout=30)
    with member:
        assert member.get(f"/api/agents/{world.ids['agent']}").status_code == 200
        for path in (
            f"/api/threads/{world.ids['thread']}",
            f"/api/threads/{world.ids['thread']}/messages",
        ):
            r = member.get(path)
            assert (r.status_code, r.json()["error"]) == (403, "FORBIDDEN"), r.text
            assert MARK not in r.text
        listed = member.get("/api/threads", params={"agentId": world.ids["agent"]}).json()
        assert listed["threads"] == []
        # nor finds it by searching its title or its messages' words, which A's key does
        for q in (f"thread {MARK}", f"hello {MARK}"):
            search = {"agentId": world.ids["agent"], "q": q}
            found = member.get("/api/threads", params=search)
            assert (found.status_code, found.json()["threads"]) == (200, []), found.text
            mine = _ok(world.a.get("/api/threads", params=search))["threads"]
            assert world.ids["thread"] in [t["id"] for t in mine]
        # nor deletes it (a member deletes the threads it opened)
        r = member.delete(f"/api/threads/{world.ids['thread']}")
        assert (r.status_code, r.json()["error"]) == (403, "FORBIDDEN"), r.text
        assert world.a.get(f"/api/threads/{world.ids['thread']}").status_code == 200
        # a plan follows its thread, and answers 404 as if it did not exist
        for path in (f"/api/plans/{world.ids['plan']}", f"/api/plans/{world.ids['plan']}/ready"):
            r = member.get(path)
            assert (r.status_code, r.json()["error"]) == (404, "NOT_FOUND"), r.text
            assert MARK not in r.text


def _upload(c: httpx.Client, name: str, **fields: str) -> httpx.Response:
    body = f"{name} {uuid.uuid4().hex}".encode()
    return c.post("/api/knowledge/upload", files={"file": (name, body, "text/plain")}, data=fields)


def test_knowledge_members_read_admins_write_threads_are_their_viewers(world: World) -> None:
    """What the access rules of use_cases/knowledge/documents.py give a member (a JWT without
    the admin role): the routes are member routes, the use case refuses the rest."""
    doc_id, agent, thread = world.ids["document"], world.ids["agent"], world.ids["thread"]
    member = httpx.Client(base_url=world.url, headers=_h(_jwt("mallory", ORG_A)), timeout=30)
    with member:
        # reads the organization's documents, and how they were cut
        assert member.get(f"/api/knowledge/{doc_id}").json()["id"] == doc_id
        assert doc_id in [d["id"] for d in member.get("/api/knowledge").json()]
        chunks = _ok(member.get(f"/api/knowledge/{doc_id}/chunks"))["chunks"]
        assert MARK in chunks[0]["text"]
        # adds, changes and removes no organization or agent document
        for r in (
            _upload(member, "org.txt"),
            _upload(member, "agent.txt", agentId=agent),
            member.delete(f"/api/knowledge/{doc_id}"),
            member.post(f"/api/knowledge/{doc_id}/reindex"),
            member.post("/api/knowledge/search", json={"query": "zebra"}),
            member.post("/api/knowledge/search", json={"query": "zebra", "agentId": agent}),
        ):
            assert (r.status_code, r.json()["error"]) == (403, "FORBIDDEN"), r.text
        # nor one of a thread it may not see
        r = _upload(member, "theirs.txt", threadId=thread)
        assert (r.status_code, r.json()["error"]) == (403, "FORBIDDEN"), r.text
        assert MARK not in r.text
        # a thread of its own: it adds, reads, searches and removes its documents
        own = _ok(member.post("/api/threads", json={"agentId": agent}))["id"]
        r = _upload(member, "mine.txt", threadId=own)
        assert r.status_code == 202, r.text
        mine = r.json()["id"]
        # A's thread has a document too, which the member may not see
        r = _upload(world.a, "theirs.txt", threadId=thread)
        assert r.status_code == 202, r.text
        theirs = r.json()["id"]
        assert member.get(f"/api/knowledge/{mine}").status_code == 200
        assert member.get(f"/api/knowledge/{mine}/chunks").status_code == 200
        # another user's thread's document is not found, nor its chunks
        for path in (f"/api/knowledge/{theirs}", f"/api/knowledge/{theirs}/chunks"):
            r = member.get(path)
            assert (r.status_code, r.json()["error"]) == (404, "NOT_FOUND"), r.text
            assert MARK not in r.text
        listed = member.get("/api/knowledge", params={"threadId": own}).json()
        assert [d["id"] for d in listed] == [mine]
        # a thread's documents are listed when that thread is asked for, not otherwise
        # (asked while both exist): neither its own thread's nor another's
        everything = [d["id"] for d in member.get("/api/knowledge").json()]
        assert doc_id in everything
        assert mine not in everything
        assert theirs not in everything
        only_threads = member.get("/api/knowledge", params={"scope": "thread"}).json()
        assert only_threads == []
        assert theirs in [d["id"] for d in world.a.get("/api/knowledge").json()]  # an API key: all
        found = member.post("/api/knowledge/search", json={"query": "zebra", "threadId": own})
        assert found.status_code == 200, found.text
        assert member.post(f"/api/knowledge/{mine}/reindex").status_code == 202
        assert member.delete(f"/api/knowledge/{mine}").status_code == 200
        assert world.a.delete(f"/api/knowledge/{theirs}").status_code == 200
    # the admin's document is untouched
    assert _ok(world.a.get(f"/api/knowledge/{doc_id}"))["status"] == "ready"


def test_knowledge_of_another_organization_is_not_found_nor_found(
    world: World, strangers: dict[str, httpx.Client]
) -> None:
    """B names A's agent or thread in an upload or a search: 404, as for ids that
    exist nowhere; B's own search of the same words finds nothing of A."""
    agent, thread = world.ids["agent"], world.ids["thread"]
    for who, client in strangers.items():
        for r in (
            _upload(client, "b.txt", agentId=agent),
            _upload(client, "b.txt", threadId=thread),
            client.post("/api/knowledge/search", json={"query": "zebra", "agentId": agent}),
            client.post("/api/knowledge/search", json={"query": "zebra", "threadId": thread}),
        ):
            assert (r.status_code, r.json()["error"]) == (404, "NOT_FOUND"), (who, r.text)
            assert MARK not in r.text
        found = client.post("/api/knowledge/search", json={"query": f"zebra notes {MARK}"})
        assert found.status_code == 200, (who, found.text)
        assert found.json()["results"] == []
        listed = client.get("/api/knowledge", params={"threadId": thread})
        for value in world.secrets_of_a():
            assert value not in listed.text, (who, listed.text)
