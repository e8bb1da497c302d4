"""Webhook tools (docs/tools.md): an organization's HTTP endpoints that its
agents' models may call, signed with ``X-Service-*`` like the credential resolver.

- ``WebhookTools``: the definitions (name unique per organization, a JSON Schema of
  the arguments with an object root, the URL, sealed headers, time and size
  limits), which agents may use which (``/api/agents/{id}/delegated``, a sealed
  record of kind ``delegated`` the turn reads with the thread), and ``execute``
  (one call by name outside a turn). The call is signed and sent by
  ``webhook_signing.signed_call``, as a runner's webhook step is.
- ``WebhookToolSource``: the turn's tool source. Arguments are checked against the
  schema before any call; a refused, failed, slow or oversized call is a tool
  result starting ``error:`` that the model reads.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Mapping
from typing import Any
from uuid import UUID

import jsonschema
import msgspec
from msgspec import UNSET, UnsetType

from agentsvc_core import json_schema
from agentsvc_core.entities import Agent, Principal, WebhookMethod, WebhookTool
from agentsvc_core.entities.webhook_tool import WebhookApproval
from agentsvc_core.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from agentsvc_core.json_schema import PatternRefused
from agentsvc_core.partial import given_fields
from agentsvc_core.ports import (
    RESERVED_TOOL_PREFIXES,
    TOOL_SEPARATOR,
    AgentRepository,
    Clock,
    SealedRecord,
    SecretBox,
    SecretStore,
    ServerTools,
    ThreadRepository,
    ToolCallContext,
    ToolSetup,
    ToolSpec,
    WebhookAnswer,
    WebhookCaller,
    WebhookToolStore,
)
from agentsvc_core.ports.mcp import UrlPolicy
from agentsvc_core.rules import MAX_DESCRIPTION, check_text, check_url_text
from agentsvc_core.use_cases.sealed import SealedRecords, reseal_rows
from agentsvc_core.use_cases.webhook_signing import (
    SigningSecrets,
    checked_headers,
    idempotency_key,
    opened_headers,
    signed_call,
)

__all__ = [
    "DEFAULT_MAX_RESULT_BYTES",
    "DEFAULT_TIMEOUT_MS",
    "MAX_MAX_RESULT_BYTES",
    "MAX_TIMEOUT_MS",
    "MIN_TIMEOUT_MS",
    "DelegatedConfig",
    "Execution",
    "WebhookToolChanges",
    "WebhookToolDraft",
    "WebhookToolSource",
    "WebhookTools",
]

NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
MIN_TIMEOUT_MS = 100
# a turn waits at most 60 s for any server-side tool (reply_tools.TOOL_TIMEOUT_S)
MAX_TIMEOUT_MS = 60_000
DEFAULT_TIMEOUT_MS = 10_000
DEFAULT_MAX_RESULT_BYTES = 64 * 1024
MAX_MAX_RESULT_BYTES = 1024 * 1024
MAX_SCHEMA_BYTES = 64 * 1024
MAX_DELEGATED = 128
_ATTEMPTS = 10  # compare-and-set attempts of a PATCH
_ERROR_EXCERPT = 500  # characters of a failed answer's body the model is shown
_enc = msgspec.json.Encoder()


def _context(org: str, tool_id: UUID) -> str:
    return f"{org}:webhook_tool:{tool_id}"


def check_tool_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise InvalidInput("name", "must be 1-64 letters, digits, '_' or '-'")
    if TOOL_SEPARATOR in name:
        raise InvalidInput("name", f"must not contain {TOOL_SEPARATOR!r} (kept for MCP tools)")
    lowered = name.lower()
    taken = next((p for p in RESERVED_TOOL_PREFIXES if lowered.startswith(p)), None)
    if taken is not None:
        raise InvalidInput("name", f"must not start with {taken!r} (kept for built-in tools)")
    return name


def check_parameters(schema: dict[str, Any], *, field: str = "parameters") -> dict[str, Any]:
    """A JSON Schema (draft 2020-12) whose root is an object schema."""
    if len(_enc.encode(schema)) > MAX_SCHEMA_BYTES:
        raise InvalidInput(field, f"at most {MAX_SCHEMA_BYTES} bytes of JSON")
    if schema.get("type") != "object":
        raise InvalidInput(field, 'the root must be {"type": "object", ...}')
    try:
        json_schema.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path)
        # a pattern RE2 cannot compile (or too large): why, not "is not a 'regex'"
        why = str(exc.cause) if isinstance(exc.cause, PatternRefused) else exc.message
        raise InvalidInput(
            field, f"not a valid JSON Schema: {why[:300]}" + f" at {where}" * bool(where)
        ) from None
    return schema


def argument_problem(schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """Why ``arguments`` do not fit the tool's schema (the first few problems), or None.
    Patterns match in RE2, within a bound of work (``json_schema``); one RE2 cannot
    compile (a schema stored before patterns were checked), or texts too long for
    the patterns, is a problem that names the pattern. References resolve only
    inside the schema: nothing is fetched, and one that cannot resolve is a problem."""
    validator = json_schema.validator(schema)
    try:
        found = json_schema.problems(validator, arguments)
        problems = sorted(found, key=lambda e: list(e.path))[:3]
    except Exception as exc:  # noqa: BLE001 - referencing's, PatternRefused: the schema's fault
        return f"the tool's schema cannot be applied: {str(exc)[:200]}"
    if not problems:
        return None
    return "; ".join(
        ("/".join(str(p) for p in e.path) + ": " if e.path else "") + e.message[:200]
        for e in problems
    )


class WebhookToolDraft(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    description: str = ""
    parameters: dict[str, Any] = msgspec.field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    url: str
    method: WebhookMethod = "POST"
    headers: dict[str, str] | None = None
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    approval: WebhookApproval = "never"


class WebhookToolChanges(msgspec.Struct, frozen=True, kw_only=True):
    """A PATCH: only the fields given change; ``headers=None`` removes them."""

    name: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    parameters: dict[str, Any] | UnsetType = UNSET
    url: str | UnsetType = UNSET
    method: WebhookMethod | UnsetType = UNSET
    headers: dict[str, str] | UnsetType | None = UNSET
    timeout_ms: int | UnsetType = UNSET
    max_result_bytes: int | UnsetType = UNSET
    approval: WebhookApproval | UnsetType = UNSET


class DelegatedConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Which of the organization's webhook tools an agent may use (none by default)."""

    agent_id: UUID
    org_id: str
    tool_ids: tuple[UUID, ...] = ()


class Execution(msgspec.Struct, frozen=True, kw_only=True):
    """The answer of ``POST /api/tools/execute``."""

    ok: bool
    status_code: int | None
    result: Any
    duration_ms: int
    error: str | None


class _Outcome(msgspec.Struct, frozen=True, kw_only=True):
    ok: bool
    text: str  # the result the model reads, or the error (without "error: ")
    answer: WebhookAnswer | None = None


class WebhookTools:
    def __init__(
        self,
        store: WebhookToolStore,
        agents: AgentRepository,
        threads: ThreadRepository,
        records: SecretStore,
        box: SecretBox,
        caller: WebhookCaller,
        urls: UrlPolicy,
        clock: Clock,
        signing: SigningSecrets,
    ) -> None:
        self._store = store
        self._agents = agents
        self._threads = threads
        self._records = SealedRecords(records, box)
        self._box = box
        self._caller = caller
        self._urls = urls
        self._clock = clock
        self._signing = signing

    # --- definitions ------------------------------------------------------------

    def _check(self, tool: WebhookTool) -> WebhookTool:
        check_tool_name(tool.name)
        check_text("description", tool.description, max_len=MAX_DESCRIPTION)
        check_parameters(tool.parameters)
        check_text("url", tool.url, max_len=4096, required=True)
        check_url_text("url", tool.url)
        refusal = self._urls.refusal(tool.url)
        if refusal:
            raise InvalidInput("url", refusal)
        if not MIN_TIMEOUT_MS <= tool.timeout_ms <= MAX_TIMEOUT_MS:
            raise InvalidInput(
                "timeout_ms", f"must be between {MIN_TIMEOUT_MS} and {MAX_TIMEOUT_MS}"
            )
        if not 1 <= tool.max_result_bytes <= MAX_MAX_RESULT_BYTES:
            raise InvalidInput("max_result_bytes", f"must be between 1 and {MAX_MAX_RESULT_BYTES}")
        if tool.approval not in ("never", "always"):
            raise InvalidInput("approval", "never or always")
        return tool

    def _sealed_headers(
        self, org: str, tool_id: UUID, headers: dict[str, str] | None
    ) -> str | None:
        if not headers:
            return None
        checked_headers("headers", headers)
        return self._box.seal(_enc.encode(headers), _context(org, tool_id))

    @staticmethod
    def _admin(who: Principal) -> None:
        if not who.is_admin:
            raise PermissionDenied("webhook tools are managed by the organization's admins")

    async def create(self, who: Principal, draft: WebhookToolDraft) -> WebhookTool:
        self._admin(who)
        now = self._clock.now()
        tool_id = uuid.uuid4()
        tool = self._check(
            WebhookTool(
                id=tool_id,
                org_id=who.org_id,
                name=draft.name,
                description=draft.description,
                parameters=draft.parameters,
                url=draft.url,
                method=draft.method,
                headers=None,
                timeout_ms=draft.timeout_ms,
                max_result_bytes=draft.max_result_bytes,
                approval=draft.approval,
                created_at=now,
                updated_at=now,
            )
        )
        tool = msgspec.structs.replace(
            tool, headers=self._sealed_headers(who.org_id, tool_id, draft.headers)
        )
        await self._store.add(tool)
        return tool

    async def list_all(self, who: Principal) -> list[WebhookTool]:
        return await self._store.list_all(who.org_id)

    async def get(self, who: Principal, tool_id: UUID) -> WebhookTool:
        return await self._store.get(who.org_id, tool_id)

    async def update(
        self, who: Principal, tool_id: UUID, changes: WebhookToolChanges
    ) -> WebhookTool:
        """Only the supplied fields change. A new ``url`` without ``headers`` drops
        the stored headers: secrets given for one address are never sent to
        another (as MCP servers' credentials). The write is a compare-and-set, so
        neither a concurrent PATCH nor a key rotation is lost."""
        self._admin(who)
        fields = given_fields(changes, leave=("headers",))
        for _ in range(_ATTEMPTS):
            current = await self._store.get(who.org_id, tool_id)
            updated = self._check(
                msgspec.structs.replace(current, **fields, updated_at=self._clock.now())
            )
            if changes.headers is not UNSET:
                updated = msgspec.structs.replace(
                    updated, headers=self._sealed_headers(who.org_id, tool_id, changes.headers)
                )
            elif updated.url != current.url:
                updated = msgspec.structs.replace(updated, headers=None)
            if await self._store.replace(updated, current):
                return updated
        raise Conflict("the tool is being changed by another request; try again")

    async def delete(self, who: Principal, tool_id: UUID) -> None:
        self._admin(who)
        await self._store.delete(who.org_id, tool_id)

    async def rotate_secrets(self, org_id: str | None = None) -> int:
        """Re-seal every tool's headers with the newest key. Returns how many."""
        rows = await self._store.sealed_headers(org_id)
        return await reseal_rows(self._box, rows, _context, self._store.reseal)

    # --- which agents may use which tools ----------------------------------------

    def delegated_of(
        self, org: str, agent_id: UUID, record: SealedRecord | None
    ) -> DelegatedConfig:
        if record is None:
            return DelegatedConfig(agent_id=agent_id, org_id=org)
        return self._records.open(org, "delegated", str(agent_id), record.value, DelegatedConfig)

    async def delegated(
        self, who: Principal, agent_id: UUID
    ) -> tuple[DelegatedConfig, list[WebhookTool]]:
        """The agent's configuration and the tools it names that still exist."""
        await self._agents.get(who.org_id, agent_id)
        config = await self._stored_delegation(who.org_id, agent_id)
        tools = await self._store.by_ids(who.org_id, config.tool_ids) if config.tool_ids else []
        return config, tools

    async def _stored_delegation(self, org: str, agent_id: UUID) -> DelegatedConfig:
        found = await self._records.get(org, "delegated", str(agent_id), DelegatedConfig)
        return found or DelegatedConfig(agent_id=agent_id, org_id=org)

    async def set_delegated(
        self, who: Principal, agent_id: UUID, tool_ids: list[UUID]
    ) -> tuple[DelegatedConfig, list[WebhookTool]]:
        self._admin(who)
        await self._agents.get(who.org_id, agent_id)
        wanted: tuple[UUID, ...] = tuple(dict.fromkeys(tool_ids))
        if len(wanted) > MAX_DELEGATED:
            raise InvalidInput("tool_ids", f"at most {MAX_DELEGATED} tools")
        tools = await self._store.by_ids(who.org_id, wanted) if wanted else []
        missing = set(wanted) - {t.id for t in tools}
        if missing:
            raise InvalidInput("tool_ids", f"no such tool: {sorted(map(str, missing))[0]}")
        config = DelegatedConfig(agent_id=agent_id, org_id=who.org_id, tool_ids=wanted)
        await self._records.put(who.org_id, "delegated", str(agent_id), config)
        return config, tools

    # --- calls ---------------------------------------------------------------------

    async def run(
        self,
        tool: WebhookTool,
        arguments: dict[str, Any],
        *,
        tool_call_id: str,
        agent_id: UUID | None,
        thread_id: UUID | None,
        user_id: str | None,
    ) -> _Outcome:
        """One call: the arguments checked, the body signed and sent, the answer judged."""
        problem = argument_problem(tool.parameters, arguments)
        if problem is not None:
            return _Outcome(ok=False, text=f"the arguments do not fit the tool's schema: {problem}")
        headers = opened_headers(self._box, tool.headers, _context(tool.org_id, tool.id))
        body = _enc.encode(
            {
                "tool": tool.name,
                "toolCallId": tool_call_id,
                "arguments": arguments,
                "orgId": tool.org_id,
                "agentId": None if agent_id is None else str(agent_id),
                "threadId": None if thread_id is None else str(thread_id),
                "userId": user_id,
            }
        )
        answer = await signed_call(
            self._caller,
            self._signing,
            org=tool.org_id,
            url=tool.url,
            method=tool.method,
            headers=headers,
            body=body,
            timeout_ms=tool.timeout_ms,
            max_bytes=tool.max_result_bytes,
            key=idempotency_key(tool.org_id, thread_id, tool_call_id),
        )
        return _Outcome(ok=answer.outcome == "ok", text=_judged(tool, answer), answer=answer)

    async def execute(
        self,
        who: Principal,
        name: str,
        arguments: dict[str, Any],
        *,
        agent_id: UUID | None = None,
        thread_id: UUID | None = None,
    ) -> Execution:
        """``POST /api/tools/execute``: one tool by name, outside a turn."""
        self._admin(who)
        tool = await self._store.by_name(who.org_id, name)
        if tool is None:
            raise NotFound(f"no webhook tool named {name!r}")
        if agent_id is not None:
            await self._agents.get(who.org_id, agent_id)
        if thread_id is not None:
            await self._threads.get(who.org_id, thread_id)  # NotFound: another org's
        started = time.monotonic()
        outcome = await self.run(
            tool,
            arguments,
            tool_call_id=f"exec_{uuid.uuid4().hex}",
            agent_id=agent_id,
            thread_id=thread_id,
            user_id=who.user_id,
        )
        answer = outcome.answer
        return Execution(
            ok=outcome.ok,
            status_code=None if answer is None else answer.status_code,
            result=_parsed(answer) if outcome.ok and answer is not None else None,
            duration_ms=answer.duration_ms
            if answer is not None
            else int((time.monotonic() - started) * 1000),
            error=None if outcome.ok else outcome.text,
        )


def _judged(tool: WebhookTool, answer: WebhookAnswer) -> str:
    """What the model reads: the answer's body on success, else why not."""
    match answer.outcome:
        case "ok":
            return answer.body
        case "status":
            excerpt = answer.body[:_ERROR_EXCERPT]
            return f"the tool answered HTTP {answer.status_code}" + f": {excerpt}" * bool(excerpt)
        case "timeout":
            return f"the tool did not answer within {tool.timeout_ms} ms"
        case "too_large":
            return f"the tool's answer is larger than {tool.max_result_bytes} bytes"
        case "refused":
            return f"the tool's URL was refused: {answer.reason}"
        case _:
            return f"the tool could not be reached: {answer.reason}"


def _parsed(answer: WebhookAnswer) -> Any:
    """The answer as JSON when it says it is JSON (and parses), else its text."""
    if "json" in answer.content_type:
        try:
            return msgspec.json.decode(answer.body)
        except msgspec.DecodeError:
            pass
    return answer.body


class WebhookToolSource(ServerTools):
    """The agent's delegated webhook tools, offered under their own names."""

    kinds = ("delegated",)

    def __init__(self, tools: WebhookTools, store: WebhookToolStore) -> None:
        self._tools = tools
        self._store = store

    def owns(self, name: str) -> bool:
        """The names a webhook tool may take (``check_tool_name``): none of another
        source's."""
        return (
            TOOL_SEPARATOR not in name
            and NAME.fullmatch(name) is not None
            and not name.lower().startswith(RESERVED_TOOL_PREFIXES)
        )

    def is_extension(self, name: str) -> bool:
        return False

    def _config(
        self, who: Principal, agent: Agent, records: Mapping[str, SealedRecord]
    ) -> DelegatedConfig:
        return self._tools.delegated_of(who.org_id, agent.id, records.get("delegated"))

    async def _delegated(
        self, who: Principal, agent: Agent, setup: ToolSetup | None
    ) -> DelegatedConfig:
        if setup is not None:
            return self._config(who, agent, setup.records)
        return await self._tools._stored_delegation(who.org_id, agent.id)

    async def list_tools(
        self, who: Principal, agent: Agent, setup: ToolSetup | None = None
    ) -> list[ToolSpec]:
        config = await self._delegated(who, agent, setup)
        if not config.tool_ids:
            return []  # no read at all for an agent without webhook tools
        return [
            ToolSpec(
                name=t.name,
                description=t.description,
                parameters=t.parameters,
                approval=t.approval == "always",
            )
            for t in await self._store.by_ids(who.org_id, config.tool_ids)
        ]

    async def call(
        self,
        who: Principal,
        agent: Agent,
        name: str,
        arguments: dict[str, Any],
        ctx: ToolCallContext,
    ) -> str:
        tool = await self._store.by_name(who.org_id, name)
        config = await self._delegated(who, agent, ctx.setup)
        if tool is None or tool.id not in config.tool_ids:
            return f"error: the webhook tool {name!r} is not available to this agent"
        outcome = await self._tools.run(
            tool,
            arguments,
            tool_call_id=ctx.tool_call_id,
            agent_id=agent.id,
            thread_id=ctx.thread_id,
            user_id=ctx.user_id,
        )
        return outcome.text if outcome.ok else f"error: {outcome.text}"
