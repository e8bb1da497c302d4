"""The ``agentsvc`` command: ``serve``, ``worker``, ``keys create``, ``migrate``,
``secrets rotate``, ``backup`` and ``restore``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any, Protocol

import msgspec
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from agentsvc_core.entities import API_KEY_PREFIX
from agentsvc_core.ports import SecretUnreadable
from agentsvc_core.use_cases.sealed import SealedRecords
from agentsvc_web.bootstrap import build_services, run_migrations, start_embedded
from agentsvc_web.logs import configure_logging
from agentsvc_web.settings import Settings, SettingsError
from agentsvc_web.shutdown import DRAIN_MARGIN_S

log = logging.getLogger("agentsvc")


class _Embedded(Protocol):
    """What the commands need of the embedded server ``start_embedded`` returns."""

    @property
    def bin_dir(self) -> Path: ...


def _dev_key(settings: Settings) -> str:
    """The development key kept in the data folder (created on first use, mode 0600)."""
    path = Path(settings.data_dir) / "dev-api-key"
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    token = API_KEY_PREFIX + secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token


def _serve(args: argparse.Namespace) -> int:
    import uvicorn  # noqa: PLC0415  (only the serve command needs the server)

    settings = Settings.from_env()
    host = args.host or settings.host
    port = args.port if args.port is not None else settings.port
    if args.workers > 1 and settings.storage == "memory":
        print(
            "error: --workers > 1 needs shared storage; memory storage lives in one process",
            file=sys.stderr,
        )
        return 2
    if args.print_dev_key:
        base = f"http://{host}:{port}"
        if settings.bootstrap_api_key:
            print(
                "Using AGENTSVC_BOOTSTRAP_API_KEY from the environment.\n"
                f"  playground: {base}/playground  (sign in with that key)",
                flush=True,
            )
        else:
            key = _dev_key(settings)
            os.environ["AGENTSVC_BOOTSTRAP_API_KEY"] = key
            print(
                f"\n  agentsvc on {base}  (organization {settings.bootstrap_org!r})\n"
                f"  API key: {key}\n"
                f"  (kept in {Path(settings.data_dir) / 'dev-api-key'})\n\n"
                f"  curl -s {base}/api/agents -H 'Authorization: Bearer {key}'\n"
                f"  playground: {base}/playground  (sign in with the key above)\n",
                flush=True,
            )
    # uvicorn shuts down gracefully on SIGTERM/SIGINT, then raises the signal again
    # with the handler it found. Handled as an exit, it lets the finally below stop
    # the embedded server; the default handler would kill us before that.
    signal.signal(signal.SIGTERM, _exit_on_signal)
    signal.signal(signal.SIGHUP, _exit_on_signal)
    # Start the embedded server here, once, so that every worker finds it.
    with _embedded_database(settings), contextlib.suppress(KeyboardInterrupt):
        _run_uvicorn(uvicorn, args, settings, host, port)
    return 0


@contextlib.contextmanager
def _embedded_database(settings: Settings) -> Iterator[_Embedded | None]:
    """With PostgreSQL storage and no AGENTSVC_DATABASE_URL: start (or join) the
    embedded server for this command, and stop it afterwards if we started it."""
    if settings.storage != "postgres" or settings.database_url:
        yield None
        return
    embedded = start_embedded(settings)
    os.environ["AGENTSVC_DATABASE_URL"] = embedded.url
    try:
        yield embedded
    finally:
        embedded.stop()


def _pg_program(name: str, embedded: _Embedded | None, pg_bin: str) -> str | None:
    """``pg_dump``/``pg_restore``: the embedded server's own (its major version),
    else AGENTSVC_PG_BIN's, else the one on PATH."""
    folders = [embedded.bin_dir] if embedded is not None else []
    if pg_bin and pg_bin != "wheel":
        folders.append(Path(pg_bin))
    for folder in folders:
        if (folder / name).is_file():
            return str(folder / name)
    return shutil.which(name)


def _backup_or_restore(command: str, file: str) -> int:
    """``agentsvc backup FILE`` (pg_dump, custom format) and ``agentsvc restore FILE``
    (pg_restore: replaces every table in one transaction) against the service's
    database: the embedded server (started or joined) or AGENTSVC_DATABASE_URL. The
    password goes to the program in its environment, not on its command line."""
    settings = Settings.from_env()
    if settings.storage == "memory":
        what = "back up" if command == "backup" else "restore"
        print(f"nothing to {what}: AGENTSVC_STORAGE=memory", file=sys.stderr)
        return 2
    with _embedded_database(settings) as embedded:
        url = os.environ.get("AGENTSVC_DATABASE_URL") or settings.database_url or ""
        name = "pg_dump" if command == "backup" else "pg_restore"
        program = _pg_program(name, embedded, os.environ.get("AGENTSVC_PG_BIN", ""))
        if program is None:
            print(
                f"error: {name} not found: install the PostgreSQL client programs of the "
                "server's major version, or set AGENTSVC_PG_BIN to their folder",
                file=sys.stderr,
            )
            return 2
        params = conninfo_to_dict(url)
        password = params.pop("password", None)
        env = dict(os.environ)
        if password:
            env["PGPASSWORD"] = str(password)
        rest = {key: str(value) for key, value in params.items() if value is not None}
        target = f"--dbname={make_conninfo('', **rest)}"
        if command == "backup":
            args = [program, "--format=custom", f"--file={file}", target]
        else:
            args = [program, "--clean", "--if-exists", "--single-transaction", "--no-owner"]
            args += [target, file]
        done = subprocess.run(args, env=env, check=False)  # noqa: S603 - no shell
    if done.returncode == 0:
        print(f"{'backed up to' if command == 'backup' else 'restored from'} {file}")
    return done.returncode


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _run_uvicorn(
    uvicorn: Any, args: argparse.Namespace, settings: Settings, host: str, port: int
) -> None:
    uvicorn.run(
        "agentsvc_web.app:serve_app",
        factory=True,
        host=host,
        port=port,
        workers=args.workers,
        loop="uvloop",
        # httptools, with a time limit on receiving a request's head (read_timeout.py)
        http="agentsvc_web.read_timeout:ReadTimeoutProtocol",
        access_log=args.access_log,
        log_level=settings.log_level.lower(),
        # uvicorn's loggers get no handlers of their own: their lines reach the
        # root logger's, in AGENTSVC_LOG_FORMAT with request ids (agentsvc_web/logs.py)
        log_config=None,
        # the drain (agentsvc_web.shutdown) ends every stream within this
        timeout_graceful_shutdown=int(settings.shutdown_grace_s + DRAIN_MARGIN_S),
        # the client address (rate limits, access log) is the socket peer, unless
        # the peer is a proxy trusted by AGENTSVC_FORWARDED_ALLOW_IPS
        proxy_headers=settings.forwarded_allow_ips is not None,
        forwarded_allow_ips=settings.forwarded_allow_ips,
    )


def _no_worker() -> Settings:
    """The settings of a one-off command: it runs no background job (a job it
    started would be cut short when the command ends)."""
    return msgspec.structs.replace(Settings.from_env(), worker=False)


async def _work() -> int:
    """``agentsvc worker``: background jobs only (document indexing), no HTTP. Any
    number of them, on any machine, share the jobs through the database; SIGTERM
    or SIGINT stops taking jobs and lets the running ones finish (the shutdown
    grace), then exits."""
    settings = msgspec.structs.replace(Settings.from_env(), worker=True)
    if settings.storage == "memory":
        print(
            "error: workers share jobs through PostgreSQL; with AGENTSVC_STORAGE=memory "
            "the jobs run inside `agentsvc serve`",
            file=sys.stderr,
        )
        return 2
    services = build_services(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with services.running():
        log.info("worker running (%d jobs at once)", settings.worker_concurrency)
        await stop.wait()
        log.info("worker stopping: running jobs may finish")
    return 0


async def _keys_create(org: str, name: str) -> int:
    settings = _no_worker()
    if settings.storage == "memory":
        print(
            "error: with AGENTSVC_STORAGE=memory a key made here would vanish with this "
            "command; use AGENTSVC_BOOTSTRAP_API_KEY, or POST /api/keys on the running service",
            file=sys.stderr,
        )
        return 2
    services = build_services(settings)
    async with services.running():
        issued = await services.api_keys.issue(org, name)
    print(issued.token)
    print(
        f"(key {issued.key.id} for organization {org!r}; shown once, store it now)", file=sys.stderr
    )
    return 0


async def _rotate_secrets() -> int:
    settings = _no_worker()
    if settings.storage == "memory":
        print("nothing to rotate: AGENTSVC_STORAGE=memory", file=sys.stderr)
        return 0
    services = build_services(settings)
    try:
        async with services.running():
            count = await services.mcps.rotate_secrets()
            count += await services.webhook_tools.rotate_secrets()
            count += await SealedRecords(services.storage.secrets, services.box).rotate()
            count += await services.integrations.rotate_secrets()
            count += await services.runners.rotate_secrets()
            count += await services.publishing.rotate_secrets()
            count += await services.event_webhooks.rotate_secrets()
    except SecretUnreadable as exc:
        print(_unreadable(exc), file=sys.stderr)
        return 1
    print(f"re-encrypted {count} stored secret(s) with the newest key")
    return 0


def _unreadable(exc: SecretUnreadable) -> str:
    """One line for a stored secret ``secrets rotate`` cannot open: the key it
    names when that is the trouble (a key id is no secret), never the value."""
    again = "then run `agentsvc secrets rotate` again (what it re-encrypted stays readable)"
    if exc.key_id is not None:
        return (
            f"error: a stored secret was sealed with key {exc.key_id!r}, which "
            f"AGENTSVC_ENCRYPTION_KEYS does not hold: add that key back after the newest "
            f"one ({exc.key_id}:<its base64 key>), {again}"
        )
    return (
        f"error: a stored secret cannot be opened ({exc.detail}): check that "
        f"AGENTSVC_ENCRYPTION_KEYS holds every key the database was sealed with, {again}"
    )


async def _migrate() -> int:
    settings = Settings.from_env()
    if settings.storage == "memory":
        print("nothing to migrate: AGENTSVC_STORAGE=memory", file=sys.stderr)
        return 0
    applied = await run_migrations(Settings.from_env())
    print(f"applied migrations: {applied}" if applied else "schema is up to date")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agentsvc", description="Agent Conversation Service")
    parser.add_argument("--version", action="version", version=f"agentsvc {version('agentsvc')}")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the HTTP service")
    serve.add_argument("--host", default=None, help="listen address (AGENTSVC_HOST)")
    serve.add_argument("--port", type=int, default=None, help="listen port (AGENTSVC_PORT)")
    serve.add_argument("--workers", type=int, default=1, help="worker processes")
    serve.add_argument("--access-log", action="store_true", help="log every request")
    serve.add_argument(
        "--print-dev-key",
        action="store_true",
        help="use (and print) a development API key kept in the data folder",
    )

    keys = sub.add_parser("keys", help="manage API keys")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="create an API key and print it once")
    create.add_argument("--org", required=True, help="organization id (created if new)")
    create.add_argument("--name", default="", help="a label for the key")

    sub.add_parser("migrate", help="apply pending database migrations and exit")
    sub.add_parser("worker", help="run background jobs (document indexing) without serving HTTP")

    backup = sub.add_parser("backup", help="dump the database to FILE (pg_dump, custom format)")
    backup.add_argument("file", metavar="FILE")
    restore = sub.add_parser(
        "restore", help="replace the database's tables with FILE's (pg_restore, one transaction)"
    )
    restore.add_argument("file", metavar="FILE")

    secrets_cmd = sub.add_parser("secrets", help="stored secrets")
    secrets_sub = secrets_cmd.add_subparsers(dest="secrets_command", required=True)
    secrets_sub.add_parser(
        "rotate", help="re-encrypt every stored secret with the newest AGENTSVC_ENCRYPTION_KEYS key"
    )

    args = parser.parse_args(argv)
    try:
        log_format = Settings.from_env().log_format
    except SettingsError:
        log_format = "text"  # the error is reported below
    configure_logging("INFO", log_format)
    try:
        if args.command == "serve":
            return _serve(args)
        if args.command in ("backup", "restore"):
            return _backup_or_restore(args.command, args.file)
        with _embedded_database(Settings.from_env()):
            if args.command == "migrate":
                return asyncio.run(_migrate())
            if args.command == "secrets":
                return asyncio.run(_rotate_secrets())
            if args.command == "worker":
                return asyncio.run(_work())
            return asyncio.run(_keys_create(args.org, args.name))
    except SettingsError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
