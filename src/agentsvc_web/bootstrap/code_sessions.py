"""Code agents and code sessions: the templates' and sessions' use cases and the
job that runs a session (``RUN_JOB``, ``EXPIRE_JOB``), over the sandbox
providers, the git remote and the git hosts (docs/code-agents.md).

``code_session_adapters`` is the one place those adapters are chosen: the
computers' sandbox providers (local bubblewrap and E2B), the git remote over the
outbound guard's client and GitHub's pull requests. A test passes its own
(``Services``'s ``code_sessions`` argument)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import timedelta
from typing import NamedTuple

from agentsvc_adapters.git.remote import GitHttpRemote
from agentsvc_adapters.git_hosts.github import github_from_env
from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_core.ports import Clock, ModelRouter, SecretBox, Storage, ThreadNews
from agentsvc_core.ports.event_webhooks import EventPublisher
from agentsvc_core.ports.git_remotes import GitHost, GitRemote
from agentsvc_core.ports.jobs import JobQueue
from agentsvc_core.ports.sandboxes import SandboxProvider
from agentsvc_core.use_cases.code_sessions import (
    CodeAgents,
    CodeSessionEngine,
    CodeSessions,
    EngineSettings,
    Timeline,
)
from agentsvc_core.use_cases.traces.build import TraceConfig
from agentsvc_web.settings import Settings

__all__ = [
    "CodeSessionAdapters",
    "CodeSessionArea",
    "code_session_adapters",
    "wire_code_sessions",
]


class CodeSessionAdapters(NamedTuple):
    providers: Mapping[str, SandboxProvider]
    remote: GitRemote
    hosts: Sequence[GitHost]


class CodeSessionArea(NamedTuple):
    code_agents: CodeAgents
    code_sessions: CodeSessions
    code_session_engine: CodeSessionEngine


def code_session_adapters(
    providers: Mapping[str, SandboxProvider], guard: OutboundGuard
) -> tuple[CodeSessionAdapters, list[Callable[[], Awaitable[None]]]]:
    """The computers' sandbox providers (by name), the git remote over the outbound
    guard's client and GitHub's pull requests (``AGENTSVC_GITHUB_API_URL``,
    ``AGENTSVC_GITHUB_HOST``); with what closes the latter two at shutdown."""
    remote = GitHttpRemote(guard)
    github = github_from_env(guard)
    return CodeSessionAdapters(providers, remote, (github,)), [remote.aclose, github.aclose]


def wire_code_sessions(
    settings: Settings,
    storage: Storage,
    box: SecretBox,
    clock: Clock,
    router: ModelRouter,
    adapters: CodeSessionAdapters,
    *,
    jobs: JobQueue,
    news: ThreadNews | None,
    traces: TraceConfig,
    events: EventPublisher,
) -> CodeSessionArea:
    store = storage.code_sessions
    timeline = Timeline(store, news)
    engine = CodeSessionEngine(
        store,
        timeline,
        jobs,
        box,
        clock,
        router,
        adapters.providers,
        adapters.remote,
        adapters.hosts,
        usage=storage.conversations,
        traces=storage.traces,
        prices=traces.prices,
        settings=EngineSettings(
            trace_retention=traces.retention,
            # a killed process's session is taken over soon after the queue picks
            # its job again (its heartbeat stale); a live job renews the lease
            # four times as often
            stale_after=timedelta(seconds=max(10.0, 2 * settings.job_heartbeat_s)),
            # a code agent that names no provider runs in the local sandbox
            default_provider="local",
            # half of a worker's job slots at most (AGENTSVC_WORKER_CONCURRENCY)
            max_running=max(1, settings.worker_concurrency // 2),
        ),
        events=events,
    )
    return CodeSessionArea(
        code_agents=CodeAgents(store, router, box, clock, adapters.providers),
        code_sessions=CodeSessions(store, timeline, jobs, box, clock, adapters.providers),
        code_session_engine=engine,
    )
