"""Official agent templates (docs/templates.md): complete agent configurations
shipped with the service, each at a version, that an organization turns into an
agent of its own in one call."""

from __future__ import annotations

from typing import Any

import msgspec

from agentsvc_core.entities.agent import TemplateRef, ToolProfile

# the agent configurations a template may set, by their kind (``/api/agents/{id}/<kind>``)
TEMPLATE_CONFIGS = ("web", "plan", "memory", "compaction")


class TemplateAgent(msgspec.Struct, frozen=True, kw_only=True):
    """The agent a template makes; ``default_model`` None is the service's default."""

    name: str
    description: str = ""
    stable_preamble: str = ""
    default_model: str | None = None
    tool_profiles: dict[str, ToolProfile] | None = None
    default_profile: str | None = None


class Template(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``configs``: the fields each configuration kind of ``TEMPLATE_CONFIGS`` is
    given (as a PUT of ``/api/agents/{id}/<kind>`` would, snake_case); ``uses``:
    what the agent works best with that the template cannot bring (documents, a
    database), in words for the person choosing it."""

    id: str
    version: int
    name: str
    description: str
    category: str
    tags: tuple[str, ...] = ()
    agent: TemplateAgent
    configs: dict[str, dict[str, Any]] = {}
    skills: tuple[str, ...] = ()  # ids of the shipped registry's skills (docs/skills.md)
    uses: tuple[str, ...] = ()

    @property
    def ref(self) -> TemplateRef:
        return TemplateRef(id=self.id, version=self.version)
