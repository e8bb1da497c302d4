"""Code agents and code sessions (docs/code-agents.md).

- ``agents``: the templates' routes;
- ``sessions``: the sessions' routes (start, follow-up, cancel, archive, timeline);
- ``engine``: the job that runs a session, over ``creating`` (the sandbox and
  the checkout), ``tools`` (what the model works with) and ``handing_back``
  (push and pull request);
- ``transitions``: the pure rules of a session's life; ``timeline``: writes and
  live followers; ``finish``: changed files and the trace.
"""

from agentsvc_core.use_cases.code_sessions.agents import (
    CodeAgentChanges,
    CodeAgentDraft,
    CodeAgents,
    ComputerDraft,
)
from agentsvc_core.use_cases.code_sessions.engine import CodeSessionEngine, EngineSettings
from agentsvc_core.use_cases.code_sessions.sessions import (
    EXPIRE_JOB,
    RUN_JOB,
    CodeSessions,
    SessionDraft,
)
from agentsvc_core.use_cases.code_sessions.timeline import Timeline

__all__ = [
    "EXPIRE_JOB",
    "RUN_JOB",
    "CodeAgentChanges",
    "CodeAgentDraft",
    "CodeAgents",
    "CodeSessionEngine",
    "CodeSessions",
    "ComputerDraft",
    "EngineSettings",
    "SessionDraft",
    "Timeline",
]
