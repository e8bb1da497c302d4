"""What an agent can do, in the words a marketplace listing shows, found in what it
is given (docs/marketplace.md, "Capabilities"): its web tools, its documents,
memory, plans, database integrations, MCP servers, delegated webhook tools and
skills.
Reads only; the order is the one above, each capability once."""

from __future__ import annotations

from uuid import UUID

from agentsvc_core.entities import Principal
from agentsvc_core.use_cases.integrations import Integrations
from agentsvc_core.use_cases.knowledge.documents import Knowledge
from agentsvc_core.use_cases.mcp_servers import McpServers
from agentsvc_core.use_cases.memories.memories import MemorySettings
from agentsvc_core.use_cases.plan_tools import PlanSettings
from agentsvc_core.use_cases.skills.bindings import SkillBindings
from agentsvc_core.use_cases.web import WebSettings
from agentsvc_core.use_cases.webhook_tools import WebhookTools

__all__ = ["AgentCapabilities"]


class AgentCapabilities:
    """A capability source of ``Marketplace`` (``(who, agent) -> capabilities``)."""

    def __init__(
        self,
        *,
        web: WebSettings,
        knowledge: Knowledge,
        memory: MemorySettings,
        plan: PlanSettings,
        integrations: Integrations,
        mcps: McpServers,
        webhook_tools: WebhookTools,
        skills: SkillBindings,
    ) -> None:
        self._web = web
        self._knowledge = knowledge
        self._memory = memory
        self._plan = plan
        self._integrations = integrations
        self._mcps = mcps
        self._webhook_tools = webhook_tools
        self._skills = skills

    async def __call__(self, who: Principal, agent_id: UUID) -> list[str]:
        found: list[str] = []
        web = await self._web.get(who, agent_id)
        if web.fetch_enabled:
            found.append("Reads web pages")
        if web.search_enabled:
            found.append("Searches the web")
        documents = await self._knowledge.list_documents(who, status="ready")
        # the organization's and the agent's own (a thread's are that thread's alone)
        if any(
            d.scope == "org" or (d.scope == "agent" and d.agent_id == agent_id) for d in documents
        ):
            found.append("Answers from documents")
        if (await self._memory.get(who, agent_id)).enabled:
            found.append("Remembers across conversations")
        if (await self._plan.get(who, agent_id)).enabled:
            found.append("Plans and tracks tasks")
        databases = await self._integrations.attached(who, agent_id)
        found.extend(f"Queries the {i.name} database" for i in databases)
        servers = await self._mcps.attached(who, "agent", agent_id)
        found.extend(f"Uses {s.server.name}" for s in servers)
        _, tools = await self._webhook_tools.delegated(who, agent_id)
        found.extend(f"Uses the {tool.name} tool" for tool in tools)
        skills = await self._skills.attached(who, agent_id)
        found.extend(f"Has the {s.name} skill" for s in sorted(skills, key=lambda s: s.name))
        return list(dict.fromkeys(found))
