"""Database integrations of an organization: resources with a sealed connection
string, agents' attachments (a sealed record of kind ``integrations`` per agent,
read by the turn with its other records), and the tools they give agents:
``db_<slug>__list_tables``, ``db_<slug>__describe_table``, ``db_<slug>__query``.

What is enforced where (docs/tools.md, "Database integrations"): writes are
refused by the database session itself (the adapter, ``ports/databases.py``);
``allowed_tables`` narrows what ``list_tables`` shows and which tables
``describe_table`` describes, but a ``query`` is not parsed: it reads whatever
the integration's database role may read. The role is the real boundary.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from uuid import UUID

import msgspec
from msgspec import UNSET, UnsetType

from agentsvc_core.entities import Integration, IntegrationType, Principal
from agentsvc_core.errors import InvalidInput
from agentsvc_core.partial import given_fields
from agentsvc_core.ports import (
    AgentRepository,
    Clock,
    DatabaseError,
    DatabaseTarget,
    IntegrationStore,
    SealedRecord,
    SecretBox,
    SecretStore,
    SqlDatabases,
    TableRows,
)
from agentsvc_core.rules import MAX_NAME, check_text
from agentsvc_core.use_cases.sealed import SealedRecords, reseal_rows

__all__ = [
    "APPROVABLE",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_ROWS",
    "DEFAULT_TIMEOUT_MS",
    "KIND",
    "MAX_ALLOWED_TABLES",
    "MAX_ATTACHED",
    "MAX_CONNECTION",
    "MAX_MAX_BYTES",
    "MAX_MAX_ROWS",
    "MAX_TABLE_NAME",
    "MAX_TIMEOUT_MS",
    "MIN_MAX_BYTES",
    "MIN_TIMEOUT_MS",
    "AgentIntegrations",
    "AttachedIntegrations",
    "IntegrationChanges",
    "IntegrationDraft",
    "Integrations",
    "result_json",
]

KIND = "integrations"  # the agent's sealed record of attached integration ids
DEFAULT_MAX_ROWS = 200
MAX_MAX_ROWS = 10_000
DEFAULT_MAX_BYTES = 64 * 1024
MIN_MAX_BYTES = 1024
MAX_MAX_BYTES = 1024 * 1024
DEFAULT_TIMEOUT_MS = 5000
MIN_TIMEOUT_MS = 100
MAX_TIMEOUT_MS = 60_000
MAX_CONNECTION = 4096
MAX_ALLOWED_TABLES = 500
MAX_TABLE_NAME = 256
MAX_ATTACHED = 20
MAX_SQL = 100_000
TOOL_PREFIX = "db_"
# an integration's tools (``db_<slug>__<tool>``): those an attachment may make wait
# for a person's approval
APPROVABLE = ("list_tables", "describe_table", "query")
_SLUG = re.compile(r"[^a-z0-9]+")
_SCHEMES = ("postgresql://", "postgres://")
_enc = msgspec.json.Encoder()


def slugify(name: str) -> str:
    """As MCP servers' slugs (lowercase, dashes), at most 40 characters, so that
    ``db_<slug>__describe_table`` stays within the 64 characters providers allow
    a tool name."""
    slug = _SLUG.sub("-", name.lower()).strip("-")[:40].strip("-")
    return slug or "db"


def _context(org_id: str, integration_id: UUID) -> str:
    """The associated data of an integration's sealed connection: its organization and row."""
    return f"{org_id}:integrations:{integration_id}"


def split_table(table: str) -> tuple[str | None, str]:
    """``schema.name`` or ``name`` (a name with no schema)."""
    schema, dot, name = table.partition(".")
    return (schema, name) if dot else (None, table)


def table_allowed(allowed: tuple[str, ...] | None, schema: str, name: str) -> bool:
    """Whether ``schema.name`` is in ``allowed`` (None: everything). An entry
    ``schema.table`` names that table; a bare ``table`` names it in any schema;
    compared without regard to case."""
    if allowed is None:
        return True
    full, bare = f"{schema}.{name}".lower(), name.lower()
    return any(entry.lower() in (full, bare) for entry in allowed)


def may_describe(allowed: tuple[str, ...] | None, schema: str | None, name: str) -> bool:
    """Whether ``describe_table`` may describe the table named so: with a schema,
    as ``table_allowed``; without one (the database picks it by its search path),
    only when a bare entry names it."""
    if allowed is None:
        return True
    if schema is not None:
        return table_allowed(allowed, schema, name)
    return any(entry.lower() == name.lower() for entry in allowed)


def result_json(rows: TableRows) -> str:
    """What a query tool answers: compact JSON."""
    return _enc.encode(
        {
            "columns": list(rows.columns),
            "rows": rows.rows,
            "row_count": len(rows.rows),
            "truncated": rows.truncated,
        }
    ).decode()


class IntegrationDraft(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    type: IntegrationType
    connection: str
    allowed_tables: tuple[str, ...] | None = None
    max_rows: int = DEFAULT_MAX_ROWS
    max_bytes: int = DEFAULT_MAX_BYTES
    statement_timeout_ms: int = DEFAULT_TIMEOUT_MS


class IntegrationChanges(msgspec.Struct, frozen=True, kw_only=True):
    """A PATCH: only the fields given (not ``UNSET``) change."""

    name: str | UnsetType = UNSET
    type: IntegrationType | UnsetType = UNSET
    connection: str | UnsetType = UNSET
    allowed_tables: tuple[str, ...] | UnsetType | None = UNSET
    max_rows: int | UnsetType = UNSET
    max_bytes: int | UnsetType = UNSET
    statement_timeout_ms: int | UnsetType = UNSET


class AgentIntegrations(msgspec.Struct, frozen=True, kw_only=True):
    """The integrations attached to an agent, in the order they were attached."""

    agent_id: UUID
    org_id: str
    integration_ids: tuple[UUID, ...] = ()
    # integration id -> its tools (``APPROVABLE``) whose calls wait for a person's
    # approval (docs/tools.md, "Approval before a call"); none: absent
    require_approval: dict[str, tuple[str, ...]] = {}


class AttachedIntegrations(msgspec.Struct, frozen=True, kw_only=True):
    """An agent's integrations that still exist, in attachment order, and which of
    their tools wait for approval (by integration id)."""

    integrations: list[Integration]
    require_approval: dict[str, tuple[str, ...]]


def _check(draft: IntegrationDraft, *, connection: bool = True) -> None:
    """The rules of a registration; ``connection``: whether to check the
    connection string (a change that does not give one keeps the stored one)."""
    check_text("name", draft.name, max_len=MAX_NAME, required=True)
    if draft.type != "postgresql":
        raise InvalidInput("type", "must be postgresql")
    if connection:
        check_text("connection", draft.connection, max_len=MAX_CONNECTION, required=True)
        if not draft.connection.startswith(_SCHEMES):
            raise InvalidInput("connection", "must be a postgresql:// URL")
    _check_bounds(draft)
    if draft.allowed_tables is not None:
        if len(draft.allowed_tables) > MAX_ALLOWED_TABLES:
            raise InvalidInput("allowed_tables", f"at most {MAX_ALLOWED_TABLES} tables")
        for table in draft.allowed_tables:
            check_text("allowed_tables", table, max_len=MAX_TABLE_NAME, required=True)


def _check_bounds(d: IntegrationDraft) -> None:
    bounds = (
        ("max_rows", d.max_rows, 1, MAX_MAX_ROWS),
        ("max_bytes", d.max_bytes, MIN_MAX_BYTES, MAX_MAX_BYTES),
        ("statement_timeout_ms", d.statement_timeout_ms, MIN_TIMEOUT_MS, MAX_TIMEOUT_MS),
    )
    for field, value, low, high in bounds:
        if not low <= value <= high:
            raise InvalidInput(field, f"must be between {low} and {high}")


class Integrations:
    def __init__(
        self,
        store: IntegrationStore,
        agents: AgentRepository,
        secrets: SecretStore,
        databases: SqlDatabases,
        box: SecretBox,
        clock: Clock,
    ) -> None:
        self._store = store
        self._agents = agents
        self._records = SealedRecords(secrets, box)
        self._db = databases
        self._box = box
        self._clock = clock

    # --- resources --------------------------------------------------------------

    async def create(self, who: Principal, draft: IntegrationDraft) -> Integration:
        """Check, test the connection (422 naming the problem when it fails), store."""
        _check(draft)
        await self._test(draft.connection)
        now = self._clock.now()
        integration_id = uuid.uuid4()
        return await self._store.add(
            Integration(
                id=integration_id,
                org_id=who.org_id,
                name=draft.name,
                slug=slugify(draft.name),
                type=draft.type,
                connection=self._box.seal(
                    draft.connection.encode(), _context(who.org_id, integration_id)
                ),
                allowed_tables=draft.allowed_tables,
                max_rows=draft.max_rows,
                max_bytes=draft.max_bytes,
                statement_timeout_ms=draft.statement_timeout_ms,
                created_at=now,
                updated_at=now,
            )
        )

    async def _test(self, connection: str) -> None:
        try:
            await self._db.test(connection)
        except DatabaseError as exc:
            raise InvalidInput("connection", exc.detail) from None

    async def update(
        self, who: Principal, integration_id: UUID, changes: IntegrationChanges
    ) -> Integration:
        """Change the fields given, checked as on create; a new connection string
        is tested first and sealed. Agents keep their attachment (it is by id) and
        their next turn reads the new settings; a new name gives a new slug, so
        the tools' names follow it."""
        current = await self._store.get(who.org_id, integration_id)
        given = given_fields(changes)
        # what is checked: the fields given (the others, stored, passed before)
        kept = IntegrationDraft(name=current.name, type=current.type, connection="")
        draft = msgspec.structs.replace(kept, **given)
        _check(draft, connection="connection" in given)
        if "connection" in given:
            await self._test(draft.connection)
        now = self._clock.now()

        def apply(stored: Integration) -> Integration:
            fields = {**given, "updated_at": now}
            if "name" in given and given["name"] != stored.name:
                fields["slug"] = slugify(given["name"])
            if "connection" in given:
                context = _context(stored.org_id, stored.id)
                fields["connection"] = self._box.seal(draft.connection.encode(), context)
            return msgspec.structs.replace(stored, **fields)

        return await self._store.modify(who.org_id, integration_id, apply)

    async def get(self, who: Principal, integration_id: UUID) -> Integration:
        return await self._store.get(who.org_id, integration_id)

    async def list_all(self, who: Principal) -> list[Integration]:
        return await self._store.list_all(who.org_id)

    async def delete(self, who: Principal, integration_id: UUID) -> None:
        """Agents it is attached to keep its id until their next attach or detach;
        their turns skip it meanwhile."""
        await self._store.delete(who.org_id, integration_id)

    def target(self, integration: Integration) -> DatabaseTarget:
        """The opened connection and bounds of ``integration`` (raises ``SecretUnreadable``)."""
        connection = self._box.open(
            integration.connection, _context(integration.org_id, integration.id)
        )
        return DatabaseTarget(
            connection=connection.decode(),
            max_rows=integration.max_rows,
            max_bytes=integration.max_bytes,
            statement_timeout_ms=integration.statement_timeout_ms,
        )

    async def rotate_secrets(self, org_id: str | None = None) -> int:
        """Re-seal every stored connection string with the newest key. Returns how many."""
        rows = await self._store.sealed_connections(org_id)
        return await reseal_rows(self._box, rows, _context, self._store.reseal)

    # --- attachments ------------------------------------------------------------

    def attached_record(
        self, org: str, agent_id: UUID, records: Mapping[str, SealedRecord]
    ) -> AgentIntegrations | None:
        """The agent's record as the turn read it (None: none stored)."""
        record = records.get(KIND)
        if record is None:
            return None
        return self._records.open(org, KIND, str(agent_id), record.value, AgentIntegrations)

    def attached_ids(
        self, org: str, agent_id: UUID, records: Mapping[str, SealedRecord]
    ) -> tuple[UUID, ...]:
        """The ids in the agent's record as the turn read it (none stored: none)."""
        opened = self.attached_record(org, agent_id, records)
        return () if opened is None else opened.integration_ids

    async def _record(self, org: str, agent_id: UUID) -> AgentIntegrations:
        stored = await self._records.get(org, KIND, str(agent_id), AgentIntegrations)
        return stored or AgentIntegrations(agent_id=agent_id, org_id=org)

    async def _ids(self, org: str, agent_id: UUID) -> tuple[UUID, ...]:
        return (await self._record(org, agent_id)).integration_ids

    async def by_ids(self, org: str, ids: tuple[UUID, ...]) -> list[Integration]:
        return await self._store.get_many(org, list(ids)) if ids else []

    async def of_agent(self, org: str, agent_id: UUID) -> list[Integration]:
        """The agent's integrations that still exist, in attachment order."""
        ids = await self._ids(org, agent_id)
        return await self._store.get_many(org, list(ids)) if ids else []

    async def attached(self, who: Principal, agent_id: UUID) -> list[Integration]:
        return (await self.attachments(who, agent_id)).integrations

    async def attachments(self, who: Principal, agent_id: UUID) -> AttachedIntegrations:
        """The agent's integrations with the tools of each that wait for approval."""
        await self._agents.get(who.org_id, agent_id)
        return await self.attachments_of(who.org_id, agent_id)

    async def attachments_of(self, org: str, agent_id: UUID) -> AttachedIntegrations:
        record = await self._record(org, agent_id)
        return AttachedIntegrations(
            integrations=await self.by_ids(org, record.integration_ids),
            require_approval=record.require_approval,
        )

    async def _change(
        self,
        org: str,
        agent_id: UUID,
        fn: Callable[[AgentIntegrations], AgentIntegrations],
    ) -> AttachedIntegrations:
        """Change the agent's record without losing a concurrent attach or detach
        (``SealedRecords.change``); integrations found deleted drop out of it."""
        ids = await self._ids(org, agent_id)
        gone = {str(i) for i in set(ids) - {i.id for i in await self.by_ids(org, ids)}}

        def changed(current: AgentIntegrations | None) -> AgentIntegrations:
            base = current or AgentIntegrations(agent_id=agent_id, org_id=org)
            return fn(
                AgentIntegrations(
                    agent_id=agent_id,
                    org_id=org,
                    integration_ids=tuple(i for i in base.integration_ids if str(i) not in gone),
                    require_approval={
                        k: v for k, v in base.require_approval.items() if k not in gone
                    },
                )
            )

        record = await self._records.change(org, KIND, str(agent_id), AgentIntegrations, changed)
        return AttachedIntegrations(
            integrations=await self.by_ids(org, record.integration_ids),
            require_approval=record.require_approval,
        )

    async def attach(
        self,
        who: Principal,
        agent_id: UUID,
        integration_id: UUID,
        require_approval: tuple[str, ...] = (),
    ) -> AttachedIntegrations:
        """Attach; attaching again keeps its place and replaces which of its tools
        wait for approval (``require_approval``, of ``APPROVABLE``). Answers the
        agent's integrations."""
        await self._agents.get(who.org_id, agent_id)
        await self._store.get(who.org_id, integration_id)
        unknown = [t for t in require_approval if t not in APPROVABLE]
        if unknown:
            raise InvalidInput(
                "require_approval", f"{unknown[0]!r} is not one of {', '.join(APPROVABLE)}"
            )
        key, tools = str(integration_id), tuple(dict.fromkeys(require_approval))

        def add(current: AgentIntegrations) -> AgentIntegrations:
            ids = current.integration_ids
            if integration_id not in ids:
                if len(ids) >= MAX_ATTACHED:
                    raise InvalidInput("integration_id", f"an agent has at most {MAX_ATTACHED}")
                ids = (*ids, integration_id)
            approvals = {k: v for k, v in current.require_approval.items() if k != key}
            if tools:
                approvals[key] = tools
            return msgspec.structs.replace(current, integration_ids=ids, require_approval=approvals)

        return await self._change(who.org_id, agent_id, add)

    async def detach(self, who: Principal, agent_id: UUID, integration_id: UUID) -> bool:
        """Whether it was attached. An id that names no integration and is not
        attached is ``NotFound``."""
        await self._agents.get(who.org_id, agent_id)
        if integration_id not in await self._ids(who.org_id, agent_id):
            await self._store.get(who.org_id, integration_id)  # NotFound if none
            return False
        key = str(integration_id)
        await self._change(
            who.org_id,
            agent_id,
            lambda r: msgspec.structs.replace(
                r,
                integration_ids=tuple(i for i in r.integration_ids if i != integration_id),
                require_approval={k: v for k, v in r.require_approval.items() if k != key},
            ),
        )
        return True
