"""Code agents, the templates of code sessions: ``/api/code-agents`` (GET, POST)
and ``/api/code-agents/{id}`` (GET, PATCH, DELETE) (docs/code-agents.md).

The git credential is sealed at once (``SecretBox``, under the agent's own
context) and never answered: ``has_git_credential`` only. The model must be one
the deployment's router serves; the sandbox provider, when named, one it has."""

from __future__ import annotations

import re
import uuid
from collections.abc import Collection
from typing import Annotated, Literal
from urllib.parse import urlsplit
from uuid import UUID

import msgspec
from msgspec import UNSET, Meta, UnsetType

from agentsvc_core.entities import Principal
from agentsvc_core.entities.code_session import CodeAgent, Computer
from agentsvc_core.errors import InvalidInput, NotFound
from agentsvc_core.ports import Clock, ModelRouter, SecretBox
from agentsvc_core.ports.code_sessions import CodeSessionStore
from agentsvc_core.rules import check_text

__all__ = [
    "CodeAgentChanges",
    "CodeAgentDraft",
    "CodeAgents",
    "ComputerDraft",
    "check_ref",
    "check_repo_url",
    "credential_context",
]

MAX_NAME = 120
MAX_PREAMBLE = 20_000
MAX_URL = 2048
MAX_REF = 255
MAX_CREDENTIAL = 4096
DEFAULT_PREFIX = "agentsvc/"
_PREFIX = re.compile(r"^[A-Za-z0-9._/-]{1,60}$")
_HOST = re.compile(r"^(\*\.)?[A-Za-z0-9.-]{1,253}$")

Name = Annotated[str, Meta(max_length=MAX_NAME)]
Hosts = Annotated[
    tuple[Annotated[str, Meta(min_length=1, max_length=253)], ...], Meta(max_length=100)
]


class ComputerDraft(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    provider: str | None = None
    memory_mb: Annotated[int, Meta(ge=128, le=16384)] = 1024
    exec_timeout_s: Annotated[int, Meta(ge=1, le=3600)] = 120
    network: Literal["none", "allowlist"] = "none"
    allowed_hosts: Hosts = ()


class CodeAgentDraft(msgspec.Struct, frozen=True, kw_only=True):
    name: Name
    model: Annotated[str, Meta(min_length=1, max_length=200)]
    repo_url: str | None = None
    starting_ref: str | None = None
    preamble: str = ""
    branch_prefix: str = DEFAULT_PREFIX
    auto_create_pr: bool = True
    git_credential: str | None = None
    computer: ComputerDraft = ComputerDraft()


class CodeAgentChanges(msgspec.Struct, frozen=True, kw_only=True):
    """What PATCH changes; ``git_credential`` null removes the stored one;
    ``computer`` replaces the stored settings as a whole."""

    name: Name | UnsetType = UNSET
    model: Annotated[str, Meta(min_length=1, max_length=200)] | UnsetType = UNSET
    repo_url: str | UnsetType | None = UNSET
    starting_ref: str | UnsetType | None = UNSET
    preamble: str | UnsetType = UNSET
    branch_prefix: str | UnsetType = UNSET
    auto_create_pr: bool | UnsetType = UNSET
    git_credential: str | UnsetType | None = UNSET
    computer: ComputerDraft | UnsetType = UNSET


def credential_context(org_id: str, agent_id: UUID) -> str:
    return f"code-agent:{org_id}:{agent_id}"


def check_repo_url(field: str, url: str) -> str:
    """An http(s) URL with a host and no credentials in it (a token goes in the
    git credential, which is sealed; a URL is answered as it is)."""
    check_text(field, url, max_len=MAX_URL, required=True)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInput(field, "must be an http(s) URL of a git repository")
    if parts.username is not None or parts.password is not None:
        raise InvalidInput(field, "must not carry credentials; set gitCredential instead")
    return url


def check_ref(field: str, ref: str | None) -> str | None:
    if ref is None:
        return None
    check_text(field, ref, max_len=MAX_REF, required=True)
    if ".." in ref or any(c in ref for c in " ~^:?*[\\") or ref.startswith(("/", "-")):
        raise InvalidInput(field, "is not a valid git ref")
    return ref


def _check_prefix(prefix: str) -> str:
    if not _PREFIX.match(prefix) or ".." in prefix or prefix.startswith(("/", "-")):
        raise InvalidInput(
            "branchPrefix", "1 to 60 of letters, digits, '.', '_', '/' and '-'; no '..'"
        )
    return prefix


class CodeAgents:
    def __init__(
        self,
        store: CodeSessionStore,
        router: ModelRouter,
        box: SecretBox,
        clock: Clock,
        providers: Collection[str],
    ) -> None:
        self._store = store
        self._router = router
        self._box = box
        self._clock = clock
        self._providers = providers

    def _computer(self, draft: ComputerDraft) -> Computer:
        if draft.provider is not None and draft.provider not in self._providers:
            known = ", ".join(sorted(self._providers)) or "none"
            raise InvalidInput(
                "computer.provider", f"this deployment has no such provider (it has: {known})"
            )
        for host in draft.allowed_hosts:
            if not _HOST.match(host):
                raise InvalidInput("computer.allowedHosts", f"{host!r} is not a host name")
        return Computer(
            provider=draft.provider,
            memory_mb=draft.memory_mb,
            exec_timeout_s=draft.exec_timeout_s,
            network=draft.network,
            allowed_hosts=tuple(draft.allowed_hosts),
        )

    def _model(self, model: str) -> str:
        self._router.route(model)  # InvalidInput for a model no family serves
        return model

    def _seal(self, org_id: str, agent_id: UUID, token: str | None) -> str | None:
        if token is None:
            return None
        check_text("gitCredential", token, max_len=MAX_CREDENTIAL, required=True)
        return self._box.seal(token.encode(), credential_context(org_id, agent_id))

    async def create(self, who: Principal, draft: CodeAgentDraft) -> CodeAgent:
        now = self._clock.now()
        agent_id = uuid.uuid4()
        agent = CodeAgent(
            id=agent_id,
            org_id=who.org_id,
            name=check_text("name", draft.name, max_len=MAX_NAME, required=True),
            model=self._model(draft.model),
            repo_url=None if draft.repo_url is None else check_repo_url("repoUrl", draft.repo_url),
            starting_ref=check_ref("startingRef", draft.starting_ref),
            preamble=check_text("preamble", draft.preamble, max_len=MAX_PREAMBLE),
            branch_prefix=_check_prefix(draft.branch_prefix),
            auto_create_pr=draft.auto_create_pr,
            git_credential_sealed=self._seal(who.org_id, agent_id, draft.git_credential),
            computer=self._computer(draft.computer),
            created_at=now,
            updated_at=now,
        )
        return await self._store.add_agent(agent)

    async def list(self, who: Principal) -> list[CodeAgent]:
        return await self._store.agents(who.org_id)

    async def get(self, who: Principal, agent_id: UUID) -> CodeAgent:
        return await self._store.get_agent(who.org_id, agent_id)

    async def update(self, who: Principal, agent_id: UUID, changes: CodeAgentChanges) -> CodeAgent:
        given: dict[str, object] = {}
        if changes.name is not UNSET:
            given["name"] = check_text("name", changes.name, max_len=MAX_NAME, required=True)
        if changes.model is not UNSET:
            given["model"] = self._model(changes.model)
        if changes.repo_url is not UNSET:
            url = changes.repo_url
            given["repo_url"] = None if url is None else check_repo_url("repoUrl", url)
        if changes.starting_ref is not UNSET:
            given["starting_ref"] = check_ref("startingRef", changes.starting_ref)
        if changes.preamble is not UNSET:
            given["preamble"] = check_text("preamble", changes.preamble, max_len=MAX_PREAMBLE)
        if changes.branch_prefix is not UNSET:
            given["branch_prefix"] = _check_prefix(changes.branch_prefix)
        if changes.auto_create_pr is not UNSET:
            given["auto_create_pr"] = changes.auto_create_pr
        if changes.git_credential is not UNSET:
            given["git_credential_sealed"] = self._seal(
                who.org_id, agent_id, changes.git_credential
            )
        if changes.computer is not UNSET:
            given["computer"] = self._computer(changes.computer)
        now = self._clock.now()
        return await self._store.modify_agent(
            who.org_id,
            agent_id,
            lambda a: msgspec.structs.replace(a, **given, updated_at=now),
        )

    async def delete(self, who: Principal, agent_id: UUID) -> None:
        if not await self._store.delete_agent(who.org_id, agent_id):
            raise NotFound("code agent not found")
