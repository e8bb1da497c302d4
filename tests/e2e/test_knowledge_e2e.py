"""Knowledge end to end (docs/knowledge.md), with the real service process on PostgreSQL:

- a Markdown, an HTML and a PDF file made here are uploaded (202 ``queued``), are
  indexed in the background to ``ready``; a question whose answer is in the PDF is
  asked, the (fake, OpenAI-style) model calls ``knowledge_search`` and the real
  search underneath finds the PDF's passage, which the ``tool_result`` names and
  the model's second request carries; the same file again is the same document;
  a deleted document is found no more; bad uploads are 413, 415 and 422;
- on a server with pgvector and a (fake) embeddings provider, search is hybrid;
  the service is killed while a document is being indexed and the indexing
  finishes after a restart (its job picked again once its heartbeat went stale).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.secret_scan import SCAN
from tests.e2e.service import AGENTSVC, Service, client, running
from tests.fakes.embeddings import EMBEDDINGS_KEY, FakeEmbeddings
from tests.fakes.providers import FakeProvider, Reply, ToolCallSpec
from tests.pdfs import make_pdf
from tests.pg import fresh_database
from tests.sse import names, parse
from tests.web.live import serve

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

PROVIDER_KEY = "sk-knowledge-provider-key-0123456789"
MODEL = "gpt-e2e-knowledge"

MARKDOWN = b"""# Travel policy

## Trains

Employees travel second class on trains shorter than four hours.

## Flights

Economy class for every flight; business class needs the director's approval.
"""

HTML = b"""<!doctype html><html><head><title>Office guide</title></head><body>
<nav>Home | About | Contact</nav>
<main><h1>Office guide</h1><h2>Opening hours</h2>
<p>The office opens at eight in the morning and closes at six in the evening.</p>
<h2>Visitors</h2><p>Visitors sign in at the reception desk and wear a badge.</p>
</main><script>var tracking = "should not be indexed";</script></body></html>"""

PDF_PAGES = [
    "Warehouse handbook\nForklifts are inspected every Monday morning.",
    "Safety\nThe emergency assembly point is the blue gate on Harbour Street.",
]


def _env(pg_url: str, key: str, data: Path, **more: str) -> dict[str, str]:
    return {
        "AGENTSVC_DATABASE_URL": pg_url,
        "AGENTSVC_BOOTSTRAP_API_KEY": key,
        "AGENTSVC_BOOTSTRAP_ORG": f"kn-{uuid.uuid4().hex[:8]}",
        "AGENTSVC_ALLOW_PRIVATE_NETWORK": "true",  # every fake is on loopback
        "AGENTSVC_DATA_DIR": str(data),
        "AGENTSVC_JOB_HEARTBEAT_S": "2",
        **more,
    }


def _upload(c: httpx.Client, name: str, data: bytes, mime: str, **fields: str) -> httpx.Response:
    return c.post("/api/knowledge/upload", files={"file": (name, data, mime)}, data=fields)


def _ready(c: httpx.Client, doc: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        d: dict[str, Any] = c.get(f"/api/knowledge/{doc}").json()
        if d["status"] in ("ready", "failed") or time.monotonic() > deadline:
            return d
        time.sleep(0.1)


@pytest.fixture
def world(pg_url: str, tmp_path: Path) -> Iterator[tuple[httpx.Client, FakeProvider]]:
    fake = FakeProvider("beta", api_key=PROVIDER_KEY)
    base = fake.start()
    key = f"ask_e2e_{uuid.uuid4().hex}"
    try:
        with (
            running(
                _env(
                    pg_url,
                    key,
                    tmp_path / "data",
                    AGENTSVC_BETA_BASE_URL=f"{base}/v1",
                    AGENTSVC_BETA_API_KEY=PROVIDER_KEY,
                    AGENTSVC_KNOWLEDGE_MAX_BYTES="200000",
                ),
                log=tmp_path / "service.log",
            ) as svc,
            client(svc, key, timeout=30) as c,
        ):
            yield c, fake
    finally:
        fake.stop()


def test_documents_are_indexed_and_the_model_finds_the_answer(
    world: tuple[httpx.Client, FakeProvider],
) -> None:
    c, fake = world
    agent = c.post("/api/agents", json={"name": "Clerk", "defaultModel": MODEL}).json()["id"]
    thread = c.post("/api/threads", json={"agentId": agent}).json()["id"]

    # nothing to search yet: the tool is not offered
    fake.enqueue(Reply(text="I do not know."))
    parse(c.post(f"/api/threads/{thread}/messages", json={"content": "hello"}).text)
    assert "tools" not in fake.requests[-1].json or not any(
        t["function"]["name"] == "knowledge_search" for t in fake.requests[-1].json["tools"]
    )

    r = _upload(c, "travel.md", MARKDOWN, "text/markdown")
    assert r.status_code == 202, r.text
    md = r.json()
    assert (md["status"], md["title"], md["scope"]) == ("queued", "travel.md", "org")
    r = _upload(c, "office.html", HTML, "text/html", title="Office guide")
    assert r.status_code == 202, r.text
    html = r.json()
    r = _upload(c, "warehouse.pdf", make_pdf(PDF_PAGES), "application/pdf", agentId=agent)
    assert r.status_code == 202, r.text
    pdf = r.json()
    assert (pdf["scope"], pdf["agent_id"], pdf["mime_type"]) == ("agent", agent, "application/pdf")

    for doc in (md, html, pdf):
        done = _ready(c, doc["id"])
        assert done["status"] == "ready", done
        assert done["chunk_count"] >= 1
        assert done["error"] is None
    listed = c.get("/api/knowledge").json()
    assert {d["id"] for d in listed} == {md["id"], html["id"], pdf["id"]}
    assert all(d["status"] == "ready" for d in listed)

    # the same file to the same scope is the same document (200, not a second one)
    r = _upload(c, "again.md", MARKDOWN, "text/markdown")
    assert (r.status_code, r.json()["id"]) == (200, md["id"])

    # the model asks; the real search answers from the PDF's second page
    fake.enqueue(
        Reply(
            text="",
            tool_calls=[
                ToolCallSpec(
                    id="call_k1",
                    name="knowledge_search",
                    arguments={"query": "where is the emergency assembly point"},
                )
            ],
            stop_reason="tool_calls",
        ),
        Reply(text="At the blue gate on Harbour Street (Warehouse handbook)."),
    )
    r = c.post(
        f"/api/threads/{thread}/messages",
        json={"content": "Where do we gather in an emergency?"},
    )
    events = parse(r.text)
    assert names(events)[:4] == ["meta", "tool_call", "tool_executing", "tool_result"], r.text
    assert events[1].data["tool"]["name"] == "knowledge_search"
    result = json.loads(events[3].data["result"])
    best = result["results"][0]
    assert (best["document_id"], best["title"], best["page"]) == (pdf["id"], "warehouse.pdf", 2)
    assert "blue gate on Harbour Street" in best["text"]
    assert uuid.UUID(best["chunk_id"])
    assert names(events)[-1] == "done"
    offered = [t["function"]["name"] for t in fake.requests[-2].json["tools"]]
    assert "knowledge_search" in offered
    second = json.dumps(fake.requests[-1].json["messages"])
    assert "Harbour Street" in second  # the tool's result went back to the model

    # what an operator sees of the same search
    r = c.post(
        "/api/knowledge/search",
        json={"query": "opening hours of the office", "topK": 3},
    )
    assert r.status_code == 200, r.text
    found = r.json()
    assert found["mode"] == "full_text"
    assert found["results"][0]["document_id"] == html["id"]
    assert "eight in the morning" in found["results"][0]["text"]
    assert all("tracking" not in h["text"] for h in found["results"])
    # the agent's PDF is not the organization's: an agent-less search misses it
    r = c.post("/api/knowledge/search", json={"query": "emergency assembly point"})
    assert all(h["document_id"] != pdf["id"] for h in r.json()["results"])
    r = c.post("/api/knowledge/search", json={"query": "assembly point", "agentId": agent})
    assert r.json()["results"][0]["document_id"] == pdf["id"]

    # reindex keeps the document searchable, then ready again
    r = c.post(f"/api/knowledge/{md['id']}/reindex")
    assert (r.status_code, r.json()["status"]) == (202, "queued")
    assert _ready(c, md["id"])["status"] == "ready"

    # delete: gone from the list and from the search
    r = c.delete(f"/api/knowledge/{pdf['id']}")
    assert (r.status_code, r.json()) == (200, {"ok": True})
    assert c.get(f"/api/knowledge/{pdf['id']}").status_code == 404
    r = c.post("/api/knowledge/search", json={"query": "assembly point", "agentId": agent})
    assert all(h["document_id"] != pdf["id"] for h in r.json()["results"])

    # bad uploads
    r = _upload(c, "big.txt", b"x" * 200_001, "text/plain")
    assert (r.status_code, r.json()["error"]) == (413, "PAYLOAD_TOO_LARGE")
    r = _upload(c, "tool.exe", b"MZ\x90\x00\x03binary", "application/octet-stream")
    assert (r.status_code, r.json()["error"]) == (415, "UNSUPPORTED_MEDIA_TYPE")
    r = c.post("/api/knowledge/upload", data={"title": "no file"}, files={"x": ("a", b"b")})
    assert (r.status_code, r.json()["detail"]) == (422, "file: a file part is required")
    r = c.post("/api/knowledge/upload", json={"file": "nope"})
    assert r.status_code == 415
    r = _upload(c, "empty.md", b"", "text/markdown")
    assert r.status_code == 422
    # a PDF that is not one fails with a reason people can read
    r = _upload(c, "broken.pdf", b"%PDF-1.4\nthis is not a pdf", "application/pdf")
    assert r.status_code == 202
    failed = _ready(c, r.json()["id"])
    assert failed["status"] == "failed", failed
    assert failed["error"]


@pytest.fixture
def vector_db(pgvector_admin_url: str) -> Iterator[str]:
    with fresh_database(pgvector_admin_url) as url:
        yield url


def test_hybrid_search_and_an_indexing_killed_midway_finishes_after_restart(
    vector_db: str, tmp_path: Path
) -> None:
    embeddings = FakeEmbeddings(dimensions=64)
    key = f"ask_e2e_{uuid.uuid4().hex}"
    with serve(embeddings) as emb_url:
        env = _env(
            vector_db,
            key,
            tmp_path / "data",
            AGENTSVC_EMBEDDINGS_URL=f"{emb_url}/v1",
            AGENTSVC_EMBEDDINGS_API_KEY=EMBEDDINGS_KEY,
            AGENTSVC_EMBEDDINGS_MODEL="hash-64",
            AGENTSVC_EMBEDDINGS_DIMENSIONS="64",
        )
        with (
            running(env, log=tmp_path / "first.log") as first,
            client(first, key, timeout=30) as c,
        ):
            r = _upload(c, "travel.md", MARKDOWN, "text/markdown")
            md = r.json()
            done = _ready(c, md["id"])
            assert (done["status"], done["embedding_model"]) == ("ready", "hash-64")
            r = c.post("/api/knowledge/search", json={"query": "business class flights"})
            found = r.json()
            assert found["mode"] == "hybrid"
            top = found["results"][0]
            assert "business class" in top["text"]
            assert top["text_rank"] is not None
            assert top["vector_rank"] is not None

            # the provider stalls: the next document stays ``processing``
            embeddings.delay_s = 120
            r = _upload(c, "office.html", HTML, "text/html")
            html = r.json()
            deadline = time.monotonic() + 30
            while c.get(f"/api/knowledge/{html['id']}").json()["status"] != "processing":
                assert time.monotonic() < deadline, "indexing never started"
                time.sleep(0.05)
            os.kill(first.proc.pid, signal.SIGKILL)  # no goodbye: as a crash
            first.proc.wait(timeout=10)
        embeddings.delay_s = 0
        with (
            running(env, log=tmp_path / "second.log") as second,
            client(second, key, timeout=30) as c,
        ):
            done = _ready(c, html["id"], timeout=60)
            assert done["status"] == "ready", (done, second.output())
            assert done["attempts"] == 2  # started twice: once before the kill
            r = c.post("/api/knowledge/search", json={"query": "reception badge visitors"})
            assert r.json()["results"][0]["document_id"] == html["id"]


@pytest.fixture
def own_db(pg_admin_url: str) -> Iterator[str]:
    """A database no other service of the session works on (their workers would
    take this test's jobs)."""
    with fresh_database(pg_admin_url) as url:
        yield url


def test_a_separate_worker_process_indexes_what_the_service_queues(
    own_db: str, tmp_path: Path
) -> None:
    """``AGENTSVC_WORKER=off`` serves HTTP and runs no job; ``agentsvc worker`` (another
    process, as on another machine) picks the job from the database and indexes it,
    and stops cleanly on SIGTERM."""
    key = f"ask_e2e_{uuid.uuid4().hex}"
    env = _env(own_db, key, tmp_path / "data")
    svc = Service({**env, "AGENTSVC_WORKER": "off"}, log=tmp_path / "service.log")
    worker: subprocess.Popen[bytes] | None = None
    try:
        svc.wait_ready()
        with client(svc, key, timeout=30) as c:
            doc = _upload(c, "travel.md", MARKDOWN, "text/markdown").json()
            time.sleep(1.0)  # long enough for an in-process worker to have started it
            assert c.get(f"/api/knowledge/{doc['id']}").json()["status"] == "queued"
            full_env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSVC_")}
            SCAN.log_file(tmp_path / "worker.log", temporary=False)
            with open(tmp_path / "worker.log", "wb") as out:
                worker = subprocess.Popen(
                    [AGENTSVC, "worker"],
                    env={**full_env, **env, "AGENTSVC_PORT": "0"},
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            done = _ready(c, doc["id"])
            assert done["status"] == "ready", (tmp_path / "worker.log").read_text()
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=30) == 0
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
        svc.stop()
