"""Planner statistics for tables that outgrew theirs: ``ANALYZE`` when one doubles.

psycopg prepares a statement once it has run five times on a connection; after
five more runs PostgreSQL settles on a generic plan when it looks no dearer than
the plans for the values, and keeps it, made for the tables as they were, until
something changes their entry in ``pg_class``: an ``ANALYZE`` or a ``VACUUM`` of
one of them. In a young database that is a plan for nearly empty tables without
statistics, and it stays while they grow. Measured (``python -m bench --only
sustained``, autovacuum visiting every 10 minutes): the turn's read found its thread
through the ``(org_id, created_at)`` index and its messages through ``(org_id, id)``,
filtering the organization's every row (7,644 buffers a call at 8,000 messages), and
the foreign keys' checks did the same; after an ``ANALYZE`` of tables of a few rows
the plans were sequential scans, kept as well. The statements' time per turn grew
twelvefold in 12,000 turns. Autovacuum analyzes a table once enough of it changed,
but only when it visits the database (``autovacuum_naptime``, shared by all the
server's databases), which can be long after the plans went wrong.

``analyze_grown`` analyzes the tables of the schema (those this role owns) whose
live rows have at least doubled since their last statistics, or number
``MIN_ROWS`` with none; an ``ANALYZE`` also makes every connection plan again the
statements that read the table. Doubling keeps it rare (a table of a million rows
is analyzed about twenty times in its life, each time reading a sample of at most
30,000 rows) and leaves the steady state to autovacuum, which analyzes after a tenth
of a table changed. ``SKIP_LOCKED``: a table that another process or autovacuum is
analyzing is left to it.
"""

from __future__ import annotations

from psycopg import sql

from agentsvc_adapters.postgres.pool import Repo, translate

MIN_ROWS = 50  # as autovacuum_analyze_threshold: below, a wrong plan reads a page or two

# pg_class with the statistics system's live rows (not pg_stat_user_tables, which
# also sums every index's counters: 0.7 ms against 0.2)
_GROWN = (
    "SELECT current_schema(), c.relname FROM pg_class c"
    " WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'"
    " AND pg_has_role(c.relowner, 'USAGE')"
    " AND pg_stat_get_live_tuples(c.oid) >= greatest(%(min)s, 2 * c.reltuples)"
    " ORDER BY c.relname"
)


class PostgresStatistics(Repo):
    async def analyze_grown(self, min_rows: int = MIN_ROWS) -> list[str]:
        """``ANALYZE`` the tables that doubled since their statistics; their names."""
        async with translate(), self._pool.connection() as conn:
            rows = await (await conn.execute(_GROWN, {"min": min_rows})).fetchall()
            if rows:
                tables = sql.SQL(", ").join(sql.Identifier(s, t) for s, t in rows)
                await conn.execute(sql.SQL("ANALYZE (SKIP_LOCKED) {}").format(tables))
        return [str(t) for _, t in rows]
