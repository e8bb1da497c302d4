"""The standing secret scan of the end-to-end suite (docs/security.md, "Secrets at rest
and in answers").

Every response body and SSE stream an end-to-end test reads (httpx, sync or
async: the bytes are copied where httpx reads them off the wire) and every line
the service processes log is kept; at the end of the session none of them may
hold a secret the suite configured, except where that secret belongs:

- learned from what the tests send: MCP credential header and environment values
  (POST/PATCH /api/mcps), webhook tools' headers (/api/tools), channel
  credentials (POST/PATCH /api/agents/{id}/channels...), code agents' git
  credentials (POST/PATCH /api/code-agents), database
  connection strings and their passwords (POST /api/integrations, PATCH
  /api/integrations/{id}), from the
  service's environment (API keys, the JWT secret, provider keys, encryption keys)
  and from its data folder (the generated encryption key);
- learned from answers: a new API key (``POST /api/keys``) may appear only in
  the answer that created it, and so may a published chat's identity secret
  (``/api/agents/{id}/publish``: publishing, a rotation) and a visitor token
  (``POST /api/public/chat/{slug}/sessions``) and a generic channel's signing
  secret (``POST /api/agents/{id}/channels``) and an event webhook endpoint's
  signing secret (``POST /api/webhooks``, ``.../rotate-secret``); the
  organization's signing secret only in
  ``/api/orgs/settings`` answers;
- registered by a test with ``SCAN.secret(value, label)`` (the resolver's BYOK
  keys, OAuth tokens a fake authorization server issues: no answer may hold
  them, ``GET /api/mcps/{id}/oauth`` included).

Values shorter than 8 characters are not scanned: they would match by chance.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx

MIN_LEN = 8
_SECRET_ENV = ("API_KEY", "SECRET", "ENCRYPTION_KEYS", "PASSWORD", "METRICS_TOKEN")


class _Exchange:
    __slots__ = ("body", "method", "url")

    def __init__(self, method: str, url: str) -> None:
        self.method = method
        self.url = url
        self.body = bytearray()


class SecretScan:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        # value -> (label, may appear in answers whose path ends with one of these)
        self._secrets: dict[str, tuple[str, tuple[str, ...]]] = {}
        self._owned: dict[str, int] = {}  # a new API key -> id() of the answer that made it
        self._exchanges: list[_Exchange] = []
        self._logs: list[Path] = []
        self._data_dirs: list[Path] = []
        self._temporary: list[Path] = []
        self._public: set[str] = set()

    # --- what is secret ---------------------------------------------------------

    def secret(self, value: str, label: str, *, allowed_in: tuple[str, ...] = ()) -> None:
        """``value`` may appear only in answers whose path holds one of ``allowed_in``."""
        if len(value) < MIN_LEN:
            return
        with self._lock:
            if value not in self._public:
                self._secrets.setdefault(value, (label, allowed_in))

    def allow(self, value: str, *where: str) -> None:
        """A test's own probe comes back on purpose (an MCP tool that echoes the
        header it received, to prove it arrived): allowed in answers whose path
        holds one of ``where``, and nowhere else."""
        with self._lock:
            label, allowed = self._secrets.get(value, ("probe", ()))
            self._secrets[value] = (label, (*allowed, *where))

    def not_secret(self, value: str) -> None:
        """A value a test sends among credentials that is no secret (a PYTHONPATH)."""
        with self._lock:
            self._public.add(value)
            self._secrets.pop(value, None)

    def service_env(self, env: Mapping[str, str], data_dir: str | None) -> None:
        """The secrets a service process is started with (and its generated key)."""
        for name, value in env.items():
            if any(part in name for part in _SECRET_ENV) and value:
                self.secret(value, name)
                if name == "AGENTSVC_ENCRYPTION_KEYS":
                    for item in value.split(","):
                        self.secret(item.partition(":")[2].strip(), name)
        if data_dir:
            with self._lock:
                self._data_dirs.append(Path(data_dir))

    def _generated_keys(self) -> None:
        """The encryption keys services generated in their data folders (read at
        the end: a service writes its key when it starts)."""
        for data_dir in self._data_dirs:
            keys = data_dir / "encryption-keys"
            if keys.exists():
                for item in keys.read_text().split(","):
                    self.secret(item.partition(":")[2].strip(), "generated encryption key")

    def log_file(self, path: Path, *, temporary: bool = False) -> None:
        with self._lock:
            self._logs.append(path)
            if temporary:
                self._temporary.append(path)

    def cleanup(self) -> None:
        """Remove the log files made only for the scan."""
        for path in self._temporary:
            path.unlink(missing_ok=True)

    # --- what was seen ----------------------------------------------------------

    def _request(self, request: httpx.Request) -> None:
        """Learn the credentials a test configures: MCP credentials, webhook tools'
        headers, database connection strings."""
        path = request.url.path
        if request.method not in ("POST", "PATCH", "PUT") or not (
            "/api/mcps" in path
            or path.startswith("/api/tools")
            or path.rstrip("/") == "/api/integrations"
            or (request.method == "PATCH" and path.startswith("/api/integrations/"))
            or (path.startswith("/api/runners") and "/webhooks/" not in path)
            or (path.startswith("/api/agents/") and "/channels" in path)
            or path.startswith("/api/code-agents")
        ):
            return
        try:
            body = json.loads(request.content or b"null")
        except (ValueError, httpx.RequestNotRead):
            return
        if not isinstance(body, dict):
            return
        if path.startswith("/api/tools"):
            self._values(body.get("headers"), "webhook tool header")
            return
        if path.startswith("/api/code-agents"):
            self._values({"git": body.get("gitCredential")}, "code agent git credential")
            return
        if path.startswith("/api/agents/"):
            self._values(body.get("credentials"), "channel credential")
            return
        if path.startswith("/api/runners"):
            steps = body.get("steps") if "steps" in body else [body]
            for step in steps if isinstance(steps, list) else []:
                if isinstance(step, dict):
                    self._values(step.get("headers"), "runner step header")
            return
        self._connection_and_credentials(body)

    def _connection_and_credentials(self, body: dict[str, Any]) -> None:
        """A database connection string (and its password), MCP credentials."""
        connection = body.get("connection")
        if isinstance(connection, str):
            self.secret(connection, "database connection string")
            try:
                password = urlsplit(connection).password
            except ValueError:
                password = None
            if password:
                self.secret(unquote(password), "database password")
        creds = body.get("credentials")
        if isinstance(creds, dict):
            for part in ("headers", "env"):
                self._values(creds.get(part), f"MCP credential ({part})")

    def _values(self, values: object, label: str) -> None:
        if isinstance(values, dict):
            for v in values.values():
                if isinstance(v, str):
                    self.secret(v.removeprefix("Bearer "), label)

    def _answered(self, exchange: _Exchange) -> None:
        """Learn the secrets an answer may carry where it belongs."""
        path = httpx.URL(exchange.url).path
        try:
            body = json.loads(bytes(exchange.body) or b"null")
        except ValueError:
            return
        if not isinstance(body, dict):
            return
        if exchange.method == "POST" and path.rstrip("/") == "/api/keys":
            key = body.get("key")
            if isinstance(key, str) and len(key) >= MIN_LEN:
                with self._lock:
                    self._owned[key] = id(exchange)
        token = body.get("token")
        if path.startswith("/api/runners/") and isinstance(token, str) and len(token) >= MIN_LEN:
            # a trigger's token: in the answer that made it (create, rotate) only
            with self._lock:
                self._owned[token] = id(exchange)
        # a published chat's identity secret, a visitor's token: in the answer that
        # made it only
        made = body.get("identity_secret") if path.rstrip("/").endswith("/publish") else None
        if path.startswith("/api/agents/") and path.rstrip("/").endswith("/channels"):
            made = body.get("signing_secret")  # a generic channel's: shown once
        if path.startswith("/api/public/chat/") and path.rstrip("/").endswith("/sessions"):
            made = token
        if path.startswith("/api/webhooks") and exchange.method == "POST":
            made = body.get("secret")  # an event webhook's: at creation and rotation only
        if isinstance(made, str) and len(made) >= MIN_LEN:
            with self._lock:
                self._owned[made] = id(exchange)
        if path.rstrip("/") == "/api/orgs/settings":
            secret = body.get("signing_secret")
            if isinstance(secret, str):
                self.secret(secret, "signing secret", allowed_in=("/api/orgs/settings",))

    def _opened(self, response: httpx.Response) -> _Exchange:
        try:
            request = response.request
        except RuntimeError:  # a response made by hand (MockTransport): not the service's
            return _Exchange("?", "http://made.by.hand/")
        self._request(request)
        exchange = _Exchange(request.method, str(request.url))
        with self._lock:
            self._exchanges.append(exchange)
        return exchange

    # --- the verdict ------------------------------------------------------------

    def findings(self) -> list[str]:
        found: list[str] = []
        self._generated_keys()
        with self._lock:
            secrets = dict(self._secrets)
            owned = dict(self._owned)
            exchanges = list(self._exchanges)
            logs = list(self._logs)
        for exchange in exchanges:
            text = bytes(exchange.body).decode("utf-8", "replace")
            path = httpx.URL(exchange.url).path.rstrip("/")
            for value, (label, allowed) in secrets.items():
                if value in text and not any(a in path for a in allowed):
                    found.append(f"{label} in the answer to {exchange.method} {path}")
            for key, creator in owned.items():
                if key in text and id(exchange) != creator:
                    found.append(f"a key or token in the answer to {exchange.method} {path}")
        for log in logs:
            if not log.exists():
                continue
            text = log.read_text(errors="replace")
            for value, (label, _) in secrets.items():
                if value in text:
                    found.append(f"{label} in the service log {log.name}")
            if any(key in text for key in owned):
                found.append(f"a key or token in the service log {log.name}")
        return sorted(set(found))

    # --- the tap ----------------------------------------------------------------

    @contextmanager
    def tapping(self) -> Iterator[None]:
        """Copy every response body httpx reads, in this process, while open."""
        scan = self
        sync_raw: Callable[..., Iterator[bytes]] = httpx.Response.iter_raw
        async_raw: Callable[..., AsyncIterator[bytes]] = httpx.Response.aiter_raw

        def iter_raw(self: httpx.Response, *a: Any, **kw: Any) -> Iterator[bytes]:
            exchange = scan._opened(self)
            for chunk in sync_raw(self, *a, **kw):
                exchange.body += chunk
                yield chunk
            scan._answered(exchange)

        async def aiter_raw(self: httpx.Response, *a: Any, **kw: Any) -> AsyncIterator[bytes]:
            exchange = scan._opened(self)
            async for chunk in async_raw(self, *a, **kw):
                exchange.body += chunk
                yield chunk
            scan._answered(exchange)

        httpx.Response.iter_raw = iter_raw  # type: ignore[method-assign]
        httpx.Response.aiter_raw = aiter_raw  # type: ignore[method-assign]
        try:
            yield
        finally:
            httpx.Response.iter_raw = sync_raw  # type: ignore[method-assign]
            httpx.Response.aiter_raw = async_raw  # type: ignore[method-assign]


SCAN = SecretScan()
