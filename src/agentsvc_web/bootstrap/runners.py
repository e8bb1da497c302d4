"""Runners: their triggers and runs, the engine that runs them on the job queue
over the conversation, their analytics, suggestions and agents' scheduled tasks."""

from __future__ import annotations

from datetime import timedelta
from typing import NamedTuple

from agentsvc_core.ports import Clock, SecretBox, Storage, WebhookCaller
from agentsvc_core.ports.jobs import JobQueue
from agentsvc_core.ports.mcp import UrlPolicy
from agentsvc_core.use_cases import Conversation, Threads
from agentsvc_core.use_cases.mcp_servers import McpServers
from agentsvc_core.use_cases.org_settings import OrgSettings
from agentsvc_core.use_cases.runner_analytics import RunnerAnalytics
from agentsvc_core.use_cases.runner_engine import RunnerEngine
from agentsvc_core.use_cases.runner_runs import RunnerRuns
from agentsvc_core.use_cases.runners import Runners
from agentsvc_core.use_cases.scheduled_tasks import ScheduledTasks
from agentsvc_core.use_cases.suggestions import Suggestions
from agentsvc_core.use_cases.traces.build import TraceConfig
from agentsvc_web.settings import Settings


class RunnerArea(NamedTuple):
    runners: Runners
    runner_runs: RunnerRuns
    runner_engine: RunnerEngine
    runner_analytics: RunnerAnalytics
    suggestions: Suggestions
    scheduled_tasks: ScheduledTasks


def wire_runners(
    settings: Settings,
    storage: Storage,
    box: SecretBox,
    urls: UrlPolicy,
    clock: Clock,
    *,
    jobs: JobQueue,
    conversation: Conversation,
    threads: Threads,
    mcps: McpServers,
    webhooks: WebhookCaller,
    org_settings: OrgSettings,
    traces: TraceConfig,
) -> RunnerArea:
    """The runners, their runs and the engine that runs them (``RUN_JOB`` on the
    job queue), their analytics, suggestions and scheduled tasks; and the MCP
    servers learn of runners (an attachment to a runner needs the runner)."""
    runners = Runners(
        storage.runners,
        storage.agents,
        box,
        urls,
        clock,
        cron_min_interval_s=settings.cron_min_interval_s,
    )
    runs = RunnerRuns(storage.runners, runners, jobs, clock)
    engine = RunnerEngine(
        storage.runners,
        runs,
        conversation,
        threads,
        storage.conversations,
        storage.agents,
        mcps,
        webhooks,
        org_settings,
        box,
        clock,
        traces.prices,
        storage.traces,
        traces.retention,
        stale_after=timedelta(seconds=settings.run_stale_after_s),
    )
    mcps.runners = storage.runners
    return RunnerArea(
        runners=runners,
        runner_runs=runs,
        runner_engine=engine,
        runner_analytics=RunnerAnalytics(storage.runners, clock),
        suggestions=Suggestions(
            storage.runners,
            storage.agents,
            threads,
            conversation,
            storage.traces,
            clock,
        ),
        scheduled_tasks=ScheduledTasks(
            storage.runners, runners, storage.agents, storage.threads, clock
        ),
    )
