"""Threads (docs/api.md, "Threads" and "Multiplayer threads"): paging, JWT scoping,
history, participants."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from litestar.testing import TestClient

from tests.web.conftest import bearer, make_jwt
from tests.web.harness import SharedHarness

Client = TestClient[Any]
H = dict[str, str]


def agent(c: Client, auth: H, **extra: Any) -> dict[str, Any]:
    r = c.post("/api/agents", json={"name": "A", **extra}, headers=auth)
    assert r.status_code == 201, r.text
    return r.json()  # type: ignore[no-any-return]


def thread(c: Client, auth: H, agent_id: str, **extra: Any) -> dict[str, Any]:
    r = c.post("/api/threads", json={"agentId": agent_id, **extra}, headers=auth)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def err(r: Any, status: int, code: str) -> str:
    assert r.status_code == status, r.text
    assert r.json()["error"] == code
    return str(r.json().get("detail", ""))


def test_create_thread_with_every_field(harness: SharedHarness, auth: H, org_id: str) -> None:
    with harness.client() as c:
        a = agent(c, auth, toolProfiles={"support": {"tools": []}})
        t = thread(
            c,
            auth,
            a["id"],
            title="Billing question",
            kind="single",
            resourceBindings=[{"type": "ticket", "id": "T-1"}],
            activeProfile="support",
            systemPromptOverlay=["First part.", "Second part."],
            metadata={"customer": "c-42", "plan": "pro"},
        )
        assert t["org_id"] == org_id
        assert t["agent_id"] == a["id"]
        assert t["title"] == "Billing question"
        assert t["kind"] == "single"
        assert t["status"] == "active"
        assert t["active_profile"] == "support"
        assert t["system_prompt_overlay"] == "First part.\n\nSecond part."
        assert t["metadata"] == {"customer": "c-42", "plan": "pro"}
        assert t["resource_bindings"] == [{"type": "ticket", "id": "T-1"}]
        assert t["created_at"].endswith("Z")
        assert t["updated_at"]
        assert c.get(f"/api/threads/{t['id']}", headers=auth).json() == t


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "agentId"),
        ({"agentId": "not-a-uuid"}, "agentId"),
        ({"kind": "crowd"}, "kind"),
        ({"metadata": {"k": 1}}, "metadata"),
        ({"metadata": {"k": "v\u0000"}}, "metadata"),
        ({"systemPromptOverlay": 5}, "systemPromptOverlay"),
        ({"activeProfile": "nope"}, "activeProfile"),
        ({"resourceBindings": "x"}, "resourceBindings"),
    ],
)
def test_invalid_thread_fields_are_422(
    harness: SharedHarness, auth: H, body: dict[str, Any], field: str
) -> None:
    with harness.client() as c:
        a = agent(c, auth)
        payload = {"agentId": a["id"], **body} if "agentId" not in body and body != {} else body
        detail = err(c.post("/api/threads", json=payload, headers=auth), 422, "VALIDATION_ERROR")
        assert field in detail


def test_thread_for_unknown_agent_is_404(harness: SharedHarness, auth: H) -> None:
    with harness.client() as c:
        r = c.post("/api/threads", json={"agentId": str(uuid.uuid4())}, headers=auth)
        err(r, 404, "NOT_FOUND")


def test_patch_thread_null_clears_and_metadata_is_replaced(harness: SharedHarness, auth: H) -> None:
    with harness.client() as c:
        a = agent(c, auth, toolProfiles={"p": {"tools": []}, "q": {"tools": []}})
        t = thread(
            c,
            auth,
            a["id"],
            title="t",
            activeProfile="p",
            systemPromptOverlay="o",
            metadata={"a": "1", "b": "2"},
        )
        r = c.patch(f"/api/threads/{t['id']}", json={"metadata": {"c": "3"}}, headers=auth)
        assert r.json()["metadata"] == {"c": "3"}
        assert r.json()["title"] == "t"
        r = c.patch(
            f"/api/threads/{t['id']}",
            json={
                "activeProfile": None,
                "systemPromptOverlay": None,
                "metadata": None,
                "title": "new",
            },
            headers=auth,
        )
        body = r.json()
        assert (
            body["active_profile"],
            body["system_prompt_overlay"],
            body["metadata"],
            body["title"],
        ) == (
            None,
            None,
            {},
            "new",
        )
        r = c.patch(
            f"/api/threads/{t['id']}",
            json={"systemPromptOverlay": ["x", "y"], "activeProfile": "q"},
            headers=auth,
        )
        assert (r.json()["system_prompt_overlay"], r.json()["active_profile"]) == ("x\n\ny", "q")
        err(
            c.patch(f"/api/threads/{t['id']}", json={"activeProfile": "zz"}, headers=auth),
            422,
            "VALIDATION_ERROR",
        )


def test_paging_through_hundreds_of_threads_returns_each_once(
    harness: SharedHarness, auth: H
) -> None:
    with harness.client() as c:
        a = agent(c, auth)
        other = agent(c, auth)
        made = [thread(c, auth, a["id"])["id"] for _ in range(230)]
        thread(c, auth, other["id"])  # another agent's thread never shows up
        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            params: dict[str, Any] = {"agentId": a["id"], "limit": 100}
            if cursor:
                params["cursor"] = cursor
            r = c.get("/api/threads", params=params, headers=auth)
            assert r.status_code == 200, r.text
            body = r.json()
            seen += [t["id"] for t in body["threads"]]
            pages += 1
            cursor = body["nextCursor"]
            if cursor is None:
                break
        assert pages == 3
        assert sorted(seen) == sorted(made)
        assert len(seen) == len(set(seen))
        assert seen == list(reversed(made))  # newest first
        default = c.get("/api/threads", params={"agentId": a["id"]}, headers=auth).json()
        assert len(default["threads"]) == 50


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"limit": 0},
        {"limit": 101},
        {"cursor": "yesterday"},
        {"agentId": "nope"},
        {"q": "x" * 201},
        {"q": "tea\x00pot"},
        {"q": " ".join(f"w{i}" for i in range(17))},
    ],
)
def test_bad_list_parameters_are_422(
    harness: SharedHarness, auth: H, params: dict[str, Any]
) -> None:
    with harness.client() as c:
        a = agent(c, auth)
        query = {"agentId": a["id"], **params} if params else {}
        err(c.get("/api/threads", params=query, headers=auth), 422, "VALIDATION_ERROR")


def test_search_finds_titles_and_messages_pages_and_keeps_to_the_users_threads(
    harness: SharedHarness, auth: H, org_id: str
) -> None:
    alice = bearer(make_jwt(sub="alice", org=org_id))
    with harness.client() as c:
        a = agent(c, auth)
        titled = thread(c, alice, a["id"], title="Brewing green tea")
        said = thread(c, alice, a["id"])
        r = c.post(
            f"/api/threads/{said['id']}/messages", json={"content": "Green kettle?"}, headers=alice
        )
        assert r.status_code == 200, r.text
        theirs = thread(c, auth, a["id"], title="Green tea for the key")
        thread(c, alice, a["id"], title="Coffee")

        def found(h: H, q: str, **more: Any) -> dict[str, Any]:
            r = c.get("/api/threads", params={"agentId": a["id"], "q": q, **more}, headers=h)
            assert r.status_code == 200, r.text
            return r.json()  # type: ignore[no-any-return]

        def ids(h: H, q: str) -> list[str]:
            return [t["id"] for t in found(h, q)["threads"]]

        assert ids(alice, "green") == [said["id"], titled["id"]]  # newest first, hers only
        assert ids(auth, "GREEN") == [theirs["id"], said["id"], titled["id"]]
        assert ids(alice, "kett") == [said["id"]]  # a word's start, in a message
        assert ids(alice, "green tea") == [titled["id"]]  # every word
        assert ids(alice, "said") == [said["id"]]  # the reply's text too
        assert ids(alice, "tea-pot") == []
        assert len(ids(alice, "  ")) == 3  # no words: her listing
        first = found(auth, "green", limit=2)
        assert [t["id"] for t in first["threads"]] == [theirs["id"], said["id"]]
        rest = found(auth, "green", limit=2, cursor=first["nextCursor"])
        assert ([t["id"] for t in rest["threads"]], rest["nextCursor"]) == ([titled["id"]], None)


def test_jwt_users_see_only_their_threads(harness: SharedHarness, auth: H, org_id: str) -> None:
    alice = bearer(make_jwt(sub="alice", org=org_id))
    bob = bearer(make_jwt(sub="bob", org=org_id))
    with harness.client() as c:
        a = agent(c, auth)
        mine = thread(c, alice, a["id"])
        theirs = thread(c, bob, a["id"])
        from_key = thread(c, auth, a["id"])
        assert mine["created_by"] == "alice"

        def ids(h: H) -> list[str]:
            r = c.get("/api/threads", params={"agentId": a["id"]}, headers=h)
            return [t["id"] for t in r.json()["threads"]]

        assert ids(alice) == [mine["id"]]
        assert ids(bob) == [theirs["id"]]
        assert set(ids(auth)) == {mine["id"], theirs["id"], from_key["id"]}
        err(c.get(f"/api/threads/{theirs['id']}", headers=alice), 403, "FORBIDDEN")
        err(
            c.post(f"/api/threads/{theirs['id']}/messages", json={"content": "hi"}, headers=alice),
            403,
            "FORBIDDEN",
        )
        err(c.get(f"/api/threads/{theirs['id']}/messages", headers=alice), 403, "FORBIDDEN")
        # another organization's thread is 404, not 403
        stranger = bearer(make_jwt(sub="alice", org=f"x-{uuid.uuid4().hex[:6]}"))
        err(c.get(f"/api/threads/{mine['id']}", headers=stranger), 404, "NOT_FOUND")
        err(
            c.get(
                "/api/threads", params={"agentId": a["id"], "orgId": "someone-else"}, headers=auth
            ),
            403,
            "FORBIDDEN",
        )


def test_history_bounds(harness: SharedHarness, auth: H) -> None:
    with harness.client() as c:
        a = agent(c, auth)
        t = thread(c, auth, a["id"])
        for q in ({"limit": 0}, {"limit": 201}, {"offset": -1}, {"limit": "x"}, {"offset": 10**20}):
            err(
                c.get(f"/api/threads/{t['id']}/messages", params=q, headers=auth),
                422,
                "VALIDATION_ERROR",
            )
        r = c.get(f"/api/threads/{t['id']}/messages", headers=auth)
        assert r.json() == {"messages": [], "total": 0}


def test_multiplayer_participants(harness: SharedHarness, auth: H, org_id: str) -> None:
    alice = bearer(make_jwt(sub="alice", org=org_id))
    bob = bearer(make_jwt(sub="bob", org=org_id))
    carol = bearer(make_jwt(sub="carol", org=org_id))
    with harness.client() as c:
        a = agent(c, auth)
        t = thread(c, alice, a["id"], kind="multiplayer")
        url = f"/api/threads/{t['id']}/participants"
        listed = c.get(url, headers=alice).json()["participants"]
        assert [(p["userId"], p["role"]) for p in listed] == [("alice", "owner")]

        r = c.post(url, json={"userId": "bob", "displayName": "Bob B."}, headers=alice)
        assert r.status_code == 200, r.text
        assert (r.json()["userId"], r.json()["role"], r.json()["displayName"]) == (
            "bob",
            "member",
            "Bob B.",
        )
        err(
            c.post(url, json={"userId": "dave"}, headers=bob), 403, "FORBIDDEN"
        )  # members do not manage
        err(
            c.post(url, json={"userId": "x", "role": "boss"}, headers=alice),
            422,
            "VALIDATION_ERROR",
        )

        # bob may read and post; carol may not
        assert c.get(f"/api/threads/{t['id']}", headers=bob).status_code == 200
        r = c.post(
            f"/api/threads/{t['id']}/messages", json={"content": "hello from bob"}, headers=bob
        )
        assert r.status_code == 200, r.text
        err(
            c.post(f"/api/threads/{t['id']}/messages", json={"content": "hi"}, headers=carol),
            403,
            "FORBIDDEN",
        )
        # an API key must say who is posting, and it must be a participant
        err(
            c.post(f"/api/threads/{t['id']}/messages", json={"content": "hi"}, headers=auth),
            422,
            "VALIDATION_ERROR",
        )
        err(
            c.post(
                f"/api/threads/{t['id']}/messages",
                json={"content": "hi", "senderId": "carol"},
                headers=auth,
            ),
            403,
            "FORBIDDEN",
        )
        r = c.post(
            f"/api/threads/{t['id']}/messages",
            json={"content": "relayed", "senderId": "alice", "senderName": "Alice"},
            headers=auth,
        )
        assert r.status_code == 200
        history = c.get(f"/api/threads/{t['id']}/messages", headers=alice).json()["messages"]
        users = [
            (m["content"], m["sender_id"], m["sender_name"]) for m in history if m["role"] == "user"
        ]
        assert users == [("hello from bob", "bob", "Bob B."), ("relayed", "alice", "Alice")]

        r = c.request("DELETE", url, json={"userId": "bob"}, headers=alice)
        assert (r.status_code, r.json()) == (200, {"ok": True})
        err(c.request("DELETE", url, json={"userId": "bob"}, headers=alice), 404, "NOT_FOUND")
        err(
            c.post(f"/api/threads/{t['id']}/messages", json={"content": "still?"}, headers=bob),
            403,
            "FORBIDDEN",
        )

        single = thread(c, auth, a["id"])
        err(
            c.get(f"/api/threads/{single['id']}/participants", headers=auth),
            422,
            "VALIDATION_ERROR",
        )
