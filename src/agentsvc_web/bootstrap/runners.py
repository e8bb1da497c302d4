"""Runners: their triggers and runs, the engine that runs them on the job queue
over the conversation, their analytics, suggestions and agents' scheduled tasks."""

from __future__ import annotations

from datetime import timedelta
from typing import NamedTuple

from agentsvc_core.ports import Clock, SecretBox, Storage, ThreadNews, WebhookCaller
from agentsvc_core.ports.event_webhooks import EventPublisher
from agentsvc_core.ports.jobs import JobQueue
from agentsvc_core.ports.mcp import UrlPolicy
from agentsvc_core.use_cases import Conversation, Threads
from agentsvc_core.use_cases.computer import Computers
from agentsvc_core.use_cases.computer.steps import ComputerSteps
from agentsvc_core.use_cases.mcp_servers import McpServers
from agentsvc_core.use_cases.org_settings import OrgSettings
from agentsvc_core.use_cases.runners.agent_steps import AgentSteps
from agentsvc_core.use_cases.runners.analytics import RunnerAnalytics
from agentsvc_core.use_cases.runners.budgets import Budgets
from agentsvc_core.use_cases.runners.definitions import Runners
from agentsvc_core.use_cases.runners.engine import EngineSettings, RunnerEngine
from agentsvc_core.use_cases.runners.runs import RunnerRuns
from agentsvc_core.use_cases.runners.trace import RunTraces
from agentsvc_core.use_cases.runners.work import StepWork, WebhookSteps
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
    computers: Computers,
    events: EventPublisher,
    news: ThreadNews | None = None,
) -> RunnerArea:
    """The runners, their runs and the engine that runs them (``RUN_JOB`` on the
    job queue), their analytics, suggestions and scheduled tasks."""
    runners = Runners(
        storage.runners,
        storage.agents,
        box,
        urls,
        clock,
        cron_min_interval_s=settings.cron_min_interval_s,
        projects=storage.projects,
        skills=storage.skills,
    )
    prices = traces.prices
    run_traces = RunTraces(storage.runners, storage.traces, clock, traces.retention)
    runs = RunnerRuns(storage.runners, runners, jobs, clock, conversation, run_traces, news)
    agent_steps = AgentSteps(
        storage.runners,
        conversation,
        threads,
        storage.conversations,
        storage.agents,
        mcps,
        prices,
    )
    engine = RunnerEngine(
        storage.runners,
        clock,
        StepWork(
            agent_steps,
            WebhookSteps(webhooks, org_settings, box),
            ComputerSteps(computers, storage.agents),
        ),
        Budgets(storage.runners, clock, prices),
        run_traces,
        EngineSettings(stale_after=timedelta(seconds=settings.run_stale_after_s)),
        events=events,
        news=news,
    )
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
