"""PostgreSQL storage: the production adapter, its migrations, and an embedded server."""

from agentsvc_adapters.postgres.embedded import EmbeddedPostgres, EmbeddedPostgresError
from agentsvc_adapters.postgres.migrate import migrate
from agentsvc_adapters.postgres.signals import PostgresStopBus
from agentsvc_adapters.postgres.storage import PostgresStorage

__all__ = [
    "EmbeddedPostgres",
    "EmbeddedPostgresError",
    "PostgresStopBus",
    "PostgresStorage",
    "migrate",
]
