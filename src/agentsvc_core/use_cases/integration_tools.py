"""The tools an agent's attached database integrations give its model
(docs/tools.md, "Database integrations"): ``db_<slug>__list_tables``,
``db_<slug>__describe_table``, ``db_<slug>__query``; the turn's tool source over
``use_cases/integrations.py`` (the resources and the agents' attachments)."""

from __future__ import annotations

from typing import Any

import msgspec

from agentsvc_core.entities import Agent, Integration, Principal
from agentsvc_core.errors import NotFound
from agentsvc_core.ports import (
    TOOL_SEPARATOR,
    DatabaseError,
    DatabaseTarget,
    SecretUnreadable,
    ServerTools,
    SqlDatabases,
    ToolCallContext,
    ToolSetup,
    ToolSpec,
)
from agentsvc_core.use_cases.integrations import (
    KIND,
    MAX_SQL,
    MAX_TABLE_NAME,
    TOOL_PREFIX,
    AttachedIntegrations,
    Integrations,
    may_describe,
    result_json,
    split_table,
    table_allowed,
)

__all__ = ["IntegrationTools"]

_enc = msgspec.json.Encoder()

_NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}
_TABLE_ARGS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "table": {"type": "string", "description": "the table or view, as name or schema.name"}
    },
    "required": ["table"],
}
_SQL_ARGS: dict[str, Any] = {
    "type": "object",
    "properties": {"sql": {"type": "string", "description": "one read-only SQL statement"}},
    "required": ["sql"],
}


class IntegrationTools(ServerTools):
    """The tools of an agent's attached database integrations. The turn reads the
    agent's record of attached ids with its other records (``kinds``); an agent
    with none costs nothing more, one with some one read of those integrations."""

    kinds: tuple[str, ...] = (KIND,)

    def __init__(self, integrations: Integrations, databases: SqlDatabases) -> None:
        self._integrations = integrations
        self._db = databases

    def owns(self, name: str) -> bool:
        slug, sep, tool = name.partition(TOOL_SEPARATOR)
        return name.startswith(TOOL_PREFIX) and bool(sep and tool) and len(slug) > len(TOOL_PREFIX)

    def is_extension(self, name: str) -> bool:
        return False

    async def _attachments(
        self, who: Principal, agent: Agent, setup: ToolSetup | None
    ) -> AttachedIntegrations:
        if setup is None:
            return await self._integrations.attachments_of(who.org_id, agent.id)
        record = self._integrations.attached_record(who.org_id, agent.id, setup.records)
        if record is None or not record.integration_ids:
            return AttachedIntegrations(integrations=[], require_approval={})
        return AttachedIntegrations(
            integrations=await self._integrations.by_ids(who.org_id, record.integration_ids),
            require_approval=record.require_approval,
        )

    async def _attached(
        self, who: Principal, agent: Agent, setup: ToolSetup | None
    ) -> list[Integration]:
        return (await self._attachments(who, agent, setup)).integrations

    async def list_tools(
        self, who: Principal, agent: Agent, setup: ToolSetup | None = None
    ) -> list[ToolSpec]:
        """The attached integrations' tools; those the attachment names in
        ``require_approval`` are marked (their calls wait for a person's approval)."""
        found = await self._attachments(who, agent, setup)
        tools = self._listed(found.integrations)
        if not found.require_approval:
            return tools
        waits = {
            f"{TOOL_PREFIX}{i.slug}{TOOL_SEPARATOR}{t}"
            for i in found.integrations
            for t in found.require_approval.get(str(i.id), ())
        }
        return [msgspec.structs.replace(t, approval=True) if t.name in waits else t for t in tools]

    @staticmethod
    def _listed(attached: list[Integration]) -> list[ToolSpec]:
        tools = []
        for i in attached:
            base = f"{TOOL_PREFIX}{i.slug}{TOOL_SEPARATOR}"
            about = f"the {i.type} database {i.name!r}"
            if i.allowed_tables is not None:
                about += f" (tables: {', '.join(i.allowed_tables)})"
            tools += [
                ToolSpec(
                    name=base + "list_tables",
                    description=f"List the tables and views of {about}.",
                    parameters=_NO_ARGS,
                ),
                ToolSpec(
                    name=base + "describe_table",
                    description=f"Describe the columns of one table of {about}.",
                    parameters=_TABLE_ARGS,
                ),
                ToolSpec(
                    name=base + "query",
                    description=(
                        f"Run one read-only SQL statement on {about}; answers JSON "
                        f"(columns, rows, row_count, truncated), at most {i.max_rows} rows."
                    ),
                    parameters=_SQL_ARGS,
                ),
            ]
        return tools

    async def call(
        self,
        who: Principal,
        agent: Agent,
        name: str,
        arguments: dict[str, Any],
        ctx: ToolCallContext,
    ) -> str:
        slug, _, tool = name.removeprefix(TOOL_PREFIX).partition(TOOL_SEPARATOR)
        found = next(
            (i for i in await self._attached(who, agent, ctx.setup) if i.slug == slug), None
        )
        if found is None:
            return f"error: no database integration {slug!r} is attached to this agent"
        try:
            target = self._integrations.target(found)
            return await self._run(found, target, tool, arguments)
        except (DatabaseError, SecretUnreadable, NotFound) as exc:
            return f"error: {exc.detail}"

    async def _run(
        self, integration: Integration, target: DatabaseTarget, tool: str, arguments: dict[str, Any]
    ) -> str:
        allowed = integration.allowed_tables
        if tool == "list_tables":
            tables = [
                {"schema": t.schema, "name": t.name, "kind": t.kind}
                for t in await self._db.list_tables(target)
                if table_allowed(allowed, t.schema, t.name)
            ]
            return _enc.encode({"tables": tables}).decode()
        if tool == "describe_table":
            table = arguments.get("table")
            if not isinstance(table, str) or not table.strip() or len(table) > MAX_TABLE_NAME:
                return "error: describe_table needs a table name (string)"
            schema, bare = split_table(table.strip())
            if not may_describe(allowed, schema, bare):
                return (
                    f"error: the table {table!r} is not among this integration's allowed "
                    "tables (name it as schema.table, as list_tables shows it)"
                )
            return result_json(await self._db.describe_table(target, schema, bare))
        if tool == "query":
            sql = arguments.get("sql")
            if not isinstance(sql, str) or not sql.strip():
                return "error: query needs sql (a string holding one statement)"
            if len(sql) > MAX_SQL or "\x00" in sql:
                return f"error: sql must be at most {MAX_SQL} characters, without NUL"
            return result_json(await self._db.query(target, sql))
        return f"error: no tool {tool!r} (list_tables, describe_table, query)"
