"""Planner statistics for tables that outgrew theirs: ``ANALYZE`` when one doubles.

Every statement of the turn is prepared (psycopg prepares a statement on its fifth
run on a connection) and PostgreSQL then keeps one generic plan for it, made for the
tables as they were, until something changes their entry in ``pg_class``: an
``ANALYZE`` or a ``VACUUM`` of one of them. In a young database that is a plan for
nearly empty tables without statistics, and it stays after the tables have grown.
Measured (``python -m bench --only sustained``, autovacuum visiting every 10 min):
the turn's read looked threads up by ``(org_id, created_at)`` and messages by
``(org_id, id)``, filtering the organization's every row (7,644 buffers a call after
8,000 messages), and after an ``ANALYZE`` of tables of a few rows it seq-scanned
them; the statements' time per turn grew twelvefold in 12,000 turns. Autovacuum
analyzes a table once enough of it changed, but only when it visits the database
(``autovacuum_naptime``, shared by every database of the server), which can be long
after the plans went wrong.

``analyze_grown`` finds the tables of the schema (those this role owns) whose live
row count has at least doubled since their last ``ANALYZE``, or that have
``MIN_ROWS`` rows and were never analyzed, and analyzes them. That also replaces
every connection's cached plans that read them. Doubling keeps it rare (a table of a
million rows has been analyzed about twenty times in its life, each reading a
sample of at most 30,000 rows) and leaves the steady state to autovacuum, which
analyzes after 10% of a table changed. ``SKIP_LOCKED``: a table another process or
autovacuum is analyzing is left to it.
"""

from __future__ import annotations

from psycopg import sql

from agentsvc_adapters.postgres.pool import Repo, translate

MIN_ROWS = 50  # as autovacuum_analyze_threshold: below, a wrong plan reads a page or two

_GROWN = (
    "SELECT s.schemaname, s.relname FROM pg_stat_user_tables s"
    " JOIN pg_class c ON c.oid = s.relid"
    " WHERE s.schemaname = current_schema() AND pg_has_role(c.relowner, 'USAGE')"
    " AND s.n_live_tup >= greatest(%(min)s, 2 * c.reltuples)"
    " ORDER BY s.relname"
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
