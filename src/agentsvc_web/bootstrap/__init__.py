"""The composition root: the one package that builds adapters and wires them to
use cases, split by area.

- ``build``: ``build_services``, the adapters the settings choose;
- ``services``: ``Services``, the use cases wired area by area, and their life;
- ``storage``: memory or PostgreSQL (embedded or not), the secret box, opening it;
- ``telemetry``: ``/metrics``, the span tracer, stored traces, logs, analytics;
- ``catalogue``: keys and authentication, agents, threads, MCP servers, settings;
- ``tools``: the server-side tool sources and the areas behind them;
- ``turn``: the conversation;
- ``runners``: runners, their runs and the engine that runs them;
- ``background``: the job queue's worker, the sweep, the scheduler.
"""

from agentsvc_web.bootstrap.build import build_services
from agentsvc_web.bootstrap.services import Services
from agentsvc_web.bootstrap.storage import (
    database_url,
    run_migrations,
    secret_box,
    start_embedded,
)

__all__ = [
    "Services",
    "build_services",
    "database_url",
    "run_migrations",
    "secret_box",
    "start_embedded",
]
