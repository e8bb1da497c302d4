"""A knowledge library for the fast unit tests of knowledge (use_cases/knowledge/documents.py,
knowledge_tools.py): the memory storage, the real file parser, a job queue that
records what was queued (the test runs the indexing job itself, in its own task),
an optional in-process embedder and the clock the test moves. No network, no
sleeps: fast enough to run per mutant (``make mutation``).

``library()`` holds one document of each kind: the organization's, the agent's,
and one in each of three threads (Alice's, Bob's, and one an API key opened)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast
from uuid import UUID

from agentsvc_adapters.documents import FileParser
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_core.entities import Principal
from agentsvc_core.entities.knowledge import KnowledgeDocument
from agentsvc_core.errors import Unavailable, Upstream
from agentsvc_core.ports.documents import DocumentParser, ParsedDocument
from agentsvc_core.ports.embeddings import Embedder
from agentsvc_core.ports.knowledge import KnowledgeStore
from agentsvc_core.use_cases import AgentDraft, Agents
from agentsvc_core.use_cases.knowledge.documents import INDEX_JOB, Knowledge, KnowledgeLimits
from agentsvc_core.use_cases.threads import ThreadDraft, Threads
from tests.fakes.embeddings import HashingEmbedder
from tests.unit.published import Published
from tests.unit.runner_world import Jobs
from tests.unit.turn_world import Clock

KEY = Principal(org_id="acme", method="api_key")
ADMIN_CAROL = Principal(org_id="acme", method="jwt", role="admin", user_id="carol")
ALICE = Principal(org_id="acme", method="jwt", user_id="alice")
BOB = Principal(org_id="acme", method="jwt", user_id="bob")
OUTSIDER = Principal(org_id="other", method="api_key")


class Queue(Jobs):
    """The job queue as the real ones deduplicate: a job whose key waits already is
    not queued again (``enqueue`` answers False); ``down`` refuses every enqueue."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False

    async def enqueue(
        self, kind: str, payload: bytes, *, key: str | None = None, delay_s: float = 0.0
    ) -> bool:
        if self.down:
            raise Unavailable("the job queue is down")
        if key is not None and any(k == key for _, _, k in self.queued):
            return False
        return await super().enqueue(kind, payload, key=key, delay_s=delay_s)


class FailingEmbedder(HashingEmbedder):
    """An embedder whose provider is down: every ``embed`` raises ``Upstream``."""

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        raise Upstream("the embeddings provider answered HTTP 503")


class Parses(FileParser):
    """The file parser, except that every file parses to ``document`` (a PDF's
    pages, or sections with no text, without making such a file)."""

    def __init__(self, document: ParsedDocument) -> None:
        super().__init__()
        self.document = document

    def parse(self, data: bytes, *, filename: str, mime_type: str | None) -> ParsedDocument:
        return self.document


class WithoutVectors:
    """A knowledge store that keeps no vectors: everything else is ``inner``'s."""

    vectors = False

    def __init__(self, inner: KnowledgeStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@dataclass
class Library:
    knowledge: Knowledge
    storage: MemoryStorage
    threads: Threads
    jobs: Queue
    clock: Clock
    agent: UUID
    events: Published
    # one document each: the organization's, the agent's, and one per thread
    org: KnowledgeDocument
    of_agent: KnowledgeDocument
    alices: KnowledgeDocument  # in Alice's own thread
    bobs: KnowledgeDocument  # in Bob's own thread
    keys: KnowledgeDocument  # in a thread an API key opened (no user's)
    alice_thread: UUID
    bob_thread: UUID
    key_thread: UUID

    async def index_queued(self) -> int:
        """Run every queued indexing job once, in order; answers how many ran."""
        queued = [payload for kind, payload, _ in self.jobs.queued if kind == INDEX_JOB]
        self.jobs.queued.clear()
        for payload in queued:
            await self.knowledge.index(payload)
        return len(queued)

    def job(self, document: KnowledgeDocument) -> bytes:
        """The payload of the indexing job queued for ``document``."""
        return next(p for kind, p, key in self.jobs.queued if key and str(document.id) in key)

    async def stored(self, document: KnowledgeDocument) -> KnowledgeDocument:
        return await self.storage.knowledge.get(document.org_id, document.id)


async def upload(
    k: Knowledge,
    who: Principal,
    name: str,
    *,
    text: str | None = None,
    agent_id: UUID | None = None,
    thread_id: UUID | None = None,
) -> KnowledgeDocument:
    """A new text file ``name`` (its text: ``"<name> zebra"`` unless given)."""
    doc, created = await k.upload(
        who,
        filename=name,
        data=(f"{name} zebra" if text is None else text).encode(),
        mime_type="text/plain",
        agent_id=agent_id,
        thread_id=thread_id,
    )
    assert created
    return doc


async def library(
    *,
    embedder: Embedder | None = None,
    limits: KnowledgeLimits | None = None,
    parser: DocumentParser | None = None,
    vectors: bool = True,
) -> Library:
    """The library; ``vectors=False``: storage that keeps no vectors (PostgreSQL
    without pgvector)."""
    storage, clock, jobs = MemoryStorage(), Clock(), Queue()
    events = Published()
    threads = Threads(storage.threads, storage.agents, storage.conversations, clock)
    k = Knowledge(
        storage.knowledge if vectors else cast("KnowledgeStore", WithoutVectors(storage.knowledge)),
        storage.agents,
        threads,
        jobs,
        parser or FileParser(),
        clock,
        embedder=embedder,
        limits=limits,
        events=events,
    )
    agent = (
        await Agents(storage.agents, clock, default_model="local").create(KEY, AgentDraft(name="a"))
    ).id
    alice_thread = (await threads.create(ALICE, ThreadDraft(agent_id=agent))).id
    bob_thread = (await threads.create(BOB, ThreadDraft(agent_id=agent))).id
    key_thread = (await threads.create(KEY, ThreadDraft(agent_id=agent))).id
    return Library(
        knowledge=k,
        storage=storage,
        threads=threads,
        jobs=jobs,
        clock=clock,
        agent=agent,
        events=events,
        org=await upload(k, KEY, "org.txt"),
        of_agent=await upload(k, ADMIN_CAROL, "agent.txt", agent_id=agent),
        alices=await upload(k, ALICE, "alice.txt", thread_id=alice_thread),
        bobs=await upload(k, BOB, "bob.txt", thread_id=bob_thread),
        keys=await upload(k, KEY, "key.txt", thread_id=key_thread),
        alice_thread=alice_thread,
        bob_thread=bob_thread,
        key_thread=key_thread,
    )


def ids(docs: Sequence[KnowledgeDocument]) -> set[UUID]:
    return {d.id for d in docs}
