"""Configuration, read once from ``AGENTSVC_*`` environment variables."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec

StorageKind = Literal["memory", "postgres"]


class SettingsError(ValueError):
    """A configuration value is missing or malformed; the message names the variable."""


def _flag(env: Mapping[str, str], name: str, default: bool = False) -> bool:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in {"1", "true", "yes", "on"}:
        return True
    if raw.lower() in {"0", "false", "no", "off"}:
        return False
    raise SettingsError(f"{name} must be true or false, not {raw!r}")


def _int(env: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a whole number, not {raw!r}") from None
    if not lo <= value <= hi:
        raise SettingsError(f"{name} must be between {lo} and {hi}")
    return value


def _choice(env: Mapping[str, str], name: str, allowed: tuple[str, ...]) -> str:
    raw = env.get(name, "").strip() or allowed[0]
    if raw not in allowed:
        raise SettingsError(f"{name} must be one of {', '.join(allowed)}, not {raw!r}")
    return raw


def _routes(raw: str) -> tuple[tuple[str, str], ...]:
    """``claude-=alpha,gpt-=beta,o=beta``: model id prefix -> provider family."""
    if not raw.strip():
        return (("claude-", "alpha"), ("gpt-", "beta"), ("o", "beta"))
    routes = []
    for item in raw.split(","):
        prefix, sep, family = item.strip().partition("=")
        if not sep or not prefix or family not in ("alpha", "beta"):
            raise SettingsError(
                f"AGENTSVC_MODEL_ROUTES entries are prefix=alpha or prefix=beta, not {item!r}"
            )
        routes.append((prefix, family))
    return tuple(routes)


def _origins(raw: str) -> tuple[str, ...]:
    """``https://app.example,http://localhost:3000``: browser origins allowed by
    CORS (``scheme://host[:port]``, no path), or ``*`` for any origin."""
    origins: list[str] = []
    for item in raw.split(","):
        origin = item.strip().rstrip("/")
        if not origin:
            continue
        if origin != "*" and not _ORIGIN.fullmatch(origin):
            raise SettingsError(
                "AGENTSVC_CORS_ORIGINS entries are origins such as https://app.example.com or "
                "http://localhost:3000 (scheme, host, optional port, no path) or *, "
                f"not {item!r}"
            )
        origins.append(origin.lower())
    return tuple(dict.fromkeys(origins))


_ORIGIN = re.compile(
    r"https?://[A-Za-z0-9.-]+(?::[0-9]{1,5})?|https?://\[[0-9A-Fa-f:.]+\](?::[0-9]{1,5})?"
)


def _opt(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


def _file(env: Mapping[str, str], name: str) -> Path | None:
    """An optional path to a file that must exist when set: a typo fails at start-up,
    not at the first use."""
    value = _opt(env, name)
    if value is None:
        return None
    path = Path(value).expanduser()
    if not path.is_file():
        raise SettingsError(f"{name} names {value!r}, which is not a file")
    return path


def _web_search(env: Mapping[str, str]) -> dict[str, Any]:
    """The search provider of ``web_search``: configured by its API key (the
    provider is brave unless named); a provider named without a key is an error."""
    key = _opt(env, "AGENTSVC_WEB_SEARCH_API_KEY")
    named = _opt(env, "AGENTSVC_WEB_SEARCH_PROVIDER")
    if named is not None and named not in _SEARCH_PROVIDERS:
        raise SettingsError(
            f"AGENTSVC_WEB_SEARCH_PROVIDER must be one of {', '.join(_SEARCH_PROVIDERS)}, "
            f"not {named!r}"
        )
    if named is not None and key is None:
        raise SettingsError(
            f"AGENTSVC_WEB_SEARCH_PROVIDER={named} needs AGENTSVC_WEB_SEARCH_API_KEY"
        )
    url = _opt(env, "AGENTSVC_WEB_SEARCH_URL")
    if url is not None and not _BASE_URL.fullmatch(url):
        raise SettingsError(
            f"AGENTSVC_WEB_SEARCH_URL must be an http(s) base URL such as "
            f"https://api.search.brave.com, not {url!r}"
        )
    return {
        "web_search_provider": (named or _SEARCH_PROVIDERS[0]) if key else None,
        "web_search_api_key": key,
        "web_search_url": url,
    }


_SEARCH_PROVIDERS = ("brave",)

# the vector length of the embeddings models whose length is known; another model
# needs AGENTSVC_EMBEDDINGS_DIMENSIONS
_EMBEDDING_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


def _embeddings(env: Mapping[str, str]) -> dict[str, Any]:
    """The embeddings provider of knowledge search, configured by its URL (unset:
    full-text search only). The vector length is fixed here, because the database
    column is made for it: the model's own length, or the one set explicitly, which
    is then also sent to the provider (``dimensions``: models that can shorten
    their vectors honour it; older ones and some servers refuse the field)."""
    url = _opt(env, "AGENTSVC_EMBEDDINGS_URL")
    model = _opt(env, "AGENTSVC_EMBEDDINGS_MODEL") or "text-embedding-3-small"
    explicit = _opt(env, "AGENTSVC_EMBEDDINGS_DIMENSIONS") is not None
    dimensions = _int(
        env, "AGENTSVC_EMBEDDINGS_DIMENSIONS", _EMBEDDING_DIMENSIONS.get(model, 0), 1, 4000
    )
    if url is not None:
        if not _BASE_URL.fullmatch(url):
            raise SettingsError(
                "AGENTSVC_EMBEDDINGS_URL must be an http(s) base URL such as "
                f"https://api.openai.com/v1, not {url!r}"
            )
        if not explicit and model not in _EMBEDDING_DIMENSIONS:
            raise SettingsError(
                f"AGENTSVC_EMBEDDINGS_MODEL={model} needs AGENTSVC_EMBEDDINGS_DIMENSIONS "
                "(the length of its vectors)"
            )
    return {
        "embeddings_url": url,
        "embeddings_api_key": _opt(env, "AGENTSVC_EMBEDDINGS_API_KEY"),
        "embeddings_model": model,
        "embeddings_dimensions": dimensions or 1536,
        "embeddings_send_dimensions": explicit,
    }


_BASE_URL = re.compile(r"https?://[^\s/?#]+(?:/[^\s?#]*)?")


def _base_url(env: Mapping[str, str], name: str, default: str) -> str:
    """An http(s) base URL (a platform's API; tests point it at a loopback fake)."""
    url = _opt(env, name) or default
    if not _BASE_URL.fullmatch(url):
        raise SettingsError(f"{name} must be an http(s) base URL such as {default}, not {url!r}")
    return url.rstrip("/")


def _require_external(env: Mapping[str, str]) -> None:
    """With the local defaults off (the container image sets
    ``AGENTSVC_LOCAL_DEFAULTS=false``), PostgreSQL storage needs its server and its
    encryption keys named. In a container the embedded server and a generated key
    would live in the container's own file system: a recreated container would lose
    the data, or keep it with no key to read its stored secrets. Refusing at start
    says so at once, rather than after the first upgrade."""
    missing = [
        name
        for name in ("AGENTSVC_DATABASE_URL", "AGENTSVC_ENCRYPTION_KEYS")
        if _opt(env, name) is None
    ]
    if missing:
        raise SettingsError(
            f"{' and '.join(missing)} must be set: with AGENTSVC_LOCAL_DEFAULTS=false (as in "
            "the container image) the service starts no embedded PostgreSQL and generates no "
            "encryption key. Set AGENTSVC_DATABASE_URL=postgresql://user:password@host:5432/db "
            "and AGENTSVC_ENCRYPTION_KEYS=k1:<32 bytes in base64> (docs/deploy.md, "
            '"Containers"), or AGENTSVC_STORAGE=memory for a try that keeps nothing'
        )


def _whatsapp(env: Mapping[str, str]) -> dict[str, Any]:
    """The WhatsApp channels' far ends: Meta's Graph API (its real URL and a pinned
    version unless set) and the WhatsApp Web sidecar (unset: that type is not
    offered; 422 naming the variable when a channel asks for it)."""
    found: dict[str, Any] = {}
    for field, name in (
        ("whatsapp_cloud_api_url", "AGENTSVC_WHATSAPP_CLOUD_API_URL"),
        ("whatsapp_web_url", "AGENTSVC_WHATSAPP_WEB_URL"),
    ):
        url = _opt(env, name)
        if url is not None and not _BASE_URL.fullmatch(url):
            raise SettingsError(f"{name} must be an http(s) base URL, not {url!r}")
        found[field] = url
    version = _opt(env, "AGENTSVC_WHATSAPP_CLOUD_API_VERSION") or "v21.0"
    if not re.fullmatch(r"v[0-9]{1,3}\.[0-9]{1,2}", version):
        raise SettingsError(
            f"AGENTSVC_WHATSAPP_CLOUD_API_VERSION must be a Graph API version such as "
            f"v21.0, not {version!r}"
        )
    found["whatsapp_cloud_api_url"] = (
        found["whatsapp_cloud_api_url"] or "https://graph.facebook.com"
    )
    found["whatsapp_cloud_api_version"] = version
    found["whatsapp_web_api_key"] = _opt(env, "AGENTSVC_WHATSAPP_WEB_API_KEY")
    return found


def _language(env: Mapping[str, str]) -> str:
    """A PostgreSQL text search configuration's name (checked against the server
    at start-up): ``english``, ``simple`` (no stemming), ``german``..."""
    raw = env.get("AGENTSVC_KNOWLEDGE_LANGUAGE", "").strip().lower() or "english"
    if not raw.replace("_", "").isalnum() or len(raw) > 63:
        raise SettingsError(
            "AGENTSVC_KNOWLEDGE_LANGUAGE must name a PostgreSQL text search configuration"
        )
    return raw


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    storage: StorageKind = "postgres"
    database_url: str | None = None
    db_pool_min: int = 2
    db_pool_max: int = 10
    db_pool_timeout_s: int = 10
    migrate_on_start: bool = True
    data_dir: Path = Path(".agentsvc")
    # the single-machine defaults kept in the data folder: the embedded PostgreSQL
    # without AGENTSVC_DATABASE_URL, a generated key without AGENTSVC_ENCRYPTION_KEYS;
    # off (the container image), both variables are required instead
    local_defaults: bool = True
    host: str = "127.0.0.1"
    port: int = 8000
    bootstrap_api_key: str | None = None
    bootstrap_org: str = "default"
    jwt_secret: str | None = None
    jwt_jwks_url: str | None = None
    jwt_algorithms: tuple[str, ...] = ()
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    jwt_org_claim: str = "org_id"
    jwt_role_claim: str = "role"
    jwt_admin_role: str = "admin"
    default_model: str = "local"
    alpha_base_url: str | None = None
    alpha_api_key: str | None = None
    beta_base_url: str | None = None
    beta_api_key: str | None = None
    beta_max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens"
    model_routes: tuple[tuple[str, str], ...] = (
        ("claude-", "alpha"),
        ("gpt-", "beta"),
        ("o", "beta"),
    )
    provider_read_timeout_s: int = 120
    provider_max_connections: int = 10_000
    max_body_bytes: int = 2 * 1024 * 1024
    encryption_keys: str | None = None
    mcp_registry_url: str = "https://registry.modelcontextprotocol.io"
    public_url: str | None = None
    allow_private_network: bool = False
    allow_stdio_mcp: bool = False
    log_level: str = "INFO"
    log_format: Literal["text", "json"] = "text"
    metrics_token: str | None = None  # when set, /metrics needs it as a bearer token
    cors_origins: tuple[str, ...] = ()  # browser origins allowed by CORS; none: no CORS
    shutdown_grace_s: int = 4
    local_slow_delay_ms: int = 200
    run_stale_after_s: int = 45
    sse_keepalive_s: float = 15.0  # a comment line this often while the model is silent
    stream_replay_s: int = 600  # a finished reply's events can be re-read this long
    stream_flush_ms: int = 100  # a followed reply's events reach storage within this
    api_key_cache_s: int = 10
    rate_limit_per_min: int = 600
    rate_limit_per_address_per_min: int = 1200
    auth_failures_per_min: int = 30
    rate_limit_max_keys: int = 50_000
    request_read_timeout_s: int = 30
    forwarded_allow_ips: str | None = None
    prices_file: Path | None = None  # model prices tried before the shipped table
    trace_retention_days: int = 30  # stored traces are pruned after this; 0: none stored
    trace_payload_bytes: int = 65_536  # a span's input and output together, then cut
    eval_slow_first_token_ms: int = 10_000  # a model call slower to its first token is flagged
    web_search_provider: Literal["brave"] | None = None  # None: web_search is not offered
    web_search_api_key: str | None = None
    web_search_url: str | None = None  # the provider's base URL; None: its real one
    worker: bool = True  # run background jobs (document indexing) in this process too
    worker_concurrency: int = 4  # jobs one process runs at once
    job_heartbeat_s: int = 30  # a running job's heartbeat older than this: picked again
    # event webhooks: every retry delay divided by this (tests shrink the day of retries)
    webhook_retry_speedup: int = 1
    webhook_subscriptions_ttl_s: int = 10  # other processes' endpoint changes seen within
    cron_min_interval_s: int = 60  # the least interval between two ticks of a cron trigger
    scheduler_tick_ms: int = 1000  # how often a process looks for due cron ticks
    analyze_every_ms: int = 2000  # how often it looks for tables that doubled; 0: never
    knowledge_max_bytes: int = 20 * 1024 * 1024  # an uploaded document
    knowledge_language: str = "english"  # PostgreSQL text search configuration of chunks
    embeddings_url: str | None = None  # OpenAI-compatible API base; None: no vector search
    embeddings_api_key: str | None = None
    embeddings_model: str = "text-embedding-3-small"
    embeddings_dimensions: int = 1536  # the vector length (the database column's)
    embeddings_send_dimensions: bool = False  # set explicitly: sent as ``dimensions``
    # the messaging platforms' API base URLs (channels; tests point them at loopback fakes)
    telegram_api_url: str = "https://api.telegram.org"
    slack_api_url: str = "https://slack.com/api"
    whatsapp_cloud_api_url: str = "https://graph.facebook.com"  # Meta's Graph API
    whatsapp_cloud_api_version: str = "v21.0"
    whatsapp_web_url: str | None = None  # the WhatsApp Web sidecar; None: not offered
    whatsapp_web_api_key: str | None = None  # the sidecar's ``apikey``

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        e = os.environ if env is None else env
        storage = e.get("AGENTSVC_STORAGE", "").strip() or "postgres"
        if storage not in ("memory", "postgres"):
            raise SettingsError(f"AGENTSVC_STORAGE must be memory or postgres, not {storage!r}")
        secret = _opt(e, "AGENTSVC_JWT_SECRET")
        jwks = _opt(e, "AGENTSVC_JWT_JWKS_URL")
        if secret and jwks:
            raise SettingsError("set AGENTSVC_JWT_SECRET or AGENTSVC_JWT_JWKS_URL, not both")
        default_algs = "HS256" if secret else "RS256,ES256"
        local_defaults = _flag(e, "AGENTSVC_LOCAL_DEFAULTS", default=True)
        if not local_defaults and storage == "postgres":
            _require_external(e)
        algs = tuple(
            a.strip()
            for a in e.get("AGENTSVC_JWT_ALGORITHMS", default_algs).split(",")
            if a.strip()
        )
        return cls(
            storage=storage,  # type: ignore[arg-type]
            database_url=_opt(e, "AGENTSVC_DATABASE_URL"),
            db_pool_min=_int(e, "AGENTSVC_DB_POOL_MIN", 2, 0, 1000),
            db_pool_max=_int(e, "AGENTSVC_DB_POOL_MAX", 10, 1, 1000),
            db_pool_timeout_s=_int(e, "AGENTSVC_DB_POOL_TIMEOUT", 10, 1, 600),
            migrate_on_start=_flag(e, "AGENTSVC_MIGRATE_ON_START", default=True),
            data_dir=Path(e.get("AGENTSVC_DATA_DIR", "").strip() or ".agentsvc"),
            local_defaults=local_defaults,
            host=e.get("AGENTSVC_HOST", "").strip() or "127.0.0.1",
            port=_int(e, "AGENTSVC_PORT", 8000, 0, 65535),
            bootstrap_api_key=_opt(e, "AGENTSVC_BOOTSTRAP_API_KEY"),
            bootstrap_org=e.get("AGENTSVC_BOOTSTRAP_ORG", "").strip() or "default",
            jwt_secret=secret,
            jwt_jwks_url=jwks,
            jwt_algorithms=algs,
            jwt_issuer=_opt(e, "AGENTSVC_JWT_ISSUER"),
            jwt_audience=_opt(e, "AGENTSVC_JWT_AUDIENCE"),
            jwt_org_claim=e.get("AGENTSVC_JWT_ORG_CLAIM", "").strip() or "org_id",
            jwt_role_claim=e.get("AGENTSVC_JWT_ROLE_CLAIM", "").strip() or "role",
            jwt_admin_role=e.get("AGENTSVC_JWT_ADMIN_ROLE", "").strip() or "admin",
            default_model=e.get("AGENTSVC_DEFAULT_MODEL", "").strip() or "local",
            alpha_base_url=_opt(e, "AGENTSVC_ALPHA_BASE_URL"),
            alpha_api_key=_opt(e, "AGENTSVC_ALPHA_API_KEY"),
            beta_base_url=_opt(e, "AGENTSVC_BETA_BASE_URL"),
            beta_api_key=_opt(e, "AGENTSVC_BETA_API_KEY"),
            beta_max_tokens_field=_choice(
                e, "AGENTSVC_BETA_MAX_TOKENS_FIELD", ("max_completion_tokens", "max_tokens")
            ),  # type: ignore[arg-type]
            model_routes=_routes(e.get("AGENTSVC_MODEL_ROUTES", "")),
            provider_read_timeout_s=_int(e, "AGENTSVC_PROVIDER_READ_TIMEOUT_S", 120, 1, 3600),
            provider_max_connections=_int(
                e, "AGENTSVC_PROVIDER_MAX_CONNECTIONS", 10_000, 1, 1_000_000
            ),
            max_body_bytes=_int(
                e, "AGENTSVC_MAX_BODY_BYTES", 2 * 1024 * 1024, 1024, 1024 * 1024 * 1024
            ),
            encryption_keys=_opt(e, "AGENTSVC_ENCRYPTION_KEYS"),
            public_url=_opt(e, "AGENTSVC_PUBLIC_URL"),
            mcp_registry_url=_opt(e, "AGENTSVC_MCP_REGISTRY_URL")
            or "https://registry.modelcontextprotocol.io",
            allow_private_network=_flag(e, "AGENTSVC_ALLOW_PRIVATE_NETWORK"),
            allow_stdio_mcp=_flag(e, "AGENTSVC_ALLOW_STDIO_MCP"),
            log_level=(e.get("AGENTSVC_LOG_LEVEL", "").strip() or "INFO").upper(),
            log_format=_choice(e, "AGENTSVC_LOG_FORMAT", ("text", "json")),  # type: ignore[arg-type]
            metrics_token=_opt(e, "AGENTSVC_METRICS_TOKEN"),
            cors_origins=_origins(e.get("AGENTSVC_CORS_ORIGINS", "")),
            shutdown_grace_s=_int(e, "AGENTSVC_SHUTDOWN_GRACE_S", 4, 0, 3600),
            local_slow_delay_ms=_int(e, "AGENTSVC_LOCAL_SLOW_DELAY_MS", 200, 0, 10_000),
            run_stale_after_s=_int(e, "AGENTSVC_RUN_STALE_AFTER_S", 45, 2, 3600),
            stream_replay_s=_int(e, "AGENTSVC_STREAM_REPLAY_S", 600, 0, 7 * 86400),
            stream_flush_ms=_int(e, "AGENTSVC_STREAM_FLUSH_MS", 100, 10, 10_000),
            api_key_cache_s=_int(e, "AGENTSVC_API_KEY_CACHE_S", 10, 0, 3600),
            rate_limit_per_min=_int(e, "AGENTSVC_RATE_LIMIT_PER_MIN", 600, 0, 10_000_000),
            rate_limit_per_address_per_min=_int(
                e, "AGENTSVC_RATE_LIMIT_PER_ADDRESS_PER_MIN", 1200, 0, 10_000_000
            ),
            auth_failures_per_min=_int(e, "AGENTSVC_AUTH_FAILURES_PER_MIN", 30, 0, 10_000_000),
            rate_limit_max_keys=_int(e, "AGENTSVC_RATE_LIMIT_MAX_KEYS", 50_000, 100, 100_000_000),
            request_read_timeout_s=_int(e, "AGENTSVC_REQUEST_READ_TIMEOUT_S", 30, 1, 3600),
            forwarded_allow_ips=_opt(e, "AGENTSVC_FORWARDED_ALLOW_IPS"),
            prices_file=_file(e, "AGENTSVC_PRICES_FILE"),
            trace_retention_days=_int(e, "AGENTSVC_TRACE_RETENTION_DAYS", 30, 0, 3650),
            trace_payload_bytes=_int(
                e, "AGENTSVC_TRACE_PAYLOAD_BYTES", 65_536, 256, 16 * 1024 * 1024
            ),
            eval_slow_first_token_ms=_int(
                e, "AGENTSVC_EVAL_SLOW_FIRST_TOKEN_MS", 10_000, 1, 3_600_000
            ),
            **_web_search(e),
            worker=_flag(e, "AGENTSVC_WORKER", default=True),
            worker_concurrency=_int(e, "AGENTSVC_WORKER_CONCURRENCY", 4, 2, 256),
            job_heartbeat_s=_int(e, "AGENTSVC_JOB_HEARTBEAT_S", 30, 2, 3600),
            webhook_retry_speedup=_int(e, "AGENTSVC_WEBHOOK_RETRY_SPEEDUP", 1, 1, 100_000),
            webhook_subscriptions_ttl_s=_int(
                e, "AGENTSVC_WEBHOOK_SUBSCRIPTIONS_TTL_S", 10, 1, 3600
            ),
            cron_min_interval_s=_int(e, "AGENTSVC_CRON_MIN_INTERVAL_S", 60, 1, 86_400),
            scheduler_tick_ms=_int(e, "AGENTSVC_SCHEDULER_TICK_MS", 1000, 50, 60_000),
            analyze_every_ms=_int(e, "AGENTSVC_ANALYZE_EVERY_MS", 2000, 0, 3_600_000),
            knowledge_max_bytes=_int(
                e, "AGENTSVC_KNOWLEDGE_MAX_BYTES", 20 * 1024 * 1024, 1024, 1024 * 1024 * 1024
            ),
            knowledge_language=_language(e),
            **_embeddings(e),
            telegram_api_url=_base_url(e, "AGENTSVC_TELEGRAM_API_URL", "https://api.telegram.org"),
            slack_api_url=_base_url(e, "AGENTSVC_SLACK_API_URL", "https://slack.com/api"),
            **_whatsapp(e),
        )

    @property
    def base_url(self) -> str:
        """Where browsers reach the service (OAuth redirects)."""
        return self.public_url or f"http://{self.host}:{self.port}"

    def _shown(self) -> dict[str, object]:
        return {
            f: ("***" if getattr(self, f) and f in _SECRET_FIELDS else getattr(self, f))
            for f in self.__struct_fields__
        }

    def __repr__(self) -> str:  # never print secrets
        return f"Settings({self._shown()})"

    def __rich_repr__(self) -> list[tuple[str, Any]]:  # rich's pretty-printer too
        return list(self._shown().items())


_SECRET_FIELDS = frozenset(
    {
        "bootstrap_api_key",
        "jwt_secret",
        "database_url",
        "alpha_api_key",
        "beta_api_key",
        "encryption_keys",
        "metrics_token",
        "web_search_api_key",
        "embeddings_api_key",
        "whatsapp_web_api_key",
    }
)
