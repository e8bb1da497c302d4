"""Database integrations (use_cases/integrations.py, docs/tools.md "Database
integrations") over the memory storage and a recording database port: the rules of
a registration, the sealed connection, attachments, and the three tools an agent's
model sees and what each answers."""

from __future__ import annotations

import uuid
from typing import Any
from uuid import UUID

import msgspec
import pytest

from agentsvc_adapters.crypto.aesgcm import AesGcmBox
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_core.entities import Agent, Integration, Principal
from agentsvc_core.errors import Conflict, InvalidInput, NotFound
from agentsvc_core.ports import (
    DatabaseError,
    DatabaseTarget,
    SecretUnreadable,
    SqlDatabases,
    TableName,
    TableRows,
    ToolCallContext,
    ToolSetup,
)
from agentsvc_core.use_cases.integration_tools import IntegrationTools
from agentsvc_core.use_cases.integrations import (
    KIND,
    MAX_ATTACHED,
    MAX_SQL,
    AgentIntegrations,
    IntegrationChanges,
    IntegrationDraft,
    Integrations,
    may_describe,
    result_json,
    slugify,
    split_table,
    table_allowed,
)
from tests.contract.test_agents_contract import agent_in
from tests.unit.turn_world import Clock

ORG = "org-db"
ADMIN = Principal(org_id=ORG, method="api_key")
OTHER = Principal(org_id="org-else", method="api_key")
KEY1 = ("k1", b"\x08" * 32)
KEY2 = ("k2", b"\x09" * 32)
URL = "postgresql://reader:pw-4b1d9e77@db.example.com/shop"
CTX = ToolCallContext(tool_call_id="call_1")
DESCRIBED = (
    '{"columns":["column","type"],"rows":[["id","integer"]],"row_count":1,"truncated":false}'
)


class Databases(SqlDatabases):
    """The customer's database: records every call and the target it was given;
    ``fail`` (a ``DatabaseError``) is raised by the next call instead."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.targets: list[DatabaseTarget] = []
        self.fail: DatabaseError | None = None
        self.tables = [
            TableName(schema="public", name="orders", kind="table"),
            TableName(schema="crm", name="Customers", kind="view"),
            TableName(schema="vault", name="keys", kind="table"),
        ]
        self.rows = TableRows(columns=("n", "n"), rows=[[1, 2], [3, 4]], truncated=True)

    def _raise(self) -> None:
        if self.fail is not None:
            raise self.fail

    async def test(self, connection: str) -> None:
        self.calls.append(("test", connection))
        self._raise()

    async def list_tables(self, target: DatabaseTarget) -> list[TableName]:
        self.calls.append(("list", None))
        self.targets.append(target)
        self._raise()
        return self.tables

    async def describe_table(
        self, target: DatabaseTarget, schema: str | None, name: str
    ) -> TableRows:
        self.calls.append(("describe", (schema, name)))
        self.targets.append(target)
        self._raise()
        return TableRows(columns=("column", "type"), rows=[["id", "integer"]])

    async def query(self, target: DatabaseTarget, sql: str) -> TableRows:
        self.calls.append(("query", sql))
        self.targets.append(target)
        self._raise()
        return self.rows


class World:
    def __init__(self) -> None:
        self.storage = MemoryStorage()
        self.box = AesGcmBox([KEY1])
        self.db = Databases()
        self.clock = Clock()
        self.uc = self.use_cases(self.box)
        self.tools = IntegrationTools(self.uc, self.db)

    def use_cases(self, box: AesGcmBox) -> Integrations:
        s = self.storage
        return Integrations(s.integrations, s.agents, s.secrets, self.db, box, self.clock)

    async def agent(self, org: str = ORG) -> Agent:
        agent = agent_in(org)
        await self.storage.agents.add(agent)
        return agent

    async def make(self, name: str = "Shop", who: Principal = ADMIN, **over: Any) -> Integration:
        draft = IntegrationDraft(name=name, type="postgresql", connection=URL)
        return await self.uc.create(who, msgspec.structs.replace(draft, **over))

    async def record(self, agent: Agent) -> ToolSetup:
        """What the turn reads with the thread: the agent's sealed records by kind."""
        found = await self.storage.secrets.get_many(agent.org_id, [(KIND, str(agent.id))])
        return ToolSetup(records={KIND: found[(KIND, str(agent.id))]} if found else {})


async def refused(w: World, **over: Any) -> InvalidInput:
    with pytest.raises(InvalidInput) as e:
        await w.make(**over)
    return e.value


# --- names, tables, answers ----------------------------------------------------------


def test_slugs_are_lowercase_dashes_at_most_40_characters() -> None:
    assert slugify("  Sales DB (EU)!! ") == "sales-db-eu"
    assert slugify("a" * 50) == "a" * 40
    # the cut falls on a dash: no slug ends with one
    assert slugify("a" * 39 + " b" + "c" * 9) == "a" * 39
    # what the name starts with that is no letter or digit is left out before the cut
    assert slugify("(" + "b" * 45) == "b" * 40
    assert slugify("---") == "db"
    assert slugify("ÄÖ") == "db"


def test_a_table_is_split_at_its_schema() -> None:
    assert split_table("public.orders") == ("public", "orders")
    assert split_table("orders") == (None, "orders")
    # the schema is what comes before the first dot (schema names hold none)
    assert split_table("public.orders.2026") == ("public", "orders.2026")


def test_allowed_tables_compare_without_regard_to_case() -> None:
    assert table_allowed(("PUBLIC.Orders",), "public", "oRders")
    assert table_allowed(("Orders",), "Sales", "ORDERS")
    assert not table_allowed(("public.orders",), "public", "customers")
    assert not table_allowed(("orders",), "public", "orders2")
    assert not table_allowed((), "public", "orders")
    assert may_describe(("PUBLIC.Orders",), "public", "ORDERS")
    assert not may_describe(("public.orders",), "sales", "orders")
    # without a schema only a bare entry names it
    assert may_describe(("ORDERS",), None, "orders")
    assert not may_describe(("public.orders",), None, "orders")
    assert not may_describe(("orders",), None, "customers")


def test_a_query_answers_compact_json_with_its_row_count() -> None:
    rows = TableRows(columns=("a", "b"), rows=[[1, None], ["x", True]], truncated=True)
    assert result_json(rows) == (
        '{"columns":["a","b"],"rows":[[1,null],["x",true]],"row_count":2,"truncated":true}'
    )
    assert result_json(TableRows(columns=(), rows=[])) == (
        '{"columns":[],"rows":[],"row_count":0,"truncated":false}'
    )


# --- registering ------------------------------------------------------------------------


async def test_a_registration_is_tested_sealed_and_stored() -> None:
    w = World()
    w.clock.advance(7)
    made = await w.make(
        "Sales DB",
        allowed_tables=("public.orders", "customers"),
        max_rows=7,
        max_bytes=2048,
        statement_timeout_ms=1500,
    )
    assert w.db.calls == [("test", URL)]
    assert (made.org_id, made.name, made.slug, made.type) == (
        ORG,
        "Sales DB",
        "sales-db",
        "postgresql",
    )
    assert made.allowed_tables == ("public.orders", "customers")
    assert (made.max_rows, made.max_bytes, made.statement_timeout_ms) == (7, 2048, 1500)
    assert made.created_at == made.updated_at == w.clock.now()
    assert "pw-4b1d9e77" not in made.connection
    # sealed to its organization and row
    assert w.box.open(made.connection, f"{ORG}:integrations:{made.id}") == URL.encode()
    with pytest.raises(SecretUnreadable):
        w.box.open(made.connection, f"{ORG}:integrations:{uuid.uuid4()}")
    assert await w.uc.get(ADMIN, made.id) == made
    assert await w.uc.list_all(ADMIN) == [made]
    assert await w.uc.list_all(OTHER) == []
    with pytest.raises(NotFound):
        await w.uc.get(OTHER, made.id)


async def test_defaults_of_a_registration() -> None:
    w = World()
    made = await w.make(connection="postgres://h/db")
    assert made.allowed_tables is None
    assert (made.max_rows, made.max_bytes, made.statement_timeout_ms) == (200, 65536, 5000)
    assert w.uc.target(made) == DatabaseTarget(
        connection="postgres://h/db", max_rows=200, max_bytes=65536, statement_timeout_ms=5000
    )


async def test_the_name_type_and_connection_are_checked_before_any_connection() -> None:
    w = World()
    for over, field in [
        ({"name": ""}, "name"),
        ({"name": "   "}, "name"),
        ({"name": "x" * 257}, "name"),
        ({"type": "mysql"}, "type"),
        ({"connection": ""}, "connection"),
        ({"connection": "postgresql://" + "h" * 4084}, "connection"),
        ({"connection": "mysql://h/db"}, "connection"),
        ({"connection": "Postgresql://h/db"}, "connection"),
        ({"connection": " postgresql://h/db"}, "connection"),
    ]:
        e = await refused(w, **over)
        assert e.field == field, over
    assert (await refused(w, type="mysql")).problem == "must be postgresql"
    assert (await refused(w, connection="")).problem == "must not be empty"
    assert (await refused(w, connection=" ")).problem == "must not be empty"
    assert (await refused(w, connection="mysql://h")).problem == "must be a postgresql:// URL"
    assert w.db.calls == []
    # at the limits
    assert (await w.make("x" * 256)).name == "x" * 256
    long = "postgresql://" + "h" * 4083
    assert w.uc.target(await w.make("long", connection=long)).connection == long


@pytest.mark.parametrize(
    ("field", "low", "high"),
    [
        ("max_rows", 1, 10_000),
        ("max_bytes", 1024, 1_048_576),
        ("statement_timeout_ms", 100, 60_000),
    ],
)
async def test_bounds_are_inclusive(field: str, low: int, high: int) -> None:
    w = World()
    for value in (low - 1, high + 1):
        e = await refused(w, **{field: value})
        assert (e.field, e.problem) == (field, f"must be between {low} and {high}")
    assert w.db.calls == []
    at_low: dict[str, Any] = {field: low}
    at_high: dict[str, Any] = {field: high}
    assert getattr(await w.make("low", **at_low), field) == low
    assert getattr(await w.make("high", **at_high), field) == high


async def test_allowed_tables_are_bounded_and_checked() -> None:
    w = World()
    e = await refused(w, allowed_tables=tuple(f"t{i}" for i in range(501)))
    assert (e.field, e.problem) == ("allowed_tables", "at most 500 tables")
    for bad in ("", " ", "x" * 257, "a\x00b"):
        assert (await refused(w, allowed_tables=("ok", bad))).field == "allowed_tables"
    assert w.db.calls == []
    many = tuple(f"t{i}" for i in range(500))
    assert (await w.make("many", allowed_tables=many)).allowed_tables == many
    assert (await w.make("long", allowed_tables=("x" * 256,))).allowed_tables == ("x" * 256,)
    assert (await w.make("none", allowed_tables=())).allowed_tables == ()


async def test_a_failed_connection_test_is_422_naming_the_problem_and_stores_nothing() -> None:
    w = World()
    w.db.fail = DatabaseError("could not reach db.example.com:5432")
    e = await refused(w)
    assert (e.field, e.problem) == ("connection", "could not reach db.example.com:5432")
    assert e.__cause__ is None
    assert await w.uc.list_all(ADMIN) == []


# --- changing ---------------------------------------------------------------------------

URL2 = "postgresql://writer:pw-9e3c0f12@db2.example.com/shop"


async def changed(w: World, made: Integration, **over: Any) -> Integration:
    return await w.uc.update(ADMIN, made.id, IntegrationChanges(**over))


async def test_a_change_changes_only_the_fields_given() -> None:
    w = World()
    made = await w.make("Sales DB", allowed_tables=("orders",), max_rows=7)
    w.db.calls.clear()
    w.clock.advance(5)
    after = await changed(w, made, max_bytes=2048)
    assert after == msgspec.structs.replace(made, max_bytes=2048, updated_at=w.clock.now())
    assert w.db.calls == []  # the connection is tested only when a new one is given
    assert await w.uc.get(ADMIN, made.id) == after
    w.clock.advance(5)
    after = await changed(
        w, made, allowed_tables=None, max_rows=10_000, statement_timeout_ms=100, type="postgresql"
    )
    assert (after.allowed_tables, after.max_rows, after.max_bytes) == (None, 10_000, 2048)
    assert (after.statement_timeout_ms, after.created_at) == (100, made.created_at)
    assert after.updated_at == w.clock.now()
    assert (after.name, after.slug, after.connection) == (made.name, made.slug, made.connection)
    assert (await changed(w, made)).max_rows == 10_000  # nothing given: nothing changes


async def test_a_new_connection_is_tested_then_sealed_to_its_row() -> None:
    w = World()
    made = await w.make()
    w.db.calls.clear()
    after = await changed(w, made, connection=URL2)
    assert w.db.calls == [("test", URL2)]
    assert "pw-9e3c0f12" not in after.connection
    assert w.box.open(after.connection, f"{ORG}:integrations:{made.id}") == URL2.encode()
    assert w.uc.target(await w.uc.get(ADMIN, made.id)).connection == URL2
    w.db.fail = DatabaseError("password authentication failed")
    with pytest.raises(InvalidInput) as e:
        await changed(w, made, connection=URL, max_rows=1)
    assert (e.value.field, e.value.problem) == ("connection", "password authentication failed")
    assert e.value.__cause__ is None
    assert await w.uc.get(ADMIN, made.id) == after  # nothing of the change is kept


async def test_a_change_is_checked_as_a_registration_before_any_connection() -> None:
    w = World()
    made = await w.make()
    w.db.calls.clear()
    cases: list[tuple[dict[str, Any], str]] = [
        ({"name": ""}, "name"),
        ({"name": "x" * 257}, "name"),
        ({"type": "mysql"}, "type"),
        ({"connection": ""}, "connection"),
        ({"connection": "mysql://h/db"}, "connection"),
        ({"connection": "postgresql://" + "h" * 4084}, "connection"),
        ({"max_rows": 0}, "max_rows"),
        ({"max_bytes": 1_048_577}, "max_bytes"),
        ({"statement_timeout_ms": 99}, "statement_timeout_ms"),
        ({"allowed_tables": tuple(f"t{i}" for i in range(501))}, "allowed_tables"),
        ({"allowed_tables": ("ok", " ")}, "allowed_tables"),
    ]
    for over, field in cases:
        with pytest.raises(InvalidInput) as e:
            await changed(w, made, **over)
        assert e.value.field == field, over
    assert w.db.calls == []
    assert await w.uc.get(ADMIN, made.id) == made


async def test_a_new_name_gives_a_new_slug_and_the_same_name_keeps_it() -> None:
    w = World()
    await w.make("Shop")
    second = await w.make("Shop!")
    assert second.slug == "shop-2"
    same = await changed(w, second, name="Shop!")
    assert same.slug == "shop-2"  # not re-derived: the tools keep their names
    renamed = await changed(w, second, name="Sales (EU)")
    assert (renamed.name, renamed.slug) == ("Sales (EU)", "sales-eu")
    with pytest.raises(Conflict):
        await changed(w, second, name="Shop")


async def test_a_change_is_of_the_callers_organization_and_keeps_attachments() -> None:
    w = World()
    made = await w.make()
    agent = await w.agent()
    await w.uc.attach(ADMIN, agent.id, made.id, ("query",))
    with pytest.raises(NotFound):
        await w.uc.update(OTHER, made.id, IntegrationChanges(max_rows=1))
    with pytest.raises(NotFound):
        await w.uc.update(ADMIN, uuid.uuid4(), IntegrationChanges(max_rows=1))
    after = await changed(w, made, name="Renamed", max_rows=3)
    found = await w.uc.attachments(ADMIN, agent.id)
    assert (found.integrations, found.require_approval) == ([after], {str(made.id): ("query",)})


async def test_delete_is_of_the_callers_organization() -> None:
    w = World()
    made = await w.make()
    with pytest.raises(NotFound):
        await w.uc.delete(OTHER, made.id)
    await w.uc.delete(ADMIN, made.id)
    assert await w.uc.list_all(ADMIN) == []


async def test_rotation_reseals_connections_with_the_newest_key() -> None:
    w = World()
    ours = await w.make()
    theirs = await w.make(who=OTHER)
    newer = w.use_cases(AesGcmBox([KEY2, KEY1]))
    assert await newer.rotate_secrets("org-nobody") == 0
    assert await newer.rotate_secrets(ORG) == 1
    assert (await w.uc.get(OTHER, theirs.id)).connection == theirs.connection
    assert await newer.rotate_secrets() == 1
    assert await newer.rotate_secrets() == 0
    only_new = w.use_cases(AesGcmBox([KEY2]))
    assert only_new.target(await w.uc.get(ADMIN, ours.id)).connection == URL
    assert only_new.target(await w.uc.get(OTHER, theirs.id)).connection == URL


# --- attachments ------------------------------------------------------------------------


async def test_attach_answers_the_agents_integrations_in_order_and_once() -> None:
    w = World()
    agent = await w.agent()
    one, two = await w.make("One"), await w.make("Two")
    assert await w.uc.attached(ADMIN, agent.id) == []
    assert (await w.uc.attach(ADMIN, agent.id, two.id)).integrations == [two]
    assert (await w.uc.attach(ADMIN, agent.id, one.id)).integrations == [two, one]
    assert (await w.uc.attach(ADMIN, agent.id, two.id)).integrations == [two, one]
    assert await w.uc.attached(ADMIN, agent.id) == [two, one]
    assert await w.uc.of_agent(ORG, agent.id) == [two, one]
    # kept as a sealed record of kind "integrations" under the agent's id
    setup = await w.record(agent)
    assert w.uc.attached_ids(ORG, agent.id, setup.records) == (two.id, one.id)
    assert w.uc.attached_ids(ORG, agent.id, {}) == ()
    opened = w.box.open(setup.records[KIND].value, f"{ORG}:integrations:{agent.id}")
    assert msgspec.json.decode(opened, type=AgentIntegrations) == AgentIntegrations(
        agent_id=agent.id, org_id=ORG, integration_ids=(two.id, one.id)
    )


async def test_attach_needs_the_agent_and_the_integration_of_the_organization() -> None:
    w = World()
    agent = await w.agent()
    made = await w.make()
    theirs = await w.make(who=OTHER)
    with pytest.raises(NotFound):
        await w.uc.attach(ADMIN, uuid.uuid4(), made.id)
    with pytest.raises(NotFound):
        await w.uc.attach(ADMIN, agent.id, theirs.id)
    with pytest.raises(NotFound):
        await w.uc.attach(OTHER, agent.id, theirs.id)
    with pytest.raises(NotFound):
        await w.uc.attached(ADMIN, uuid.uuid4())
    with pytest.raises(NotFound):
        await w.uc.attached(OTHER, agent.id)
    assert await w.uc.attached(ADMIN, agent.id) == []


async def test_an_agent_has_at_most_20_integrations() -> None:
    w = World()
    agent = await w.agent()
    made = [await w.make(f"db{i}") for i in range(MAX_ATTACHED + 1)]
    for i in made[:MAX_ATTACHED]:
        await w.uc.attach(ADMIN, agent.id, i.id)
    with pytest.raises(InvalidInput) as e:
        await w.uc.attach(ADMIN, agent.id, made[-1].id)
    assert (e.value.field, e.value.problem) == ("integration_id", "an agent has at most 20")
    # attaching one already there again is no change, full or not
    assert (await w.uc.attach(ADMIN, agent.id, made[0].id)).integrations == made[:MAX_ATTACHED]


async def test_detach_says_whether_it_was_attached() -> None:
    w = World()
    agent = await w.agent()
    one, two = await w.make("One"), await w.make("Two")
    await w.uc.attach(ADMIN, agent.id, one.id)
    await w.uc.attach(ADMIN, agent.id, two.id)
    assert await w.uc.detach(ADMIN, agent.id, one.id) is True
    assert await w.uc.attached(ADMIN, agent.id) == [two]
    assert await w.uc.detach(ADMIN, agent.id, one.id) is False
    assert await w.uc.attached(ADMIN, agent.id) == [two]
    with pytest.raises(NotFound):  # names no integration and is not attached
        await w.uc.detach(ADMIN, agent.id, uuid.uuid4())
    with pytest.raises(NotFound):
        await w.uc.detach(ADMIN, uuid.uuid4(), two.id)
    with pytest.raises(NotFound):
        await w.uc.detach(OTHER, agent.id, two.id)
    assert await w.uc.attached(ADMIN, agent.id) == [two]


async def test_a_deleted_integration_drops_out_at_the_next_attach_or_detach() -> None:
    w = World()
    agent = await w.agent()
    one, two, three = await w.make("One"), await w.make("Two"), await w.make("Three")
    for i in (one, two):
        await w.uc.attach(ADMIN, agent.id, i.id)
    await w.uc.delete(ADMIN, one.id)
    assert await w.uc.attached(ADMIN, agent.id) == [two]
    # the agent's record keeps its id until then
    setup = await w.record(agent)
    assert w.uc.attached_ids(ORG, agent.id, setup.records) == (one.id, two.id)
    assert (await w.uc.attach(ADMIN, agent.id, three.id)).integrations == [two, three]
    setup = await w.record(agent)
    assert w.uc.attached_ids(ORG, agent.id, setup.records) == (two.id, three.id)
    # a deleted one still attached is detached as attached
    await w.uc.delete(ADMIN, two.id)
    assert await w.uc.detach(ADMIN, agent.id, two.id) is True
    setup = await w.record(agent)
    assert w.uc.attached_ids(ORG, agent.id, setup.records) == (three.id,)


async def test_the_twenty_counts_only_integrations_that_still_exist() -> None:
    w = World()
    agent = await w.agent()
    made = [await w.make(f"db{i}") for i in range(MAX_ATTACHED + 1)]
    for i in made[:MAX_ATTACHED]:
        await w.uc.attach(ADMIN, agent.id, i.id)
    await w.uc.delete(ADMIN, made[0].id)
    assert (await w.uc.attach(ADMIN, agent.id, made[-1].id)).integrations == made[1:]


# --- the tools ----------------------------------------------------------------------------


async def attached(w: World, **over: Any) -> tuple[Agent, Integration]:
    agent = await w.agent()
    made = await w.make(**over)
    await w.uc.attach(ADMIN, agent.id, made.id)
    return agent, made


async def test_three_tools_per_integration_described_for_the_model() -> None:
    w = World()
    agent = await w.agent()
    shop = await w.make("Shop", allowed_tables=("public.orders", "customers"), max_rows=7)
    crm = await w.make("CRM")
    await w.uc.attach(ADMIN, agent.id, shop.id)
    await w.uc.attach(ADMIN, agent.id, crm.id)
    specs = await w.tools.list_tools(ADMIN, agent)
    about = "the postgresql database 'Shop' (tables: public.orders, customers)"
    assert [(s.name, s.description) for s in specs[:3]] == [
        ("db_shop__list_tables", f"List the tables and views of {about}."),
        ("db_shop__describe_table", f"Describe the columns of one table of {about}."),
        (
            "db_shop__query",
            f"Run one read-only SQL statement on {about}; answers JSON "
            "(columns, rows, row_count, truncated), at most 7 rows.",
        ),
    ]
    assert [s.parameters for s in specs[:3]] == [
        {"type": "object", "properties": {}},
        {
            "type": "object",
            "properties": {
                "table": {
                    "type": "string",
                    "description": "the table or view, as name or schema.name",
                }
            },
            "required": ["table"],
        },
        {
            "type": "object",
            "properties": {"sql": {"type": "string", "description": "one read-only SQL statement"}},
            "required": ["sql"],
        },
    ]
    assert [s.name for s in specs[3:]] == [
        "db_crm__list_tables",
        "db_crm__describe_table",
        "db_crm__query",
    ]
    assert specs[3].description == "List the tables and views of the postgresql database 'CRM'."
    # the turn's read gives the same
    assert await w.tools.list_tools(ADMIN, agent, await w.record(agent)) == specs
    assert await w.tools.list_tools(ADMIN, await w.agent()) == []


async def test_the_turns_read_decides_which_integrations_are_offered() -> None:
    """The turn hands the records it read with the thread: an agent with none
    stored has no tools, whatever storage holds by then."""
    w = World()
    agent, made = await attached(w)
    assert await w.tools.list_tools(ADMIN, agent, ToolSetup(records={})) == []
    ctx = ToolCallContext(tool_call_id="c", setup=ToolSetup(records={}))
    assert await w.tools.call(ADMIN, agent, "db_shop__query", {"sql": "SELECT 1"}, ctx) == (
        "error: no database integration 'shop' is attached to this agent"
    )
    setup = await w.record(agent)
    ctx = ToolCallContext(tool_call_id="c", setup=setup)
    assert (
        await w.tools.call(ADMIN, agent, "db_shop__query", {"sql": "SELECT 1"}, ctx)
    ).startswith('{"columns"')
    assert w.db.calls[-1] == ("query", "SELECT 1")
    # an integration deleted since is skipped
    await w.uc.delete(ADMIN, made.id)
    assert await w.tools.list_tools(ADMIN, agent, setup) == []


async def test_calls_use_the_integrations_connection_and_bounds() -> None:
    w = World()
    agent, _ = await attached(w, max_rows=9, max_bytes=4096, statement_timeout_ms=700)
    answer = await w.tools.call(ADMIN, agent, "db_shop__query", {"sql": "SELECT n, n FROM t"}, CTX)
    assert answer == '{"columns":["n","n"],"rows":[[1,2],[3,4]],"row_count":2,"truncated":true}'
    await w.tools.call(ADMIN, agent, "db_shop__list_tables", {}, CTX)
    await w.tools.call(ADMIN, agent, "db_shop__describe_table", {"table": "t"}, CTX)
    target = DatabaseTarget(connection=URL, max_rows=9, max_bytes=4096, statement_timeout_ms=700)
    assert w.db.targets == [target, target, target]


async def test_list_tables_shows_only_allowed_tables() -> None:
    w = World()
    agent, _ = await attached(w, allowed_tables=("public.orders", "customers"))
    assert await w.tools.call(ADMIN, agent, "db_shop__list_tables", {}, CTX) == (
        '{"tables":[{"schema":"public","name":"orders","kind":"table"},'
        '{"schema":"crm","name":"Customers","kind":"view"}]}'
    )
    w2 = World()
    agent2, _ = await attached(w2)
    listed = msgspec.json.decode(
        await w2.tools.call(ADMIN, agent2, "db_shop__list_tables", {}, CTX)
    )
    assert [t["name"] for t in listed["tables"]] == ["orders", "Customers", "keys"]


async def test_describe_table_checks_its_argument_and_the_allowed_tables() -> None:
    w = World()
    agent, _ = await attached(w, allowed_tables=("public.orders", "customers"))
    need = "error: describe_table needs a table name (string)"
    for args in ({}, {"table": 7}, {"table": ""}, {"table": "  "}, {"table": "t" * 257}):
        assert await w.tools.call(ADMIN, agent, "db_shop__describe_table", args, CTX) == need
    assert w.db.calls == [("test", URL)]
    said = await w.tools.call(ADMIN, agent, "db_shop__describe_table", {"table": "orders"}, CTX)
    assert said == (
        "error: the table 'orders' is not among this integration's allowed tables"
        " (name it as schema.table, as list_tables shows it)"
    )
    for table, where in [
        (" public.orders ", ("public", "orders")),
        ("customers", (None, "customers")),
        ("sales.Customers", ("sales", "Customers")),
    ]:
        answer = await w.tools.call(ADMIN, agent, "db_shop__describe_table", {"table": table}, CTX)
        assert answer == DESCRIBED
        assert w.db.calls[-1] == ("describe", where)


async def test_describe_table_takes_names_up_to_256_characters() -> None:
    w = World()
    agent, _ = await attached(w)
    name = "t" * 256
    said = await w.tools.call(ADMIN, agent, "db_shop__describe_table", {"table": name}, CTX)
    assert said.startswith('{"columns"')
    assert w.db.calls[-1] == ("describe", (None, name))


async def test_query_checks_its_sql_before_the_database_sees_it() -> None:
    w = World()
    agent, _ = await attached(w)
    need = "error: query needs sql (a string holding one statement)"
    for args in ({}, {"sql": 1}, {"sql": ""}, {"sql": " \n"}):
        assert await w.tools.call(ADMIN, agent, "db_shop__query", args, CTX) == need
    too = "error: sql must be at most 100000 characters, without NUL"
    for sql in ("x" * (MAX_SQL + 1), "SELECT 1\x00"):
        assert await w.tools.call(ADMIN, agent, "db_shop__query", {"sql": sql}, CTX) == too
    assert w.db.calls == [("test", URL)]
    longest = "x" * MAX_SQL
    assert (await w.tools.call(ADMIN, agent, "db_shop__query", {"sql": longest}, CTX)).startswith(
        '{"columns"'
    )
    assert w.db.calls[-1] == ("query", longest)


async def test_failures_are_tool_results_the_model_reads() -> None:
    w = World()
    agent, made = await attached(w)
    w.db.fail = DatabaseError("cannot execute INSERT in a read-only transaction")
    for tool, args in [
        ("query", {"sql": "INSERT INTO t VALUES (1)"}),
        ("list_tables", {}),
        ("describe_table", {"table": "t"}),
    ]:
        assert await w.tools.call(ADMIN, agent, f"db_shop__{tool}", args, CTX) == (
            "error: cannot execute INSERT in a read-only transaction"
        )
    w.db.fail = None
    assert await w.tools.call(ADMIN, agent, "db_shop__drop", {}, CTX) == (
        "error: no tool 'drop' (list_tables, describe_table, query)"
    )
    # a connection that does not open here (sealed for another row)
    moved = w.box.seal(URL.encode(), f"{ORG}:integrations:{uuid.uuid4()}")
    assert await w.storage.integrations.reseal(ORG, made.id, made.connection, moved)
    said = await w.tools.call(ADMIN, agent, "db_shop__query", {"sql": "SELECT 1"}, CTX)
    assert said.startswith("error: a stored secret")
    assert len(w.db.calls) == 4


async def test_a_call_finds_its_integration_by_slug_among_the_agents() -> None:
    w = World()
    agent = await w.agent()
    one, two = await w.make("One"), await w.make("Two", allowed_tables=("x",))
    for i in (one, two):
        await w.uc.attach(ADMIN, agent.id, i.id)
    said = await w.tools.call(ADMIN, agent, "db_two__describe_table", {"table": "y"}, CTX)
    assert said.startswith("error: the table 'y' is not among")
    said = await w.tools.call(ADMIN, agent, "db_one__describe_table", {"table": "y"}, CTX)
    assert said.startswith('{"columns"')
    assert await w.tools.call(ADMIN, agent, "db_three__query", {"sql": "x"}, CTX) == (
        "error: no database integration 'three' is attached to this agent"
    )


def test_an_mcp_tool_whose_name_holds_the_separator_is_not_an_integrations() -> None:
    """An MCP server slugged ``db`` offers ``db__<tool>``; its tool ``get__data`` is
    ``db__get__data``, which no integration's tool name can be (slugs come after
    ``db_`` and hold no underscore)."""
    tools = World().tools
    assert not tools.owns("db__get__data")
    assert not tools.owns("db____x")
    assert tools.owns("db_shop__get__data")


async def test_the_slug_is_what_comes_before_the_first_separator() -> None:
    w = World()
    agent, _ = await attached(w)
    assert await w.tools.call(ADMIN, agent, "db_shop__list__tables", {}, CTX) == (
        "error: no tool 'list__tables' (list_tables, describe_table, query)"
    )


async def test_an_agent_with_no_integration_costs_no_read_outside_a_turn_either() -> None:
    w = World()
    agent = await w.agent()
    await w.make()
    reads: list[list[UUID]] = []
    store = w.storage.integrations
    get_many = store.get_many

    async def counted(org_id: str, ids: list[UUID]) -> list[Integration]:
        reads.append(ids)
        return await get_many(org_id, ids)

    store.get_many = counted  # type: ignore[method-assign]
    assert await w.tools.list_tools(ADMIN, agent) == []
    assert await w.uc.attached(ADMIN, agent.id) == []
    assert reads == []


# --- approval before a call (docs/tools.md, "Approval before a call") --------------


async def test_an_attachment_names_the_tools_that_wait_for_approval() -> None:
    w = World()
    agent = await w.agent()
    one, two = await w.make("One"), await w.make("Two")
    with pytest.raises(InvalidInput) as e:
        await w.uc.attach(ADMIN, agent.id, one.id, ("query", "drop"))
    assert (e.value.field, e.value.problem) == (
        "require_approval",
        "'drop' is not one of list_tables, describe_table, query",
    )
    got = await w.uc.attach(ADMIN, agent.id, one.id, ("query", "query"))
    assert got.require_approval == {str(one.id): ("query",)}
    await w.uc.attach(ADMIN, agent.id, two.id, ("list_tables",))
    listed = await w.tools.list_tools(ADMIN, agent, await w.record(agent))
    waits = sorted(t.name for t in listed if t.approval)
    assert waits == [f"db_{one.slug}__query", f"db_{two.slug}__list_tables"]
    # outside a turn (no setup) the source reads the same record
    assert sorted(t.name for t in await w.tools.list_tools(ADMIN, agent) if t.approval) == waits
    # attaching again replaces the choice and keeps the place; detaching drops it
    again = await w.uc.attach(ADMIN, agent.id, one.id)
    assert [i.id for i in again.integrations] == [one.id, two.id]
    assert again.require_approval == {str(two.id): ("list_tables",)}
    await w.uc.detach(ADMIN, agent.id, two.id)
    assert (await w.uc.attachments(ADMIN, agent.id)).require_approval == {}
    # a deleted integration's choice goes with it at the next change
    await w.uc.attach(ADMIN, agent.id, one.id, ("query",))
    await w.uc.delete(ADMIN, one.id)
    after = await w.uc.attach(ADMIN, agent.id, two.id)
    assert (after.integrations, after.require_approval) == ([two], {})


async def test_only_the_attachments_that_name_tools_mark_them() -> None:
    """One integration's calls wait for approval, the other's do not: the second's
    tools are listed unmarked beside the first's."""
    w = World()
    agent = await w.agent()
    gated, plain = await w.make("Gated"), await w.make("Plain")
    await w.uc.attach(ADMIN, agent.id, plain.id)
    await w.uc.attach(ADMIN, agent.id, gated.id, ("describe_table",))
    listed = await w.tools.list_tools(ADMIN, agent, await w.record(agent))
    assert len(listed) == 6
    assert [t.name for t in listed if t.approval] == [f"db_{gated.slug}__describe_table"]
