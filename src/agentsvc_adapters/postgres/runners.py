"""Runners on PostgreSQL (``runners``, ``runner_triggers``, ``runner_runs``,
``runner_suggestions``; migration 0014; the skill bindings a document since 0021;
``runner_run_events`` 0031).

An entity's documents (steps, budget, inputs, step states) are msgspec JSON in
``json`` columns, read back as text and decoded by type. A run is written by
compare-and-set: ``save_run``'s UPDATE matches the version it was read at and
adds one, and inserts the run's events with it (numbered under the row's lock;
a write that loses inserts none). ``add_run`` leans on two unique indexes (a
runner's idempotency key, a trigger's tick): a run that collides with either is
not stored, and the one stored first is the answer.

``fire_due`` is one transaction. It locks the due cron triggers ``FOR UPDATE SKIP
LOCKED``: a second scheduler running at the same moment skips the rows the first
holds and takes others (or none), and one that reads a trigger as the first
commits rechecks it against the committed row (READ COMMITTED), whose tick is
then no longer due. The tick index is the backstop: a tick inserted twice is
stored once, and the second insert is not reported as created.

Foreign keys say what a row belongs to; a row naming a runner or agent that is
gone is ``NotFound``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
import psycopg

from agentsvc_adapters.postgres._rows import EntityTable
from agentsvc_adapters.postgres.pool import Connection, Repo, Row, gone_project, translate
from agentsvc_core.entities.runner import (
    RUN_ACTIVE,
    RUN_ENDED,
    Budget,
    NewRunEvent,
    RunEvent,
    Runner,
    RunnerRun,
    Step,
    StepRun,
    Suggestion,
    Trigger,
)
from agentsvc_core.entities.skill import SkillBinding
from agentsvc_core.errors import Conflict, NotFound
from agentsvc_core.ports.runners import DaySums, Firing, ModelSums, RunnerStore, RunSums

__all__ = ["PostgresRunners"]

_encode = msgspec.json.Encoder().encode
_steps = msgspec.json.Decoder(tuple[Step, ...])
_object = msgspec.json.Decoder(dict[str, Any])


_RUNNERS = EntityTable(
    "runners",
    Runner,
    {
        "input_schema": _object,
        "steps": _steps,
        "budget": msgspec.json.Decoder(Budget),
        "skills": msgspec.json.Decoder(tuple[SkillBinding, ...]),
    },
)
_TRIGGERS = EntityTable("runner_triggers", Trigger, {"input": _object})
_RUNS = EntityTable(
    "runner_runs",
    RunnerRun,
    {
        "input": _object,
        "output": msgspec.json.Decoder(),
        "pipeline": _steps,
        "steps": msgspec.json.Decoder(tuple[StepRun, ...]),
    },
)
_SUGGESTIONS = EntityTable("runner_suggestions", Suggestion, {})


def _runner(row: Row) -> Runner:
    return Runner(**_RUNNERS.values(row))


def _runner_params(runner: Runner) -> dict[str, Any]:
    return _RUNNERS.params(runner)


def _trigger(row: Row) -> Trigger:
    return Trigger(**_TRIGGERS.values(row))


def _run(row: Row) -> RunnerRun:
    return RunnerRun(**_RUNS.values(row))


def _suggestion(row: Row) -> Suggestion:
    return Suggestion(**_SUGGESTIONS.values(row))


def _missing(exc: psycopg.errors.ForeignKeyViolation) -> NotFound:
    """What a foreign key violation means: the runner, agent, project or
    organization named is not there (the constraint's name says which)."""
    if (project := gone_project(exc)) is not None:
        return project
    constraint = exc.diag.constraint_name or ""
    if "agent_id" in constraint:
        return NotFound("agent not found")
    if "runner_id" in constraint:
        return NotFound("runner not found")
    return NotFound("organization not found")


_ACTIVE = ", ".join(f"'{s}'" for s in sorted(RUN_ACTIVE))
# a run that collides with a stored one (its id, idempotency key or tick) is not
# stored; RETURNING says whether it was
_RUN_INSERT = _RUNS.insert + " ON CONFLICT DO NOTHING RETURNING 1"
# the stored run that an unstored one collided with: same key, or same tick
_RUN_TAKEN = (
    f"SELECT {_RUNS.select} FROM runner_runs WHERE org_id = %(org_id)s AND ("
    "(idempotency_key = %(idempotency_key)s"
    " AND coalesce(runner_id, agent_id) = coalesce(%(runner_id)s::uuid, %(agent_id)s::uuid))"
    " OR (trigger_id = %(trigger_id)s AND scheduled_for = %(scheduled_for)s))"
    " ORDER BY idempotency_key IS NOT DISTINCT FROM %(idempotency_key)s DESC LIMIT 1"
)
# the stored version if it was the one read (and is now one more), and whether the
# run exists at all
_RUN_SAVE = (
    f"WITH saved AS (UPDATE runner_runs SET {_RUNS.set_list(leave=('version',))},"
    " version = version + 1"
    " WHERE org_id = %(org_id)s AND id = %(id)s AND version = %(version)s RETURNING version)"
    " SELECT (SELECT version FROM saved),"
    " EXISTS (SELECT 1 FROM runner_runs WHERE org_id = %(org_id)s AND id = %(id)s)"
)
# the run's events, inserted only when the update above stored the run
_RUN_SAVE_EVENTS = _RUN_SAVE.replace(
    " SELECT (SELECT version",
    ", told AS (INSERT INTO runner_run_events (org_id, run_id, seq, type, data, created_at)"
    " SELECT %(org_id)s, %(id)s, coalesce((SELECT max(seq) FROM runner_run_events"
    " WHERE org_id = %(org_id)s AND run_id = %(id)s), 0) + e.n, e.type, e.data, e.at"
    " FROM saved, unnest(%(ev_types)s::text[], %(ev_data)s::json[], %(ev_at)s::timestamptz[])"
    " WITH ORDINALITY AS e(type, data, at, n))"
    " SELECT (SELECT version",
)
_DUE = (
    f"SELECT {_TRIGGERS.select} FROM runner_triggers"
    " WHERE kind = 'cron' AND enabled AND next_fire_at <= %s"
    " ORDER BY next_fire_at, id LIMIT %s FOR UPDATE SKIP LOCKED"
)
_BUSY = (
    "SELECT DISTINCT org_id, trigger_id FROM runner_runs"
    " WHERE (org_id, trigger_id) IN (SELECT * FROM unnest(%s::text[], %s::uuid[]))"
    f" AND status IN ({_ACTIVE})"
)
# a runner's runs since a time by their day (UTC), in DaySums' order; their steps by model
_OF = "org_id = %(org)s AND runner_id = %(runner)s AND created_at >= %(since)s"
_TIMED = f"status IN ({', '.join(map(repr, sorted(RUN_ENDED)))}) AND ended_at IS NOT NULL"
_DAY_SUMS = (
    "SELECT (created_at AT TIME ZONE 'UTC')::date, count(*),"
    " count(*) FILTER (WHERE status = 'succeeded'), count(*) FILTER (WHERE status = 'failed'),"
    " count(*) FILTER (WHERE status = 'cancelled'), count(*) FILTER (WHERE status = 'paused'),"
    f" sum(tokens)::bigint, sum(cost_usd)::float8, count(*) FILTER (WHERE {_TIMED}),"
    " coalesce(sum(extract(epoch FROM ended_at - coalesce(started_at, created_at)))"
    f" FILTER (WHERE {_TIMED}), 0)::float8 FROM runner_runs WHERE {_OF} GROUP BY 1 ORDER BY 1"
)
_MODEL_SUMS = (
    "SELECT s->>'model', count(*), sum((s->>'tokens')::bigint)::bigint,"
    " sum((s->>'cost_usd')::float8) FROM runner_runs, json_array_elements(steps) AS s"
    f" WHERE {_OF} AND s->>'model' IS NOT NULL GROUP BY 1"
)
# the old next_fire_at is the tick that fired (SET reads the row as it was)
_ADVANCE = (
    "UPDATE runner_triggers SET next_fire_at = %s, last_fired_at = next_fire_at"
    " WHERE org_id = %s AND id = %s"
)


def _owner(column: str, value: UUID | None) -> tuple[str, tuple[Any, ...]]:
    """A condition that ``column`` is ``value``, NULL included, that an index serves
    (``IS NOT DISTINCT FROM`` would not)."""
    if value is None:
        return f"{column} IS NULL", ()
    return f"{column} = %s", (value,)


class PostgresRunners(Repo, RunnerStore):
    @asynccontextmanager
    async def _conn(self) -> AsyncIterator[Connection]:
        async with translate(), self._pool.connection() as conn:
            try:
                yield conn
            except psycopg.errors.ForeignKeyViolation as exc:
                raise _missing(exc) from None

    # --- runners ----------------------------------------------------------------
    async def add(self, runner: Runner) -> None:
        async with self._conn() as conn:
            await conn.execute(_RUNNERS.insert, _runner_params(runner))

    async def get(self, org_id: str, runner_id: UUID) -> Runner:
        row = await self._one(
            f"SELECT {_RUNNERS.select} FROM runners WHERE org_id = %s AND id = %s",
            (org_id, runner_id),
        )
        if row is None:
            raise NotFound("runner not found")
        return _runner(row)

    async def list_all(self, org_id: str, *, project_id: UUID | None = None) -> list[Runner]:
        rows = await self._all(
            f"SELECT {_RUNNERS.select} FROM runners WHERE org_id = %s"
            " AND (%s::uuid IS NULL OR project_id = %s) ORDER BY created_at DESC, id DESC",
            (org_id, project_id, project_id),
        )
        return [_runner(r) for r in rows]

    async def replace(self, runner: Runner) -> None:
        row = await self._one(
            f"UPDATE runners SET {_RUNNERS.set_list()}"
            " WHERE org_id = %(org_id)s AND id = %(id)s RETURNING id",
            _runner_params(runner),
        )
        if row is None:
            raise NotFound("runner not found")

    async def sealed_runners(self, org_id: str | None) -> list[Runner]:
        # (a rare command's read: the steps' JSON is searched, no index needed)
        rows = await self._all(
            f"SELECT {_RUNNERS.select} FROM runners"
            " WHERE (%(org)s::text IS NULL OR org_id = %(org)s)"
            " AND steps::text LIKE '%%\"headers\"%%'",
            {"org": org_id},
        )
        return [r for r in map(_runner, rows) if any(st.headers for st in r.steps)]

    async def reseal_steps(self, runner: Runner, steps: tuple[Step, ...]) -> bool:
        row = await self._one(
            "UPDATE runners SET steps = %s::json"
            " WHERE org_id = %s AND id = %s AND updated_at = %s RETURNING id",
            (_encode(steps).decode(), runner.org_id, runner.id, runner.updated_at),
        )
        return row is not None

    async def delete(self, org_id: str, runner_id: UUID) -> None:
        # triggers, runs and suggestions go with it (ON DELETE CASCADE)
        row = await self._one(
            "DELETE FROM runners WHERE org_id = %s AND id = %s RETURNING id", (org_id, runner_id)
        )
        if row is None:
            raise NotFound("runner not found")

    # --- triggers ---------------------------------------------------------------
    async def add_trigger(self, trigger: Trigger) -> None:
        async with self._conn() as conn:
            await conn.execute(_TRIGGERS.insert, _TRIGGERS.params(trigger))

    async def get_trigger(self, org_id: str, trigger_id: UUID) -> Trigger:
        row = await self._one(
            f"SELECT {_TRIGGERS.select} FROM runner_triggers WHERE org_id = %s AND id = %s",
            (org_id, trigger_id),
        )
        if row is None:
            raise NotFound("trigger not found")
        return _trigger(row)

    async def triggers(
        self, org_id: str, *, runner_id: UUID | None = None, agent_id: UUID | None = None
    ) -> list[Trigger]:
        where: list[str] = ["org_id = %s"]
        params: list[Any] = [org_id]
        if runner_id is not None:
            where.append("runner_id = %s")
            params.append(runner_id)
        if agent_id is not None:
            where.append("agent_id = %s")
            params.append(agent_id)
        rows = await self._all(
            f"SELECT {_TRIGGERS.select} FROM runner_triggers WHERE {' AND '.join(where)}"
            " ORDER BY created_at, id",
            params,
        )
        return [_trigger(r) for r in rows]

    async def replace_trigger(self, trigger: Trigger) -> None:
        async with self._conn() as conn:
            cur = await conn.execute(
                f"UPDATE runner_triggers SET {_TRIGGERS.set_list()}"
                " WHERE org_id = %(org_id)s AND id = %(id)s RETURNING id",
                _TRIGGERS.params(trigger),
            )
            if await cur.fetchone() is None:
                raise NotFound("trigger not found")

    async def delete_trigger(self, org_id: str, trigger_id: UUID) -> None:
        # its runs stay (no foreign key)
        row = await self._one(
            "DELETE FROM runner_triggers WHERE org_id = %s AND id = %s RETURNING id",
            (org_id, trigger_id),
        )
        if row is None:
            raise NotFound("trigger not found")

    async def by_token(self, token_hash: bytes) -> Trigger | None:
        row = await self._one(
            f"SELECT {_TRIGGERS.select} FROM runner_triggers WHERE token_hash = %s",
            (token_hash,),
        )
        return None if row is None else _trigger(row)

    # --- runs -------------------------------------------------------------------
    async def add_run(self, run: RunnerRun) -> tuple[RunnerRun, bool]:
        params = _RUNS.params(run)
        async with self._conn() as conn:
            cur = await conn.execute(_RUN_INSERT, params)
            if await cur.fetchone() is not None:
                return run, True
            cur = await conn.execute(_RUN_TAKEN, params)
            row = await cur.fetchone()
        if row is None:  # the collision was on the id
            raise Conflict("the run exists")
        return _run(row), False

    async def get_run(self, org_id: str, run_id: UUID) -> RunnerRun:
        row = await self._one(
            f"SELECT {_RUNS.select} FROM runner_runs WHERE org_id = %s AND id = %s",
            (org_id, run_id),
        )
        if row is None:
            raise NotFound("run not found")
        return _run(row)

    async def runs(
        self,
        org_id: str,
        *,
        runner_id: UUID | None = None,
        agent_id: UUID | None = None,
        status: str | None = None,
        since: datetime | None = None,
        before: tuple[datetime, UUID] | None = None,
        limit: int = 50,
    ) -> list[RunnerRun]:
        where: list[str] = ["org_id = %s"]
        params: list[Any] = [org_id]
        if runner_id is not None:
            where.append("runner_id = %s")
            params.append(runner_id)
        if agent_id is not None:  # the agent's scheduled tasks
            where.append("runner_id IS NULL AND agent_id = %s")
            params.append(agent_id)
        if status is not None:
            where.append("status = %s")
            params.append(status)
        if since is not None:
            where.append("created_at >= %s")
            params.append(since)
        if before is not None:
            where.append("(created_at, id) < (%s, %s)")
            params.extend(before)
        params.append(limit)
        rows = await self._all(
            f"SELECT {_RUNS.select} FROM runner_runs WHERE {' AND '.join(where)}"
            " ORDER BY created_at DESC, id DESC LIMIT %s",
            params,
        )
        return [_run(r) for r in rows]

    async def save_run(
        self, run: RunnerRun, events: Sequence[NewRunEvent] = ()
    ) -> RunnerRun | None:
        params = _RUNS.params(run)
        if events:
            params |= {"ev_types": [e.type for e in events], "ev_at": [e.at for e in events]}
            params["ev_data"] = [_encode(e.data).decode() for e in events]
        async with self._conn() as conn:
            cur = await conn.execute(_RUN_SAVE_EVENTS if events else _RUN_SAVE, params)
            row = await cur.fetchone()
        assert row is not None
        version, exists = row
        if version is not None:
            return msgspec.structs.replace(run, version=version)
        if not exists:
            raise NotFound("run not found")
        return None

    async def run_events(
        self, org_id: str, run_id: UUID, *, after: int, limit: int
    ) -> list[RunEvent]:
        rows = await self._all(
            "SELECT seq, type, data::text, created_at FROM runner_run_events"
            " WHERE org_id = %s AND run_id = %s AND seq > %s ORDER BY seq LIMIT %s",
            (org_id, run_id, after, limit),
        )
        return [
            RunEvent(run_id=run_id, seq=r[0], type=r[1], data=_object.decode(r[2]), created_at=r[3])
            for r in rows
        ]

    async def spent_since(self, org_id: str, runner_id: UUID, since: datetime) -> tuple[int, float]:
        row = await self._one(
            "SELECT coalesce(sum(tokens), 0)::bigint, coalesce(sum(cost_usd), 0)"
            " FROM runner_runs WHERE org_id = %s AND runner_id = %s AND created_at >= %s",
            (org_id, runner_id, since),
        )
        assert row is not None
        return int(row[0]), float(row[1])

    async def run_sums(self, org_id: str, runner_id: UUID, since: datetime) -> RunSums:
        of = {"org": org_id, "runner": runner_id, "since": since}
        days = await self._all(_DAY_SUMS, of)
        models = await self._all(_MODEL_SUMS, of)
        return RunSums(days=[DaySums(*r) for r in days], models=[ModelSums(*r) for r in models])

    async def stale_runs(self, before: datetime, limit: int = 100) -> list[tuple[str, UUID]]:
        rows = await self._all(
            "SELECT org_id, id FROM runner_runs"
            " WHERE status IN ('queued', 'running') AND updated_at < %s"
            " ORDER BY updated_at, id LIMIT %s",
            (before, limit),
        )
        return [(r[0], r[1]) for r in rows]

    async def fire_due(
        self, now: datetime, decide: Callable[[Trigger, bool], Firing], limit: int = 100
    ) -> list[RunnerRun]:
        async with self._conn() as conn, conn.transaction():
            cur = await conn.execute(_DUE, (now, limit))
            due = [_trigger(r) for r in await cur.fetchall()]
            if not due:
                return []
            cur = await conn.execute(_BUSY, ([t.org_id for t in due], [t.id for t in due]))
            busy = {(r[0], r[1]) for r in await cur.fetchall()}
            firings = [(t, decide(t, (t.org_id, t.id) in busy)) for t in due]
            async with conn.cursor() as c:
                await c.executemany(
                    _ADVANCE, [(next_at, t.org_id, t.id) for t, (next_at, _) in firings]
                )
            created = []
            for _, (_, run) in firings:
                if run is None:
                    continue
                cur = await conn.execute(_RUN_INSERT, _RUNS.params(run))
                if await cur.fetchone() is not None:  # not a tick stored already
                    created.append(run)
        return created

    # --- suggestions ------------------------------------------------------------
    async def add_suggestions(self, suggestions: Sequence[Suggestion]) -> None:
        if not suggestions:
            return
        async with self._conn() as conn, conn.transaction(), conn.cursor() as cur:
            await cur.executemany(
                _SUGGESTIONS.insert, [_SUGGESTIONS.params(s) for s in suggestions]
            )

    async def suggestions(
        self,
        org_id: str,
        *,
        runner_id: UUID | None = None,
        agent_id: UUID | None = None,
        dismissed: bool | None = None,
        before: tuple[datetime, UUID] | None = None,
        limit: int = 50,
    ) -> list[Suggestion]:
        # the runner's and the agent's matched exactly: None is "none", not "any"
        runner, runner_params = _owner("runner_id", runner_id)
        agent, agent_params = _owner("agent_id", agent_id)
        where = ["org_id = %s", runner, agent]
        params: list[Any] = [org_id, *runner_params, *agent_params]
        if dismissed is not None:
            where.append("dismissed = %s")
            params.append(dismissed)
        if before is not None:
            where.append("(created_at, id) < (%s, %s)")
            params.extend(before)
        params.append(limit)
        rows = await self._all(
            f"SELECT {_SUGGESTIONS.select} FROM runner_suggestions WHERE {' AND '.join(where)}"
            " ORDER BY created_at DESC, id DESC LIMIT %s",
            params,
        )
        return [_suggestion(r) for r in rows]

    async def set_dismissed(
        self, org_id: str, suggestion_id: UUID, dismissed: bool, at: datetime
    ) -> Suggestion:
        row = await self._one(
            f"UPDATE runner_suggestions SET dismissed = %s, updated_at = %s"
            f" WHERE org_id = %s AND id = %s RETURNING {_SUGGESTIONS.select}",
            (dismissed, at, org_id, suggestion_id),
        )
        if row is None:
            raise NotFound("suggestion not found")
        return _suggestion(row)
