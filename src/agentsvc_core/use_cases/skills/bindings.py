"""Skills given to agents and runners (``/api/agents/{id}/skills``,
``/api/runners/{id}/skills``), and the turn's side of them: the catalogue the
model reads and the ``load_skill`` tool (``SkillTools``).

An agent's bindings are a sealed record of kind ``skills`` (like its other
configurations: read with the thread, so an agent with no skills costs a turn no
read at all, and gone with the agent); a runner's are in the runner. Setting them
replaces the whole set; each must name a skill of the organization and, when it
pins one, a version the skill has.

In a turn the attached skills are the agent's enabled bindings, then its runner's
(an agent step's) for skills the agent has not. One read finds their names and
descriptions; the catalogue sorted by name goes into the system prompt after the
stable preamble (``ToolSpec.instructions``), so it stays the same from turn to
turn while the bindings do, and the prompt cache stays valid. ``load_skill``
answers a skill's body and lists its files, or one file's text.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_core.entities import Agent, Principal
from agentsvc_core.entities.skill import SkillBinding, SkillEntry
from agentsvc_core.errors import DomainError, InvalidInput, PermissionDenied
from agentsvc_core.ports import (
    AgentRepository,
    SecretBox,
    SecretStore,
    ServerTools,
    ToolCallContext,
    ToolSetup,
    ToolSpec,
)
from agentsvc_core.ports.skills import SkillStore
from agentsvc_core.use_cases.agent_settings import AgentSettings
from agentsvc_core.use_cases.skills.skills import Skills

__all__ = [
    "LOAD_SKILL",
    "AgentSkillSet",
    "SkillBindings",
    "SkillTools",
    "check_bindings",
    "registry_giver",
]

LOAD_SKILL = "load_skill"
MAX_BINDINGS = 100
MAX_FILE_TEXT = 100_000  # characters of one file load_skill answers


class AgentSkillSet(msgspec.Struct, frozen=True, kw_only=True):
    """An agent's skill bindings (the record of kind ``skills``)."""

    agent_id: UUID
    org_id: str
    skills: tuple[SkillBinding, ...] = ()


async def check_bindings(
    store: SkillStore, org_id: str, bindings: list[SkillBinding] | None
) -> tuple[SkillBinding, ...]:
    """``bindings`` if each names a skill of the organization once and the version it
    pins exists; else ``NotFound`` (the skill) or ``InvalidInput`` (None: a body
    that gave both forms of bindings, or neither)."""
    if bindings is None:
        raise InvalidInput("skills", "give either skills or skillIds")
    if len(bindings) > MAX_BINDINGS:
        raise InvalidInput("skills", f"at most {MAX_BINDINGS}")
    seen: set[UUID] = set()
    for b in bindings:
        if b.skill_id in seen:
            raise InvalidInput("skills", f"skill {b.skill_id} is given twice")
        seen.add(b.skill_id)
        skill = await store.get(org_id, b.skill_id)
        if b.pinned_version is not None and (
            b.pinned_version > skill.version
            or await store.version(org_id, b.skill_id, b.pinned_version) is None
        ):
            raise InvalidInput(
                "pinnedVersion", f"skill {skill.name} has no version {b.pinned_version}"
            )
    return tuple(bindings)


class SkillBindings(AgentSettings[AgentSkillSet]):
    """The agents' bindings; a runner's are set through ``Runners.set_skills``."""

    def __init__(
        self, store: SecretStore, agents: AgentRepository, box: SecretBox, skills: SkillStore
    ) -> None:
        super().__init__(store, agents, box, "skills", AgentSkillSet)
        self._skills = skills

    async def set(
        self, who: Principal, agent_id: UUID, bindings: list[SkillBinding] | None
    ) -> AgentSkillSet:
        """Replace the agent's bindings (None: the body gave no bindings, refused)."""
        if not who.is_admin:
            raise PermissionDenied("an agent's skills are set by the organization's admins")
        await self._agents.get(who.org_id, agent_id)  # another organization's: 404 first
        checked = await check_bindings(self._skills, who.org_id, bindings)
        return await self._change(
            who, agent_id, lambda current: msgspec.structs.replace(current, skills=checked)
        )

    async def attached(self, who: Principal, agent_id: UUID) -> list[SkillEntry]:
        """The agent's skills as its turns offer them (enabled, not disabled)."""
        return await self._skills.entries(who.org_id, (await self.get(who, agent_id)).skills)


def registry_giver(
    skills: Skills, bindings: SkillBindings
) -> Callable[[Principal, UUID, tuple[str, ...]], Awaitable[None]]:
    """What gives an agent the shipped registry's skills of some ids (a template's):
    the organization's skill installed from each (installed now when it has none),
    bound at its current version."""

    async def give(who: Principal, agent_id: UUID, ids: tuple[str, ...]) -> None:
        installed = [await skills.installed(who, i) for i in ids]
        await bindings.set(who, agent_id, [SkillBinding(skill_id=k.id) for k in installed])

    return give


def catalogue(entries: list[SkillEntry]) -> str:
    """What the system prompt says of the attached skills, sorted by name."""
    lines = [
        "# Skills",
        "You have skills: instructions for particular tasks. When a task matches a"
        f" skill's description, call {LOAD_SKILL} with its name and follow what it says.",
        "",
    ]
    lines += [f"- {e.name}: {e.description}" for e in sorted(entries, key=lambda e: e.name)]
    return "\n".join(lines)


def _load_spec(entries: list[SkillEntry]) -> ToolSpec:
    names = sorted(e.name for e in entries)
    return ToolSpec(
        name=LOAD_SKILL,
        description=(
            "Load one of your skills: answers its instructions and lists its files;"
            " with `path`, answers that file of the skill instead."
        ),
        parameters={
            "type": "object",
            "properties": {
                "name": {"type": "string", "enum": names, "description": "the skill's name"},
                "path": {"type": "string", "description": "a file of the skill (optional)"},
            },
            "required": ["name"],
            "additionalProperties": False,
        },
        instructions=catalogue(entries),
    )


class _LoadArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    path: str | None = None


class SkillTools(ServerTools):
    """``load_skill`` and the catalogue, offered while the agent (or its runner) has
    attached skills."""

    def __init__(self, bindings: SkillBindings, store: SkillStore) -> None:
        self._bindings = bindings
        self._store = store
        self.kinds = (bindings.kind,)

    def owns(self, name: str) -> bool:
        return name == LOAD_SKILL

    def is_extension(self, name: str) -> bool:
        return False

    async def _entries(
        self, who: Principal, agent: Agent, setup: ToolSetup | None
    ) -> list[SkillEntry]:
        if setup is not None and not setup.skills and self._bindings.kind not in setup.records:
            return []  # the turn of an agent without skills: nothing to open or read
        own = (await self._bindings.in_turn(who.org_id, agent.id, setup)).skills
        extra = setup.skills if setup is not None else ()
        if not own and not extra:
            return []
        mine = {b.skill_id for b in own}
        bindings = [*own, *(b for b in extra if b.skill_id not in mine)]
        return await self._store.entries(who.org_id, bindings)

    async def list_tools(
        self, who: Principal, agent: Agent, setup: ToolSetup | None = None
    ) -> list[ToolSpec]:
        entries = await self._entries(who, agent, setup)
        return [_load_spec(entries)] if entries else []

    async def call(
        self,
        who: Principal,
        agent: Agent,
        name: str,
        arguments: dict[str, Any],
        ctx: ToolCallContext,
    ) -> str:
        if name != LOAD_SKILL:
            return f"error: no skill tool named {name!r}"
        try:
            args = msgspec.convert(arguments, _LoadArgs)
            entry = next(
                (e for e in await self._entries(who, agent, ctx.setup) if e.name == args.name),
                None,
            )
            if entry is None:
                return f"error: you have no skill named {args.name!r}"
            content = await self._store.version(who.org_id, entry.skill_id, entry.version)
        except msgspec.ValidationError as exc:
            return f"error: invalid arguments: {exc}"
        except DomainError as exc:
            return f"error: {exc.detail}"
        if content is None:
            return f"error: the skill {args.name!r} is gone"
        if args.path is not None:
            return _file(entry, content.files, args.path)
        files = "".join(f"\n- {p} ({len(d)} bytes)" for p, d in content.files.items())
        tools = ", ".join(content.allowed_tools)
        return (
            f"# Skill {entry.name} (version {entry.version})\n"
            + (f"Tools it expects: {tools}\n" if tools else "")
            + f"\n{content.body}\n"
            + (f"\n## Files of this skill (load one with path){files}\n" if files else "")
        )


def _file(entry: SkillEntry, files: dict[str, bytes], path: str) -> str:
    data = files.get(path)
    if data is None:
        return f"error: the skill {entry.name!r} has no file {path!r}"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return f"error: {path} is not text ({len(data)} bytes)"
    if len(text) > MAX_FILE_TEXT:
        return text[:MAX_FILE_TEXT] + f"\n[cut: the file has {len(text)} characters]"
    return text
