from __future__ import annotations

from datetime import datetime
from uuid import UUID

import msgspec

from agentsvc_core.entities.model_params import ModelParams

# The two execution runtimes an agent may name, deliberately not vendor names: this
# service's own turn loop, and a slot for an alternative runtime.
RUNTIME_PROVIDERS = ("native", "alternative")


class ToolProfile(msgspec.Struct, frozen=True, kw_only=True):
    """A named subset of an agent's tools (custom names or ``<mcp slug>__<tool>``)."""

    tools: tuple[str, ...] = ()
    description: str = ""


class TemplateRef(msgspec.Struct, frozen=True, kw_only=True):
    """Which official template, at which version, an agent was made from
    (entities/template.py)."""

    id: str
    version: int


class Agent(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    org_id: str
    name: str
    description: str
    stable_preamble: str
    default_model: str
    created_at: datetime
    updated_at: datetime
    tool_profiles: dict[str, ToolProfile] | None = None
    default_profile: str | None = None
    runtime_provider: str | None = None
    project_id: UUID | None = None  # the project it is grouped in (entities/project.py)
    template: TemplateRef | None = None  # the official template it was made from
    # how long its tool calls wait for a person's approval before they expire as
    # denied (docs/tools.md, "Approval before a call")
    approval_timeout_minutes: int = 60
    # its model parameters' defaults, which a send's own override (entities/model_params.py)
    model_params: ModelParams | None = None
