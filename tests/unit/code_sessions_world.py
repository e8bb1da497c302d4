"""A code sessions world for the unit tests of use_cases/code_sessions: the memory
store, the fake sandbox (real ``sh -c`` in a folder: tests/fakes/sandbox.py), an
in-memory git remote and git host (``Remote``, ``Host``) as strict as the ports'
contracts, a scripted model (tests/unit/turn_world.py's ``Script``), the test's
clock, and the jobs run by the test (``World.drain``)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_adapters.llm import Families, PrefixRouter
from agentsvc_adapters.memory.code_sessions import MemoryCodeSessions
from agentsvc_adapters.memory.traces import MemoryTraces
from agentsvc_core.entities import ToolCall, Usage, UsageRecord
from agentsvc_core.entities.code_session import CodeSession
from agentsvc_core.ports import Finished, TextDelta, ToolCallRequested, UsageReport
from agentsvc_core.ports.git_remotes import (
    GitHost,
    GitHostError,
    GitRemote,
    GitRemoteError,
    PullRequest,
    PushResult,
    Snapshot,
    SnapshotFile,
)
from agentsvc_core.ports.jobs import Again
from agentsvc_core.pricing import Price, PriceTable
from agentsvc_core.use_cases.code_sessions import (
    EXPIRE_JOB,
    RUN_JOB,
    CodeAgentDraft,
    CodeAgents,
    CodeSessionEngine,
    CodeSessions,
    EngineSettings,
    SessionDraft,
    Timeline,
)
from tests.fakes.sandbox import FakeSandbox
from tests.unit.published import Published
from tests.unit.runner_world import Jobs
from tests.unit.turn_world import BOX, WHO, Clock, Script

REPO = "https://git.example/acme/app.git"
TOKEN = "ghp-secret-token-123"
FILES = {
    "README.md": b"# App\n\nHello.\n",
    "app.py": b"def add(a, b):\n    return a - b\n",
    "test_app.py": b"from app import add\n\nassert add(2, 3) == 5\nprint('ok')\n",
}


class Remote(GitRemote):
    """One repository per URL: branches -> (commit, files). ``fail`` is raised by
    the next calls (then cleared); every call is recorded with its token."""

    def __init__(self) -> None:
        self.repos: dict[str, dict[str, tuple[str, dict[str, bytes]]]] = {
            REPO: {"main": ("a" * 40, dict(FILES))}
        }
        self.fetches: list[tuple[str, str | None, str | None]] = []
        self.pushes: list[dict[str, Any]] = []
        self.fail: list[GitRemoteError] = []

    async def fetch(self, url: str, ref: str | None, token: str | None) -> Snapshot:
        self.fetches.append((url, ref, token))
        if self.fail:
            raise self.fail.pop(0)
        repo = self.repos.get(url)
        if repo is None:
            raise GitRemoteError("git.example: no such repository", permanent=True)
        name = ref or "main"
        for branch, (commit, files) in repo.items():
            if name in (branch, commit):
                return Snapshot(
                    commit=commit,
                    ref=branch,
                    files=tuple(SnapshotFile(path=p, data=d) for p, d in sorted(files.items())),
                )
        raise GitRemoteError(f"git.example: no ref {name}", permanent=True)

    async def push(
        self,
        url: str,
        token: str | None,
        *,
        base: str,
        branch: str,
        changes: Mapping[str, bytes | None],
        message: str,
        author: str,
    ) -> PushResult:
        repo = self.repos[url]
        bases = dict(repo.values())
        if base not in bases:
            raise GitRemoteError("git.example: unknown base", permanent=True)
        commit = f"{len(self.pushes) + 1:040x}"
        if branch in repo:
            raise GitRemoteError(f"git.example: branch {branch} exists", permanent=True)
        files = dict(bases[base])
        for path, data in changes.items():
            if data is None:
                files.pop(path, None)
            else:
                files[path] = data
        repo[branch] = (commit, files)
        self.pushes.append(
            {
                "token": token,
                "base": base,
                "branch": branch,
                "changes": dict(changes),
                "message": message,
                "author": author,
            }
        )
        return PushResult(commit=commit, branch=branch)


class Host(GitHost):
    def __init__(self) -> None:
        self.opened: list[dict[str, Any]] = []
        self.fail: list[GitHostError] = []

    def serves(self, repo_url: str) -> bool:
        return repo_url.startswith("https://git.example/")

    async def open_pull_request(
        self, repo_url: str, token: str | None, *, head: str, base: str, title: str, body: str
    ) -> PullRequest:
        if self.fail:
            raise self.fail.pop(0)
        for n, pr in enumerate(self.opened, 1):
            if pr["head"] == head:
                return PullRequest(url=f"https://git.example/acme/app/pull/{n}", number=n)
        self.opened.append(
            {
                "repo_url": repo_url,
                "token": token,
                "head": head,
                "base": base,
                "title": title,
                "body": body,
            }
        )
        n = len(self.opened)
        return PullRequest(url=f"https://git.example/acme/app/pull/{n}", number=n)


class Usages:
    def __init__(self) -> None:
        self.records: list[UsageRecord] = []

    async def add_usage(self, records: list[UsageRecord]) -> None:
        self.records += records


def call(name: str, call_id: str | None = None, **arguments: Any) -> ToolCallRequested:
    return ToolCallRequested(ToolCall(id=call_id or f"c-{name}", name=name, arguments=arguments))


def step(*items: Any, tokens: int = 10) -> list[Any]:
    """One model answer: texts (str) and tool calls, then usage and the end."""
    out: list[Any] = [TextDelta(i) if isinstance(i, str) else i for i in items]
    has_calls = any(isinstance(i, ToolCallRequested) for i in out)
    return [
        *out,
        UsageReport(Usage(input_tokens=tokens, output_tokens=tokens)),
        Finished("tool_calls" if has_calls else "stop"),
    ]


PRICES = PriceTable([("local", Price(input=1.0, output=2.0))], "2026-11-01")


@dataclass
class World:
    store: MemoryCodeSessions
    model: Script
    sandbox: FakeSandbox
    remote: Remote
    host: Host
    jobs: Jobs
    clock: Clock
    agents: CodeAgents
    sessions: CodeSessions
    engine: CodeSessionEngine
    traces: MemoryTraces
    usage: Usages
    published: Published
    ran: list[Any] = field(default_factory=list)

    async def agent(self, **given: Any) -> UUID:
        body = {"name": "fixer", "model": "local", "repo_url": REPO, "git_credential": TOKEN}
        draft = msgspec.convert(body | given, CodeAgentDraft)
        return (await self.agents.create(WHO, draft)).id

    async def start(self, prompt: str = "fix add", **given: Any) -> CodeSession:
        agent_id = given.pop("code_agent_id", None) or await self.agent()
        draft = SessionDraft(code_agent_id=agent_id, prompt=prompt, **given)
        return await self.sessions.start(WHO, draft)

    async def get(self, session_id: UUID) -> CodeSession:
        return await self.sessions.get(WHO, session_id)

    async def drain(self, limit: int = 20) -> list[Any]:
        """Run the queued run jobs (and those they queue) in order; an ``Again``
        runs its job again at once, up to ``limit`` runs in all. Expiry jobs stay
        queued (a test runs them when its clock says)."""
        answers: list[Any] = []
        while limit > 0:
            runs = [i for i, (kind, _, _) in enumerate(self.jobs.queued) if kind == RUN_JOB]
            if not runs:
                break
            kind, payload, _ = self.jobs.queued.pop(runs[0])
            limit -= 1
            answer = await self.engine.run(payload)
            answers.append(answer)
            if isinstance(answer, Again):
                self.jobs.queued.insert(0, (kind, payload, None))
        self.ran += answers
        return answers

    async def events(self, session_id: UUID) -> list[Any]:
        rows, _ = await self.sessions.events(WHO, session_id, after=0, limit=1000)
        return rows

    def run_later(self) -> asyncio.Task[Any]:
        kind, payload, _ = self.jobs.queued.pop(0)
        assert kind == RUN_JOB
        return asyncio.create_task(self.engine.run(payload))


def world(*steps: list[Any], settings: EngineSettings | None = None) -> World:
    store = MemoryCodeSessions()
    model = Script(*steps)
    router = PrefixRouter(Families(local=model))
    sandbox = FakeSandbox()
    remote, host, jobs, clock = Remote(), Host(), Jobs(), Clock()
    timeline = Timeline(store, poll_s=0.05)
    providers = {"local": sandbox}
    traces = MemoryTraces(lambda: iter(()), lambda: iter(()))
    usage = Usages()
    events = Published()
    engine = CodeSessionEngine(
        store,
        timeline,
        jobs,
        BOX,
        clock,
        router,
        providers,
        remote,
        [host],
        usage=usage,
        traces=traces,
        prices=PRICES,
        settings=settings,
        events=events,
    )
    return World(
        store=store,
        model=model,
        sandbox=sandbox,
        remote=remote,
        host=host,
        jobs=jobs,
        clock=clock,
        agents=CodeAgents(store, router, BOX, clock, providers),
        sessions=CodeSessions(store, timeline, jobs, BOX, clock, providers),
        engine=engine,
        traces=traces,
        usage=usage,
        published=events,
    )


__all__ = ["EXPIRE_JOB", "FILES", "REPO", "RUN_JOB", "TOKEN", "World", "call", "step", "world"]
