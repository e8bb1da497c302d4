"""A knowledge document's chunks (``GET /api/knowledge/{id}/chunks``) through the web
app, on memory and PostgreSQL: none while the document waits for its indexing, then
how the file was cut, in order and by pages, and who may read them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from litestar.testing import TestClient

from agentsvc_web.app import create_app
from agentsvc_web.settings import Settings
from tests.web.conftest import bearer, make_jwt

H = dict[str, str]
C = TestClient[Any]

SECTION = "The quick brown fox jumps over the lazy dog near the riverbank. "
GUIDE = (
    "# Guide\n\n## Setup\n\n"
    + SECTION * 60
    + "\n\n## Usage\n\n"
    + SECTION.replace("fox", "otter") * 60
    + "\n"
)


def _upload(c: C, h: H, name: str, data: bytes, **fields: str) -> dict[str, Any]:
    r = c.post(
        "/api/knowledge/upload",
        files={"file": (name, data, "text/markdown")},
        data=fields,
        headers=h,
    )
    assert r.status_code == 202, r.text
    return r.json()  # type: ignore[no-any-return]


def test_a_queued_document_has_no_chunk_yet(client: C, auth: H, org_id: str) -> None:
    """No job worker runs in this app: the document stays ``queued``."""
    c, h = client, auth
    doc = _upload(c, h, "guide.md", GUIDE.encode())
    r = c.get(f"/api/knowledge/{doc['id']}/chunks", headers=h)
    assert r.status_code == 200, r.text
    assert r.json() == {
        "document_id": doc["id"],
        "status": "queued",
        "chunk_count": 0,
        "chunks": [],
        "next_offset": None,
    }
    stranger = bearer(make_jwt(sub="s", org="another-org", role="admin"))
    r = c.get(f"/api/knowledge/{doc['id']}/chunks", headers=stranger)
    assert (r.status_code, r.json()["error"]) == (404, "NOT_FOUND")
    assert doc["id"] not in r.text
    member = bearer(make_jwt(sub="m", org=org_id))
    assert c.get(f"/api/knowledge/{doc['id']}/chunks", headers=member).status_code == 200


@pytest.fixture
def indexing(
    settings: Settings, auth: H, request: pytest.FixtureRequest
) -> Iterator[TestClient[Any]]:
    """An app of its own with a job worker, which indexes uploads."""
    own: dict[str, Any] = {"worker": True}
    if settings.storage == "postgres":
        # a database of its own: its worker takes any queued job of its database,
        # and other tests' uploads on the shared one stay queued
        own["database_url"] = request.getfixturevalue("own_pg_url")
    with TestClient(create_app(msgspec.structs.replace(settings, **own))) as c:
        yield c


def _ready(c: C, h: H, doc_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while (d := c.get(f"/api/knowledge/{doc_id}", headers=h).json())["status"] != "ready":
        assert d["status"] != "failed", d
        assert time.monotonic() < deadline, d
        time.sleep(0.05)
    return d  # type: ignore[no-any-return]


def test_an_indexed_documents_chunks_in_order_by_pages(indexing: C, auth: H) -> None:
    c, h = indexing, auth
    doc = _ready(c, h, _upload(c, h, "guide.md", GUIDE.encode())["id"])
    assert doc["chunk_count"] >= 3
    path = f"/api/knowledge/{doc['id']}/chunks"
    r = c.get(path, params={"limit": 200}, headers=h)
    assert r.status_code == 200, r.text
    whole = r.json()
    assert (whole["document_id"], whole["status"], whole["next_offset"]) == (
        doc["id"],
        "ready",
        None,
    )
    chunks = whole["chunks"]
    assert whole["chunk_count"] == len(chunks) == doc["chunk_count"]
    assert [k["ordinal"] for k in chunks] == list(range(len(chunks)))
    first, last = chunks[0], chunks[-1]
    assert set(first) == {
        "id",
        "ordinal",
        "text",
        "chars",
        "tokens",
        "headings",
        "page",
        "start",
        "end",
    }  # no vector, no search index
    for k in chunks:
        assert k["chars"] == len(k["text"]) == k["end"] - k["start"]
        assert k["tokens"] == -(-k["chars"] // 4)  # a token per 4 characters, rounded up
        assert k["page"] is None  # pages are a PDF's
    assert first["headings"][0] == "Guide"
    assert ["Guide", "Setup"] in [k["headings"] for k in chunks if "fox" in k["text"]]
    assert last["headings"] == ["Guide", "Usage"]
    assert "otter" in last["text"]
    assert [k["start"] for k in chunks] == sorted(k["start"] for k in chunks)
    # by pages of two: the same chunks, each once
    seen: list[dict[str, Any]] = []
    offset: int | None = 0
    while offset is not None:
        page = c.get(path, params={"limit": 2, "offset": offset}, headers=h).json()
        assert len(page["chunks"]) <= 2
        seen += page["chunks"]
        offset = page["next_offset"]
    assert seen == chunks
    # the default page is fifty; an offset past the end is an empty page
    assert c.get(path, headers=h).json()["chunks"] == chunks[:50]
    past = c.get(path, params={"offset": len(chunks)}, headers=h).json()
    assert (past["chunks"], past["next_offset"]) == ([], None)
    for bad in ({"limit": 0}, {"limit": 201}, {"offset": -1}, {"limit": "many"}):
        r = c.get(path, params=bad, headers=h)
        assert (r.status_code, r.json()["error"]) == (422, "VALIDATION_ERROR"), (bad, r.text)
    assert c.get(path, params={"limit": 200}, headers=h).status_code == 200
    r = c.get("/api/knowledge/00000000-0000-4000-8000-000000000000/chunks", headers=h)
    assert (r.status_code, r.json()["error"]) == (404, "NOT_FOUND")
    # a reindex lists the chunks search still finds until the new ones replace them
    r = c.post(f"/api/knowledge/{doc['id']}/reindex", headers=h)
    assert r.status_code == 202, r.text
    again = c.get(path, params={"limit": 200}, headers=h).json()
    assert again["status"] in ("queued", "processing", "ready")
    assert [k["text"] for k in again["chunks"]] == [k["text"] for k in chunks]
    # deleted: not found
    assert c.delete(f"/api/knowledge/{doc['id']}", headers=h).status_code == 200
    assert c.get(path, headers=h).status_code == 404
