"""Storage: memory or PostgreSQL (an external server, or the embedded one), the key
that seals what it keeps, and opening it at start-up (migrations, the pool, the text
search and vectors of knowledge)."""

from __future__ import annotations

import logging

from agentsvc_adapters.crypto import AesGcmBox, KeyringError, load_keyring
from agentsvc_adapters.crypto.aesgcm import new_key_spec, parse_keys
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_adapters.postgres import (
    EmbeddedPostgres,
    EmbeddedPostgresError,
    PostgresStorage,
    migrate,
)
from agentsvc_core.errors import DomainError
from agentsvc_core.ports import Storage
from agentsvc_core.ports.embeddings import Embedder
from agentsvc_web.settings import Settings, SettingsError

log = logging.getLogger("agentsvc")


def start_embedded(settings: Settings) -> EmbeddedPostgres:
    """Start (or join) the embedded server whose data lives in ``<data dir>/pgdata``.

    Only the object that started the server stops it: ``agentsvc serve`` keeps
    the one it gets here and stops it on exit."""
    if not settings.local_defaults:  # Settings.from_env refuses this earlier, with more
        raise SettingsError("AGENTSVC_DATABASE_URL must be set (AGENTSVC_LOCAL_DEFAULTS=false)")
    server = EmbeddedPostgres(settings.data_dir / "pgdata")
    try:
        server.start()
    except EmbeddedPostgresError as exc:
        raise SettingsError(f"the embedded PostgreSQL did not start: {exc}") from None
    log.info("using the embedded PostgreSQL in %s", settings.data_dir / "pgdata")
    return server


def database_url(settings: Settings) -> str:
    """The external server's URL, or the embedded one's (started if need be).

    ``agentsvc serve`` starts the embedded server itself before its workers, so
    they find ``AGENTSVC_DATABASE_URL`` set; this start is for other hosts of
    ``create_app``, and leaves the server running when they exit."""
    return settings.database_url or start_embedded(settings).url


def build_storage(settings: Settings) -> Storage:
    """``AGENTSVC_STORAGE``: memory, or PostgreSQL over a pool (opened by
    ``open_database`` at start-up)."""
    if settings.storage == "memory":
        return MemoryStorage()
    return PostgresStorage(
        database_url(settings),
        min_size=settings.db_pool_min,
        max_size=max(settings.db_pool_max, settings.db_pool_min),
        timeout=float(settings.db_pool_timeout_s),
        knowledge_language=settings.knowledge_language,
    )


async def run_migrations(settings: Settings) -> list[int]:
    """Apply pending migrations to the configured database (``agentsvc migrate``)."""
    return await migrate(database_url(settings))


def secret_box(settings: Settings) -> AesGcmBox:
    """Keys from AGENTSVC_ENCRYPTION_KEYS; else, with PostgreSQL, a key kept in the
    data folder (created once); with memory storage, a key for this process only."""
    try:
        if settings.encryption_keys or settings.storage == "postgres":
            # no data folder without the local defaults: a missing key is an error
            folder = settings.data_dir if settings.local_defaults else None
            return AesGcmBox(load_keyring(settings.encryption_keys, folder))
    except KeyringError as exc:
        raise SettingsError(str(exc)) from None
    return AesGcmBox(parse_keys(new_key_spec("memory")))


async def open_database(
    storage: PostgresStorage, settings: Settings, embedder: Embedder | None
) -> None:
    """Migrate (unless told not to), open the pool, prepare knowledge search."""
    try:
        if settings.migrate_on_start:
            await migrate(storage.conninfo)
        await storage.open()
    except DomainError as exc:
        raise SettingsError(exc.detail) from None
    await _prepare_knowledge(storage, settings.knowledge_language, embedder)


async def _prepare_knowledge(
    storage: PostgresStorage, language: str, embedder: Embedder | None
) -> None:
    """Check the text search configuration; set up vectors when an embedding
    provider is configured (pgvector), or say why search stays full text."""
    if not await storage.knowledge.check_language():
        raise SettingsError(
            f"AGENTSVC_KNOWLEDGE_LANGUAGE: the PostgreSQL server has no text search"
            f" configuration {language!r} (the server's pg_ts_config lists those it has)"
        )
    if embedder is None:
        return
    why = await storage.knowledge.enable_vectors(embedder.dimensions)
    if why is not None:
        log.warning("knowledge search is full text only: %s", why)
    else:
        log.info("knowledge search is hybrid: full text and %s vectors (pgvector)", embedder.model)
