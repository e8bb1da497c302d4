"""An agent's marketplace profile (docs/marketplace.md) through the real Litestar
app, on memory and PostgreSQL: the profile's fields and bounds, a handle unique
across the service, the avatar checked by content and re-encoded without its
metadata and served publicly at a versioned URL, capabilities detected from what
the agent is given, a description from the agent's own model, and who may do what."""

from __future__ import annotations

import io
import uuid
from typing import Any

from litestar.testing import TestClient
from PIL import Image

from tests.web.conftest import bearer, make_jwt

Client = TestClient[Any]


def _ok(r: Any, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    return r.json()


def _agent(c: Client, auth: dict[str, str], name: str = "Scout") -> str:
    return str(_ok(c.post("/api/agents", json={"name": name}, headers=auth), 201)["id"])


def picture(fmt: str = "PNG", size: tuple[int, int] = (64, 48), **save: Any) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (200, 30, 30)).save(out, format=fmt, **save)
    return out.getvalue()


def _upload(c: Client, auth: dict[str, str], agent: str, data: bytes, name: str = "a.png") -> Any:
    return c.post(
        f"/api/agents/{agent}/marketplace/avatar",
        files={"file": (name, data, "application/octet-stream")},
        headers=auth,
    )


def test_the_profile_starts_as_defaults_and_keeps_what_is_put(
    client: Client, auth: dict[str, str], org_id: str
) -> None:
    agent = _agent(client, auth)
    path = f"/api/agents/{agent}/marketplace"
    assert _ok(client.get(path, headers=auth)) == {
        "agent_id": agent,
        "org_id": org_id,
        "handle": None,
        "display_name": "",
        "tagline": "",
        "description": "",
        "categories": [],
        "capabilities": [],
        "avatar_url": None,
        "listed": False,
        "updated_at": None,
    }
    handle = f"scout-{uuid.uuid4().hex[:8]}"
    put = _ok(
        client.put(
            path,
            json={
                "handle": handle,
                "displayName": "Scout",
                "tagline": "Finds what matters",
                "categories": ["research", "research", "sales"],
                "listed": True,
            },
            headers=auth,
        )
    )
    assert (put["handle"], put["display_name"], put["tagline"]) == (
        handle,
        "Scout",
        "Finds what matters",
    )
    assert put["categories"] == ["research", "sales"]  # once each
    assert put["listed"] is True
    assert put["updated_at"] is not None
    assert _ok(client.get(path, headers=auth)) == put
    # only the fields given change
    again = _ok(client.put(path, json={"description": "Long text"}, headers=auth))
    assert (again["description"], again["handle"], again["tagline"]) == (
        "Long text",
        handle,
        "Finds what matters",
    )
    caps = _ok(
        client.put(f"{path}/capabilities", json={"capabilities": ["Reads", "Plans"]}, headers=auth)
    )
    assert caps["capabilities"] == ["Reads", "Plans"]
    assert _ok(client.delete(path, headers=auth)) == {"ok": True}
    assert _ok(client.get(path, headers=auth))["handle"] is None


def test_a_handle_is_one_agents_across_the_service(
    client: Client, auth: dict[str, str], org_id: str
) -> None:
    handle = f"unique-{uuid.uuid4().hex[:8]}"
    first, second = _agent(client, auth, "a"), _agent(client, auth, "b")
    _ok(client.put(f"/api/agents/{first}/marketplace", json={"handle": handle}, headers=auth))
    r = client.put(f"/api/agents/{second}/marketplace", json={"handle": handle}, headers=auth)
    assert r.status_code == 409, r.text
    assert r.json()["error"] == "HANDLE_TAKEN"
    # another organization's agent cannot take it either
    other = bearer(make_jwt("boss", org=f"other-{uuid.uuid4().hex[:8]}", role="admin"))
    theirs = _agent(client, other)
    r = client.put(f"/api/agents/{theirs}/marketplace", json={"handle": handle}, headers=other)
    assert r.status_code == 409, r.text
    # freed (null), it can be taken
    _ok(client.put(f"/api/agents/{first}/marketplace", json={"handle": None}, headers=auth))
    taken = _ok(
        client.put(f"/api/agents/{second}/marketplace", json={"handle": handle}, headers=auth)
    )
    assert taken["handle"] == handle
    # another organization's agent is not found
    r = client.get(f"/api/agents/{second}/marketplace", headers=other)
    assert r.status_code == 404, r.text


def test_bad_fields_are_422(client: Client, auth: dict[str, str]) -> None:
    agent = _agent(client, auth)
    for body in (
        {"handle": "ab"},
        {"handle": "Not-Lower"},
        {"handle": "x" * 49},
        {"tagline": "t" * 161},
        {"displayName": "d" * 81},
        {"categories": ["a", "b", "c", "d", "e", "f"]},
        {"categories": [""]},
        {"capabilities": ["c" * 81]},
        {"listed": "yes"},
    ):
        r = client.put(f"/api/agents/{agent}/marketplace", json=body, headers=auth)
        assert r.status_code == 422, (body, r.text)
    assert _ok(client.get(f"/api/agents/{agent}/marketplace", headers=auth))["updated_at"] is None


def test_an_avatar_is_checked_reencoded_and_served_for_anyone(
    client: Client, auth: dict[str, str]
) -> None:
    agent = _agent(client, auth)
    exif = Image.Exif()
    exif[0x010E] = "secret location note"  # ImageDescription
    original = picture("JPEG", exif=exif.tobytes())
    assert b"secret location note" in original
    profile = _ok(_upload(client, auth, agent, original, "me.txt"))  # the name does not matter
    url = profile["avatar_url"]
    assert url.startswith(f"/api/public/avatars/{agent}/")
    served = client.get(url)  # no credentials
    assert served.status_code == 200, served.text
    assert served.headers["content-type"] == "image/jpeg"
    assert "immutable" in served.headers["cache-control"]
    assert b"secret location note" not in served.content
    with Image.open(io.BytesIO(served.content)) as img:
        assert (img.format, img.size) == ("JPEG", (64, 48))
    # a new picture: a new URL; the old one is gone
    png = _ok(_upload(client, auth, agent, picture("PNG")))
    assert png["avatar_url"] != url
    assert client.get(url).status_code == 404
    assert client.get(png["avatar_url"]).headers["content-type"] == "image/png"
    webp = _ok(_upload(client, auth, agent, picture("WEBP")))
    assert client.get(webp["avatar_url"]).headers["content-type"] == "image/webp"
    # deleted: no URL, and the picture is not served
    gone = _ok(client.delete(f"/api/agents/{agent}/marketplace/avatar", headers=auth))
    assert gone["avatar_url"] is None
    assert client.get(webp["avatar_url"]).status_code == 404


def test_what_is_not_an_allowed_picture_is_refused(client: Client, auth: dict[str, str]) -> None:
    agent = _agent(client, auth)
    for data in (
        b"just some text, named .png",
        picture("GIF"),
        picture("PNG", size=(1025, 10)),
        picture("PNG", size=(10, 1025)),
        picture("PNG")[:40],  # cut short
    ):
        r = _upload(client, auth, agent, data)
        assert r.status_code == 422, r.text
        assert r.json()["detail"].startswith("file: "), r.text
    big = picture("PNG", size=(1024, 1024), compress_level=0) + b"\0" * (1024 * 1024)
    assert _upload(client, auth, agent, big).status_code in (413, 422)
    assert _ok(client.get(f"/api/agents/{agent}/marketplace", headers=auth))["avatar_url"] is None
    # the largest allowed side is fine
    assert _ok(_upload(client, auth, agent, picture("PNG", size=(1024, 1024))))["avatar_url"]


def test_capabilities_are_detected_from_what_the_agent_is_given(
    client: Client, auth: dict[str, str]
) -> None:
    agent = _agent(client, auth)
    path = f"/api/agents/{agent}/marketplace/detect-capabilities"
    assert _ok(client.post(path, headers=auth)) == {"capabilities": []}
    _ok(client.put(f"/api/agents/{agent}/web", json={"fetchEnabled": True}, headers=auth))
    _ok(client.put(f"/api/agents/{agent}/memory", json={"enabled": True}, headers=auth))
    _ok(client.put(f"/api/agents/{agent}/plan", json={"enabled": True}, headers=auth))
    assert _ok(client.post(path, headers=auth))["capabilities"] == [
        "Reads web pages",
        "Remembers across conversations",
        "Plans and tracks tasks",
    ]
    # a suggestion only: nothing stored
    assert _ok(client.get(f"/api/agents/{agent}/marketplace", headers=auth))["capabilities"] == []


def test_a_description_comes_from_the_agents_model_and_is_not_stored(
    client: Client, auth: dict[str, str]
) -> None:
    agent = _agent(client, auth, "Librarian")
    r = client.post(f"/api/agents/{agent}/marketplace/generate-description", headers=auth)
    text = _ok(r)["description"]
    assert "Librarian" in text  # the local model answers with what it was asked
    assert _ok(client.get(f"/api/agents/{agent}/marketplace", headers=auth))["description"] == ""


def test_members_read_and_only_admins_change(
    client: Client, auth: dict[str, str], org_id: str
) -> None:
    agent = _agent(client, auth)
    member = bearer(make_jwt("mia", org=org_id))
    assert _ok(client.get(f"/api/agents/{agent}/marketplace", headers=member))["handle"] is None
    for r in (
        client.put(f"/api/agents/{agent}/marketplace", json={"tagline": "x"}, headers=member),
        client.delete(f"/api/agents/{agent}/marketplace", headers=member),
        _upload(client, member, agent, picture()),
        client.post(f"/api/agents/{agent}/marketplace/generate-description", headers=member),
    ):
        assert r.status_code == 403, r.text
    assert _ok(client.get(f"/api/agents/{agent}/marketplace", headers=auth))["tagline"] == ""


def test_the_profile_goes_with_its_agent(client: Client, auth: dict[str, str]) -> None:
    agent = _agent(client, auth)
    profile = _ok(_upload(client, auth, agent, picture()))
    _ok(client.delete(f"/api/agents/{agent}", headers=auth))
    assert client.get(f"/api/agents/{agent}/marketplace", headers=auth).status_code == 404
    assert client.get(profile["avatar_url"]).status_code == 404
