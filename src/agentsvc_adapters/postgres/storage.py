"""PostgreSQL storage on psycopg 3 (async) and one ``AsyncConnectionPool``.

SQL is written by hand and parameterised. Connections are in autocommit mode;
operations that read then write take a transaction and a row lock. psycopg's
exceptions never leave the package: they become domain errors in ``pool.translate``.

``PostgresStorage`` composes the repositories, one module each, over one pool
(``pool``); the modules share their column lists and row mappers through
``_rows`` and import neither each other nor this one (an import-linter contract).
"""

from __future__ import annotations

import functools
from datetime import timedelta

import psycopg
from psycopg.rows import tuple_row

from agentsvc_adapters.postgres.agents import PostgresAgents
from agentsvc_adapters.postgres.api_keys import PostgresApiKeys
from agentsvc_adapters.postgres.channels import PostgresChannels
from agentsvc_adapters.postgres.code_sessions import PostgresCodeSessions
from agentsvc_adapters.postgres.computer import PostgresComputers
from agentsvc_adapters.postgres.conversations import PostgresConversations
from agentsvc_adapters.postgres.erasure import PostgresErasure
from agentsvc_adapters.postgres.event_webhooks import PostgresEventWebhooks
from agentsvc_adapters.postgres.idempotency import PostgresIdempotency
from agentsvc_adapters.postgres.integrations import PostgresIntegrations
from agentsvc_adapters.postgres.knowledge import PostgresKnowledge
from agentsvc_adapters.postgres.marketplace import PostgresMarketplace
from agentsvc_adapters.postgres.mcps import PostgresMcps
from agentsvc_adapters.postgres.memories import PostgresMemories
from agentsvc_adapters.postgres.migrate import migrations
from agentsvc_adapters.postgres.organizations import PostgresOrganizations
from agentsvc_adapters.postgres.owners import new_owner
from agentsvc_adapters.postgres.plans import PostgresPlans
from agentsvc_adapters.postgres.pool import (
    Connection,
    LifoPool,
    Pool,
    check_if_idle,
    configure,
    pool_use,
    translate,
)
from agentsvc_adapters.postgres.projects import PostgresProjects
from agentsvc_adapters.postgres.publishing import PostgresPublishing
from agentsvc_adapters.postgres.runners import PostgresRunners
from agentsvc_adapters.postgres.secrets import PostgresSecrets
from agentsvc_adapters.postgres.skills import PostgresSkills
from agentsvc_adapters.postgres.statistics import PostgresStatistics
from agentsvc_adapters.postgres.streams import PostgresStreams
from agentsvc_adapters.postgres.threads import PostgresThreads
from agentsvc_adapters.postgres.traces import PostgresTraces
from agentsvc_adapters.postgres.turns import PostgresTurnReader
from agentsvc_adapters.postgres.webhook_tools import PostgresWebhookTools
from agentsvc_adapters.storage import Repositories, StorageFacade
from agentsvc_core.errors import Unavailable

READY_TIMEOUT_S = 3.0  # the readiness probe's wait for a pooled connection


@functools.cache
def _shipped() -> frozenset[int]:
    """The versions of the migrations this package ships (read once)."""
    return frozenset(version for version, _, _ in migrations())


class PostgresStorage(StorageFacade):
    """All repositories over one pool. ``open()``/``close()`` belong to the lifespan."""

    def __init__(
        self,
        conninfo: str,
        *,
        min_size: int = 2,
        max_size: int = 10,
        timeout: float = 10.0,
        fold_settle_s: float = 120.0,
        knowledge_language: str = "english",
    ) -> None:
        """``fold_settle_s``: how old a stored row must be before analytics' fold sums
        it (``PostgresTraces``); ``knowledge_language``: the text search
        configuration of knowledge chunks (``PostgresKnowledge``)."""
        self.conninfo = conninfo
        self.pool: Pool = LifoPool(
            conninfo,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            open=False,
            kwargs={"autocommit": True, "row_factory": tuple_row},
            connection_class=Connection,
            configure=configure,
            check=check_if_idle,
            name="agentsvc",
        )
        # this process among the runs' owners: the stop bus holds its lock (owners.py)
        self.owner = new_owner()
        self._knowledge = PostgresKnowledge(self.pool, language=knowledge_language)
        self._statistics = PostgresStatistics(self.pool)
        traces = PostgresTraces(self.pool, timedelta(seconds=fold_settle_s))
        super().__init__(
            Repositories(
                organizations=PostgresOrganizations(self.pool),
                api_keys=PostgresApiKeys(self.pool),
                agents=PostgresAgents(self.pool),
                threads=PostgresThreads(self.pool),
                conversations=PostgresConversations(self.pool, self.owner),
                mcps=PostgresMcps(self.pool),
                secrets=PostgresSecrets(self.pool),
                integrations=PostgresIntegrations(self.pool),
                turn_reader=PostgresTurnReader(self.pool),
                streams=PostgresStreams(self.pool),
                idempotency=PostgresIdempotency(self.pool),
                traces=traces,
                analytics=traces,
                webhook_tools=PostgresWebhookTools(self.pool),
                plans=PostgresPlans(self.pool),
                memories=PostgresMemories(self.pool),
                knowledge=self._knowledge,
                runners=PostgresRunners(self.pool),
                projects=PostgresProjects(self.pool),
                marketplace=PostgresMarketplace(self.pool),
                publishing=PostgresPublishing(self.pool),
                skills=PostgresSkills(self.pool),
                channels=PostgresChannels(self.pool),
                computers=PostgresComputers(self.pool),
                code_sessions=PostgresCodeSessions(self.pool),
                erasure=PostgresErasure(self.pool),
                event_webhooks=PostgresEventWebhooks(self.pool),
            )
        )

    async def open(self) -> None:
        async with translate():
            await self.pool.open(wait=True, timeout=30.0)

    async def close(self) -> None:
        await self.pool.close()

    async def analyze_grown(self) -> list[str]:
        """``ANALYZE`` the tables that at least doubled since their last statistics
        (``statistics.py``: why the plans of a young database need it); their names."""
        return await self._statistics.analyze_grown()

    def pool_use(self) -> dict[str, float]:
        """The pool's use now (``pool.pool_use``), for ``/metrics``."""
        return pool_use(self.pool)

    async def check_ready(self) -> None:
        """One statement through the pool (a connection within ``READY_TIMEOUT_S``):
        the applied migrations, which must include every shipped one. A missing
        ``schema_migrations`` table is a database nobody migrated."""
        try:
            async with self.pool.connection(timeout=READY_TIMEOUT_S) as conn:
                cur = await conn.execute("SELECT version FROM schema_migrations")
                applied = {row[0] for row in await cur.fetchall()}
        except psycopg.errors.UndefinedTable:
            raise Unavailable("the database has no schema yet (run agentsvc migrate)") from None
        except psycopg.Error:  # PoolTimeout and PoolClosed too
            raise Unavailable("the database is unreachable or busy") from None
        if not _shipped() <= applied:
            raise Unavailable("database migrations are pending (run agentsvc migrate)")

    @property
    def knowledge(self) -> PostgresKnowledge:
        """Narrower than the port's: start-up checks its text search configuration
        and sets up its vectors."""
        return self._knowledge
