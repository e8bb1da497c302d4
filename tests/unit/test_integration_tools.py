"""The database integrations' tool source: names it owns, the allow-list rules,
and no storage read for an agent with no integration attached."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest

from agentsvc_adapters.clock import SystemClock
from agentsvc_adapters.crypto import AesGcmBox
from agentsvc_adapters.crypto.aesgcm import new_key_spec, parse_keys
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_adapters.memory.integrations import MemoryIntegrations
from agentsvc_core.entities import Agent, Integration, Principal
from agentsvc_core.ports import (
    DatabaseTarget,
    IntegrationStore,
    SqlDatabases,
    TableName,
    TableRows,
    ToolCallContext,
    ToolSetup,
)
from agentsvc_core.use_cases.integration_tools import IntegrationTools
from agentsvc_core.use_cases.integrations import (
    KIND,
    IntegrationDraft,
    Integrations,
    may_describe,
    slugify,
    table_allowed,
)
from agentsvc_core.use_cases.mcp_servers import McpTools


class FakeDatabases(SqlDatabases):
    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    async def test(self, connection: str) -> None:
        self.seen.append(("test", connection))

    async def list_tables(self, target: DatabaseTarget) -> list[TableName]:
        self.seen.append(("list", target.connection))
        return [
            TableName(schema="public", name="orders", kind="table"),
            TableName(schema="vault", name="keys", kind="table"),
        ]

    async def describe_table(
        self, target: DatabaseTarget, schema: str | None, name: str
    ) -> TableRows:
        self.seen.append(("describe", (schema, name)))
        return TableRows(columns=("column",), rows=[["id"]])

    async def query(self, target: DatabaseTarget, sql: str) -> TableRows:
        self.seen.append(("query", (target.max_rows, sql)))
        return TableRows(columns=("n",), rows=[[1]])


class CountingIntegrations(MemoryStorage):
    """Memory storage whose integration reads are counted."""

    reads = 0

    def __init__(self) -> None:
        super().__init__()
        inner = super().integrations
        assert isinstance(inner, MemoryIntegrations)
        outer = self

        class Counting(type(inner)):  # type: ignore[misc]
            async def get_many(self, org_id: str, ids: list[UUID]) -> list[Integration]:
                outer.reads += 1
                return await inner.get_many(org_id, ids)

        counting = Counting()
        counting._items = inner._items
        self._counting = counting

    @property
    def integrations(self) -> IntegrationStore:
        return self._counting


WHO = Principal(org_id="org-1", method="api_key")


def agent() -> Agent:
    now = datetime.now(UTC)
    return Agent(
        id=uuid.uuid4(),
        org_id="org-1",
        name="A",
        description="",
        stable_preamble="",
        default_model="local",
        created_at=now,
        updated_at=now,
    )


def world() -> tuple[CountingIntegrations, Integrations, IntegrationTools, FakeDatabases]:
    storage = CountingIntegrations()
    box = AesGcmBox(parse_keys(new_key_spec("t")))
    db = FakeDatabases()
    uc = Integrations(storage.integrations, storage.agents, storage.secrets, db, box, SystemClock())
    return storage, uc, IntegrationTools(uc, db), db


def test_names_it_owns_and_the_mcp_source_does_not() -> None:
    _, _, tools, _ = world()
    mcp = McpTools.__new__(McpTools)
    for name in ("db_shop__query", "db_a-b__list_tables"):
        assert tools.owns(name)
        assert not mcp.owns(name)
    for name in ("shop__query", "db___query", "db_shop", "db_shop__", "web_fetch"):
        assert not tools.owns(name)
    assert not tools.is_extension("db_shop__query")
    assert tools.kinds == (KIND,)


def test_slugs_keep_tool_names_within_64_characters() -> None:
    slug = slugify("Ä very long name of a database " * 4)
    assert len(f"db_{slug}__describe_table") <= 64
    assert slugify("Sales DB (EU)") == "sales-db-eu"
    assert slugify("!!!") == "db"


def test_allowed_tables_rules() -> None:
    allowed = ("public.orders", "Customers")
    assert table_allowed(None, "x", "y")
    assert table_allowed(allowed, "public", "ORDERS")
    assert table_allowed(allowed, "crm", "customers")  # a bare entry: any schema
    assert not table_allowed(allowed, "sales", "orders")
    assert may_describe(allowed, "public", "orders")
    assert not may_describe(allowed, None, "orders")  # which schema is the database's choice
    assert may_describe(allowed, None, "customers")
    assert may_describe(None, None, "anything")


async def test_an_agent_without_integrations_costs_no_read() -> None:
    storage, uc, tools, _ = world()
    a = agent()
    await storage.agents.add(a)
    assert await tools.list_tools(WHO, a, ToolSetup(records={})) == []
    assert storage.reads == 0
    made = await uc.create(
        WHO, IntegrationDraft(name="Shop", type="postgresql", connection="postgresql://h/db")
    )
    await uc.attach(WHO, a.id, made.id)
    found = await storage.secrets.get_many("org-1", [(KIND, str(a.id))])
    setup = ToolSetup(records={KIND: found[(KIND, str(a.id))]})
    before = storage.reads
    names = [t.name for t in await tools.list_tools(WHO, a, setup)]
    assert names == ["db_shop__list_tables", "db_shop__describe_table", "db_shop__query"]
    assert storage.reads == before + 1  # one read of the attached integrations


async def test_calls_reach_the_database_with_the_opened_connection() -> None:
    storage, uc, tools, db = world()
    a = agent()
    await storage.agents.add(a)
    made = await uc.create(
        WHO,
        IntegrationDraft(
            name="Shop",
            type="postgresql",
            connection="postgresql://u:pw-7f3e9c2a@h/db",
            allowed_tables=("public.orders",),
            max_rows=7,
        ),
    )
    stored = await storage.integrations.get("org-1", made.id)
    # a password long enough that a sealed (random-looking) value cannot hold it by chance
    assert "pw-7f3e9c2a" not in stored.connection
    await uc.attach(WHO, a.id, made.id)
    ctx = ToolCallContext(tool_call_id="c1")
    listed = await tools.call(WHO, a, "db_shop__list_tables", {}, ctx)
    assert listed == '{"tables":[{"schema":"public","name":"orders","kind":"table"}]}'
    assert ("list", "postgresql://u:pw-7f3e9c2a@h/db") in db.seen
    answer = await tools.call(WHO, a, "db_shop__query", {"sql": "SELECT 1"}, ctx)
    assert answer == '{"columns":["n"],"rows":[[1]],"row_count":1,"truncated":false}'
    assert ("query", (7, "SELECT 1")) in db.seen
    refused = await tools.call(WHO, a, "db_shop__describe_table", {"table": "vault.keys"}, ctx)
    assert refused.startswith("error: the table 'vault.keys' is not among")
    assert not any(kind == "describe" for kind, _ in db.seen)
    assert (await tools.call(WHO, a, "db_shop__query", {}, ctx)).startswith("error:")
    assert (await tools.call(WHO, a, "db_other__query", {"sql": "x"}, ctx)).startswith(
        "error: no database integration 'other'"
    )
    assert (await tools.call(WHO, a, "db_shop__drop", {}, ctx)).startswith("error: no tool")


@pytest.mark.parametrize("bad", ["mysql://h/db", "", "postgresql://h/\x00"])
async def test_connections_that_are_no_postgresql_url_are_422(bad: str) -> None:
    from agentsvc_core.errors import InvalidInput  # noqa: PLC0415

    _, uc, _, db = world()
    with pytest.raises(InvalidInput, match="connection"):
        await uc.create(WHO, IntegrationDraft(name="X", type="postgresql", connection=bad))
    assert db.seen == []
