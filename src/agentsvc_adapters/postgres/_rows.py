"""Rows to entities: the column lists of the package's SELECTs and their mappers.

One module for what several repositories read: the turn reader (``turns``) selects
the thread, agent, run, messages, attachments and servers with the same columns and
mappers as the repositories that own those tables, so they live here, not in one
sibling that the others import. Every name here is a column list (a string to put
in a SELECT, its order the mapper's), a mapper (``to_<entity>``: one row in that
order -> the entity) or a shared statement; none of them touches the pool.
``EntityTable`` writes those for a table whose columns are its entity's fields
(the runners' tables).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_adapters.postgres.pool import Row
from agentsvc_core.entities import (
    Agent,
    ApiKey,
    CachedTool,
    McpAttachment,
    McpServer,
    Message,
    Participant,
    Run,
    Thread,
    ToolCall,
    ToolProfile,
    TraceRecord,
    TraceSummary,
)
from agentsvc_core.entities.agent import TemplateRef
from agentsvc_core.entities.model_params import ModelParams
from agentsvc_core.ports import EventBatch
from agentsvc_core.ports.idempotency import IdempotencyClaim

__all__ = [
    "AGENT_COLS",
    "ATT_COLS",
    "EVENTS_INSERT",
    "HISTORY",
    "KEY_CLAIM",
    "KEY_COLS",
    "MSG_COLS",
    "PART_COLS",
    "RUN_COLS",
    "SERVER_COLS",
    "THREAD_COLS",
    "TRACE_COLS",
    "EntityTable",
    "count_sql",
    "event_params",
    "key_claim_params",
    "to_agent",
    "to_attachment",
    "to_key",
    "to_message",
    "to_participant",
    "to_run",
    "to_server",
    "to_thread",
    "to_trace",
    "trace_ctes",
]

_profiles_decoder = msgspec.json.Decoder(dict[str, ToolProfile])
_meta = msgspec.json.Decoder(dict[str, str])
_bindings = msgspec.json.Decoder(list[dict[str, Any]])
_calls = msgspec.json.Decoder(tuple[ToolCall, ...])
_blocks = msgspec.json.Decoder(tuple[dict[str, Any], ...])
_names = msgspec.json.Decoder(tuple[str, ...])
_model_params = msgspec.json.Decoder(ModelParams)
_tools = msgspec.json.Decoder(tuple[CachedTool, ...])


# --- organizations' keys and agents -------------------------------------------

KEY_COLS = "id, org_id, name, display_prefix, key_hash, created_at, revoked_at"


def to_key(row: tuple[Any, ...]) -> ApiKey:
    return ApiKey(
        id=row[0],
        org_id=row[1],
        name=row[2],
        display_prefix=row[3],
        key_hash=row[4],
        created_at=row[5],
        revoked_at=row[6],
    )


AGENT_COLS = (
    "id, org_id, name, description, stable_preamble, default_model,"
    " tool_profiles::text, default_profile, runtime_provider, created_at, updated_at,"
    " project_id, template_id, template_version, approval_timeout_minutes, model_params::text"
)


def to_agent(row: tuple[Any, ...]) -> Agent:
    return Agent(
        id=row[0],
        org_id=row[1],
        name=row[2],
        description=row[3],
        stable_preamble=row[4],
        default_model=row[5],
        tool_profiles=None if row[6] is None else _profiles_decoder.decode(row[6]),
        default_profile=row[7],
        runtime_provider=row[8],
        created_at=row[9],
        updated_at=row[10],
        project_id=row[11],
        template=None if row[12] is None else TemplateRef(id=row[12], version=row[13]),
        approval_timeout_minutes=row[14],
        model_params=None if row[15] is None else _model_params.decode(row[15]),
    )


# --- threads, runs, messages --------------------------------------------------

THREAD_COLS = (
    "id, org_id, agent_id, title, kind, status, active_profile, system_prompt_overlay,"
    " metadata::text, resource_bindings::text, created_by, created_at, updated_at, head_id"
)


def to_thread(r: Row) -> Thread:
    return Thread(
        id=r[0],
        org_id=r[1],
        agent_id=r[2],
        title=r[3],
        kind=r[4],
        status=r[5],
        active_profile=r[6],
        system_prompt_overlay=r[7],
        metadata=_meta.decode(r[8]),
        resource_bindings=_bindings.decode(r[9]),
        created_by=r[10],
        created_at=r[11],
        updated_at=r[12],
        head_id=r[13],
        active_run_id=r[14] if len(r) > 14 else None,
    )


def to_participant(r: Row) -> Participant:
    return Participant(
        org_id=r[0], thread_id=r[1], user_id=r[2], display_name=r[3], role=r[4], added_at=r[5]
    )


PART_COLS = "org_id, thread_id, user_id, display_name, role, added_at"


RUN_COLS = (
    "id, org_id, thread_id, status, started_at, heartbeat_at, finished_at, pending_tool_calls::text"
)
MSG_COLS = (
    "id, org_id, thread_id, role, content, created_at, sender_name, sender_id,"
    " tool_calls::text, tool_call_id, status, run_id, provider_blocks::text, parent_id"
)
# Reads of one thread's messages order by seq (or take the last by seq), which the
# primary key (org_id, thread_id, seq) gives without a sort. That alone does not make
# it the plan: before the table has statistics a prepared statement's generic plan
# took the (org_id, id) index and sorted, reading the organization's every message,
# and kept doing so as the table grew; statistics.py gives grown tables statistics.
HISTORY = f"SELECT {MSG_COLS} FROM messages WHERE org_id = %s AND thread_id = %s ORDER BY seq"


# what begin_turn(seen=...) compares: the thread's message count before the statement.
# (Not its highest seq: seq is one sequence for all threads, so a message can commit
# after one with a higher seq; messages are never removed one by one, so the count
# misses nothing.)
def count_sql(org: str, thread: str) -> str:
    """That count's SELECT, with ``org`` and ``thread`` as its placeholders (the turn
    reader's statement names its parameters)."""
    return (
        f"SELECT count(*) AS n FROM (SELECT seq FROM messages WHERE org_id = {org}"
        f" AND thread_id = {thread} ORDER BY seq) s"
    )


def to_run(r: Row) -> Run:
    return Run(
        id=r[0],
        org_id=r[1],
        thread_id=r[2],
        status=r[3],
        started_at=r[4],
        heartbeat_at=r[5],
        finished_at=r[6],
        pending_tool_calls=_calls.decode(r[7]),
    )


def to_message(r: Row) -> Message:
    return Message(
        id=r[0],
        org_id=r[1],
        thread_id=r[2],
        role=r[3],
        content=r[4],
        created_at=r[5],
        sender_name=r[6],
        sender_id=r[7],
        tool_calls=_calls.decode(r[8]) if r[8] else (),
        tool_call_id=r[9],
        status=r[10],
        run_id=r[11],
        provider_blocks=_blocks.decode(r[12]) if r[12] else (),
        parent_id=r[13],
    )


# --- MCP servers and attachments ----------------------------------------------

SERVER_COLS = (
    "id, org_id, name, slug, transport, url, command, args::text, credentials,"
    " allowed_tools::text, status, tools_cache::text, created_at, updated_at, managed_provider"
)


def to_server(r: Row) -> McpServer:
    return McpServer(
        id=r[0],
        org_id=r[1],
        name=r[2],
        slug=r[3],
        transport=r[4],
        url=r[5],
        command=r[6],
        args=_names.decode(r[7]),
        credentials=r[8],
        allowed_tools=None if r[9] is None else _names.decode(r[9]),
        status=r[10],
        tools_cache=_tools.decode(r[11]),
        created_at=r[12],
        updated_at=r[13],
        managed_provider=r[14],
    )


def to_attachment(r: Row) -> McpAttachment:
    return McpAttachment(
        org_id=r[0],
        owner_kind=r[1],
        owner_id=r[2],
        mcp_id=r[3],
        allowed_tools=None if r[4] is None else _names.decode(r[4]),
        created_at=r[5],
        services=None if r[6] is None else _names.decode(r[6]),
        require_approval=None if r[7] is None else _names.decode(r[7]),
    )


ATT_COLS = (
    "org_id, owner_kind, owner_id, mcp_id, allowed_tools::text, created_at, services::text,"
    " require_approval::text"
)


# A batch of a reply's events (agentsvc_core/ports/streams.py): written by
# ``finish_turn`` (a CTE of its statement) and by ``append_events``; a batch written
# twice (same run, same end) is one row.
EVENTS_INSERT = (
    "INSERT INTO run_events (org_id, run_id, seq_end, first, data, keep_until)"
    " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"
)


# Claim an idempotency key (``%(org)s, %(key)s, %(fp)s, %(run)s, %(at)s, %(until)s``):
# a row comes back when the key was free or expired before ``at``; none when it is
# held (a racing claim waits for the other's transaction, then finds it held).
KEY_CLAIM = (
    "INSERT INTO idempotency_keys (org_id, key, fingerprint, run_id, created_at, expires_at)"
    " VALUES (%(org)s, %(key)s, %(fp)s, %(run)s, %(at)s, %(until)s)"
    " ON CONFLICT (org_id, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint,"
    " run_id = EXCLUDED.run_id, status = NULL, content_type = NULL, body = NULL,"
    " created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at"
    " WHERE idempotency_keys.expires_at < EXCLUDED.created_at RETURNING 1"
)


def event_params(org_id: str, run_id: UUID, b: EventBatch) -> tuple[Any, ...]:
    """``EVENTS_INSERT``'s parameters for a batch of run ``run_id``."""
    return (org_id, run_id, b.first + b.count, b.first, b.data, b.keep_until)


def key_claim_params(org_id: str, claim: IdempotencyClaim, run_id: UUID | None) -> dict[str, Any]:
    """``KEY_CLAIM``'s parameters: a send's claim names its run, another POST's none."""
    return {
        "org": org_id,
        "key": claim.key,
        "fp": claim.fingerprint,
        "run": run_id,
        "at": claim.at,
        "until": claim.expires_at,
    }


# --- stored traces (agentsvc_core/ports/traces.py, migration 0008) ----------------

TRACE_COLS = (
    "id, org_id, kind, name, status, run_status, started_at, ended_at, duration_ms,"
    " agent_id, thread_id, run_id, runner_id, message_id, model, input_tokens,"
    " output_tokens, cached_input_tokens, cost_usd, model_calls, tool_calls, tool_errors,"
    " input_messages, key_source, error, first_token_ms"
)
_TRACE_FIELDS = [c.strip() for c in TRACE_COLS.split(",")]
# A turn's trace is two JSON parameters (its spans; its row, parsed apart so that
# PostgreSQL does not parse the spans twice), its evaluations one more: 29
# parameters more would take finish_turn's statement past psycopg's 50, beyond
# which it parses the statement's text again on every call (0.3 ms).
_TRACE_INSERT = (
    f"INSERT INTO traces ({TRACE_COLS}, root_span_id, keep_until, spans)"
    f" SELECT {TRACE_COLS}, root_span_id, keep_until, %s::json"
    " FROM json_populate_record(NULL::traces, %s::json)"
)
_EVAL_COLS = "org_id, trace_id, span_id, name, source, score, label, detail, keep_until"
_EVAL_INSERT = (
    f"INSERT INTO trace_evaluations ({_EVAL_COLS}) SELECT {_EVAL_COLS}"
    " FROM json_populate_recordset(NULL::trace_evaluations, %s::json)"
)
_json_encode = msgspec.json.Encoder().encode


def trace_ctes(t: TraceRecord) -> tuple[str, list[Any]]:
    """CTEs of ``finish_turn``'s statement (``, t AS (...)``, and ``, v AS (...)``
    with evaluations) that store the turn's trace ``t``, and their parameters (also
    ``add_trace``'s whole statement, a record no turn writes)."""
    s = t.summary
    row = msgspec.structs.asdict(s)
    row.update(root_span_id=t.root_span_id, keep_until=t.keep_until)
    params: list[Any] = [_json_encode(t.spans).decode(), _json_encode(row).decode()]
    sql = f", t AS ({_TRACE_INSERT})"
    if t.evaluations:
        sql += f", v AS ({_EVAL_INSERT})"
        evaluations = [
            {
                **msgspec.structs.asdict(e),
                "org_id": s.org_id,
                "trace_id": s.id,
                "keep_until": t.keep_until,
            }
            for e in t.evaluations
        ]
        params.append(_json_encode(evaluations).decode())
    return sql, params


def to_trace(row: tuple[Any, ...]) -> TraceSummary:
    """A row of ``TRACE_COLS``."""
    return TraceSummary(**dict(zip(_TRACE_FIELDS, row, strict=True)))


class EntityTable:
    """A table's columns, named and ordered as its entity's fields, and the SQL
    built from them: the SELECT list (json columns as text), the INSERT, an
    UPDATE's SET list. ``json``: the json columns and the decoder of each;
    ``casts``: the SQL type of a parameter that needs one (``uuid[]``)."""

    def __init__(
        self,
        name: str,
        entity: type[msgspec.Struct],
        json: dict[str, msgspec.json.Decoder[Any]],
        *,
        casts: dict[str, str] | None = None,
    ) -> None:
        self.fields = entity.__struct_fields__
        self.json = json
        self._casts = {**(casts or {}), **dict.fromkeys(json, "json")}
        self.select = ", ".join(f"{f}::text" if f in json else f for f in self.fields)
        values = ", ".join(self._param(f) for f in self.fields)
        self.insert = f"INSERT INTO {name} ({', '.join(self.fields)}) VALUES ({values})"

    def _param(self, field: str) -> str:
        cast = self._casts.get(field)
        return f"%({field})s::{cast}" if cast else f"%({field})s"

    def set_list(self, *, leave: Sequence[str] = ()) -> str:
        """``col = %(col)s, ...`` for every column but the key and ``leave``."""
        skip = {"org_id", "id", *leave}
        return ", ".join(f"{f} = {self._param(f)}" for f in self.fields if f not in skip)

    def params(self, entity: msgspec.Struct) -> dict[str, Any]:
        """The statements' parameters: the entity's fields, documents encoded."""
        params = msgspec.structs.asdict(entity)
        for f in self.json:
            params[f] = _json_encode(params[f]).decode()
        return params

    def values(self, row: Row) -> dict[str, Any]:
        """A row of ``select`` as the entity's fields, documents decoded."""
        values = dict(zip(self.fields, row, strict=True))
        for f, decoder in self.json.items():
            values[f] = decoder.decode(values[f])
        return values
