"""The ``e2b`` sandbox provider: sandboxes hosted by E2B (docs/sandbox-e2b.md).

The lifecycle goes over E2B's REST API, commands and files over the sandbox's
own API (envd, ``e2b_envd.py``), both as E2B's official Python SDK does. Followed
(github.com/e2b-dev/E2B, ``packages/python-sdk/e2b``):

- ``spec/openapi.yml``: ``POST /sandboxes`` (``NewSandbox`` -> ``Sandbox``, 201),
  ``POST /sandboxes/{id}/connect`` (``ConnectSandbox``; 200 running, 201
  resumed, 404 gone), ``POST /sandboxes/{id}/pause`` (204; 409 already paused),
  ``DELETE /sandboxes/{id}`` (204; 404); the ``X-API-Key`` header;
- ``sandbox_async/sandbox_api.py`` (``_create_sandbox``, ``_cls_connect``,
  ``_cls_pause``, ``_cls_kill``) and ``sandbox_async/main.py`` (the
  ``E2b-Sandbox-Id``/``E2b-Sandbox-Port``/``X-Access-Token`` headers from
  ``envdAccessToken``), ``connection_config.py`` (envd port 49983, the sandbox
  URL ``https://{port}-{sandboxID}.{domain}``, user ``Authorization: Basic``);
- ``spec/envd/process/process.proto`` and ``sandbox_async/commands/command.py``
  (``Process/Start`` with ``Connect-Timeout-Ms``, ``SendSignal`` SIGKILL),
  ``spec/envd/filesystem/filesystem.proto`` and
  ``sandbox_async/filesystem/filesystem.py`` (``ListDir`` depth 1, ``MakeDir``),
  ``spec/envd/envd.yaml`` (``GET``/``POST /files`` with ``path`` and
  ``username``, octet-stream uploads), ``envd/client_shared.py`` (the JSON codec,
  no compression, plain HTTP errors); envd's own handlers (e2b-dev/infra,
  ``packages/envd``): the token middleware's 401 and ``Start``'s process deadline.

Mapping: ``start`` creates (``autoPause`` when the spec is persistent, so E2B's
own timeout pauses instead of deleting) or connects to the sandbox to resume; a
resume that E2B answers 404 makes a new one with ``state_lost``. ``stop`` pauses
a persistent sandbox and kills any other; ``destroy`` kills. Network ``none``
sends ``allow_internet_access: false``; ``allowlist`` E2B's own egress rules
(``allowOut`` the hosts, everything else denied), enforced by E2B, not by the
service's outbound guard. Every command, file and folder is the sandbox user
``root``'s (the E2B sandbox is a VM: its boundary is E2B's, and ``root`` can
make ``/workspace``).

Secrets: the API key goes only to the API URL, the envd token only to the
sandbox URL; neither is logged, put in a repr or an error text.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import quote

import httpx

from agentsvc_adapters.outbound import OutboundGuard, failure
from agentsvc_adapters.sandboxes import e2b_process
from agentsvc_adapters.sandboxes.e2b_envd import ENVD_PORT, Envd, EnvdConnection, EnvdStale
from agentsvc_core.errors import InvalidInput
from agentsvc_core.ports.sandboxes import (
    WORKSPACE,
    ExecExit,
    ExecOutput,
    FileEntry,
    SandboxGone,
    SandboxProvider,
    SandboxSpec,
    SandboxStarted,
    SandboxUnavailable,
)

__all__ = ["E2BSandboxes"]

API_KEY_VAR = "AGENTSVC_E2B_API_KEY"
DEFAULT_API_URL = "https://api.e2b.app"  # the official SDK's default
DEFAULT_SANDBOX_URL = "https://{port}-{sandbox_id}.{domain}"
DEFAULT_DOMAIN = "e2b.app"
DEFAULT_TEMPLATE = "base"
DEFAULT_TIMEOUT_S = 3600  # E2B's own time to live, renewed on every start
USER = "root"
_TIMEOUT = httpx.Timeout(60.0)  # creating a sandbox can take a while
T = TypeVar("T")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}")
_DOMAIN = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+")


def _clean(text: str, *secrets: str | None) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    return text[:300]


def workspace_path(path: str) -> str:
    """The absolute path in the sandbox of a workspace path; ``InvalidInput`` for
    one that leaves the workspace."""
    if "\x00" in path:
        raise InvalidInput("path", "must not contain NUL")
    raw = path.strip() or "."
    full = posixpath.normpath(raw if raw.startswith("/") else posixpath.join(WORKSPACE, raw))
    if full != WORKSPACE and not full.startswith(WORKSPACE + "/"):
        raise InvalidInput("path", "leaves the workspace")
    return full


class E2BSandboxes(SandboxProvider):
    """Sandboxes at E2B. ``sandbox_url`` is a template with ``{port}``,
    ``{sandbox_id}`` and ``{domain}`` (the domain E2B names for the sandbox)."""

    name = "e2b"

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        api_key: str | None,
        api_url: str = DEFAULT_API_URL,
        sandbox_url: str = DEFAULT_SANDBOX_URL,
        template: str = DEFAULT_TEMPLATE,
        timeout_s: int = DEFAULT_TIMEOUT_S,
        problem: str | None = None,
    ) -> None:
        self._http = http
        self._key = api_key
        self._api_url = api_url.rstrip("/")
        self._sandbox_url = sandbox_url
        self._template = template
        self._timeout_s = timeout_s
        self._problem = problem or (
            None if api_key else f"E2B is not configured: set {API_KEY_VAR} to an E2B API key"
        )
        self._envd = Envd(http, user=USER)
        self._conns: dict[str, EnvdConnection] = {}

    def missing(self) -> str | None:
        return self._problem

    def __repr__(self) -> str:  # no key in reprs
        return f"E2BSandboxes({self._api_url!r}, template={self._template!r})"

    @classmethod
    def from_env(cls, environ: Mapping[str, str], guard: OutboundGuard) -> E2BSandboxes:
        """Settings: ``AGENTSVC_E2B_API_KEY`` (required), ``AGENTSVC_E2B_API_URL``,
        ``AGENTSVC_E2B_SANDBOX_URL``, ``AGENTSVC_E2B_TEMPLATE``,
        ``AGENTSVC_E2B_TIMEOUT_S``. What is missing or wrong is said by every call
        (``SandboxUnavailable``), so the service starts without E2B."""

        def get(name: str, default: str) -> str:
            return environ.get(name, "").strip() or default

        api_url = get("AGENTSVC_E2B_API_URL", DEFAULT_API_URL)
        sandbox_url = get("AGENTSVC_E2B_SANDBOX_URL", DEFAULT_SANDBOX_URL)
        problem = None
        timeout_s = DEFAULT_TIMEOUT_S
        try:
            timeout_s = int(get("AGENTSVC_E2B_TIMEOUT_S", str(DEFAULT_TIMEOUT_S)))
            if timeout_s < 60:
                raise ValueError
        except ValueError:
            problem = "AGENTSVC_E2B_TIMEOUT_S must be a number of seconds, 60 or more"
        try:
            example = sandbox_url.format(port=ENVD_PORT, sandbox_id="id", domain=DEFAULT_DOMAIN)
        except (KeyError, IndexError, ValueError):
            problem = "AGENTSVC_E2B_SANDBOX_URL may hold only {port}, {sandbox_id} and {domain}"
        else:
            if refused := guard.refusal(example):
                problem = f"AGENTSVC_E2B_SANDBOX_URL is refused: {refused}"
        if refused := guard.refusal(api_url):
            problem = f"AGENTSVC_E2B_API_URL is refused: {refused}"
        return cls(
            guard.http_client(timeout=60.0),
            api_key=environ.get(API_KEY_VAR, "").strip() or None,
            api_url=api_url,
            sandbox_url=sandbox_url,
            template=get("AGENTSVC_E2B_TEMPLATE", DEFAULT_TEMPLATE),
            timeout_s=timeout_s,
            problem=problem,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    # --- the REST API ---------------------------------------------------------

    async def _api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        if self._problem:
            raise SandboxUnavailable(self._problem)
        url = f"{self._api_url}{path}"
        headers = {"X-API-Key": self._key or ""}
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            response = await self._http.request(
                method,
                url,
                headers=headers,
                content=None if body is None else json.dumps(body).encode(),
                timeout=_TIMEOUT,
            )
        except httpx.HTTPError as exc:
            raise SandboxUnavailable(f"E2B cannot be reached: {failure(exc, url)}") from exc
        try:
            parsed = response.json() if response.content else None
        except ValueError:
            parsed = None
        status = response.status_code
        if status in (401, 403):
            raise SandboxUnavailable(f"E2B refused the API key: check {API_KEY_VAR}")
        if status == 429:
            raise SandboxUnavailable("E2B is rate limiting this API key; try again later")
        if status >= 500 or status == 400:
            message = parsed.get("message", "") if isinstance(parsed, dict) else ""
            raise SandboxUnavailable(
                f"E2B answered {status}: {_clean(str(message), self._key) or 'no detail'}"
            )
        return status, parsed

    def _connection(self, answer: Any) -> EnvdConnection:
        if not isinstance(answer, dict) or not isinstance(answer.get("sandboxID"), str):
            raise SandboxUnavailable("E2B answered without a sandbox id")
        sandbox_id = answer["sandboxID"]
        domain = answer.get("domain") if isinstance(answer.get("domain"), str) else None
        # both become part of the host the envd token is sent to
        if not _ID.fullmatch(sandbox_id) or (domain and not _DOMAIN.fullmatch(domain)):
            raise SandboxUnavailable("E2B answered with a sandbox address that is not valid")
        token = answer.get("envdAccessToken")
        url = self._sandbox_url.format(
            port=ENVD_PORT, sandbox_id=sandbox_id, domain=domain or DEFAULT_DOMAIN
        )
        version = answer.get("envdVersion")
        conn = EnvdConnection(
            sandbox_id,
            url,
            token if isinstance(token, str) else None,
            version if isinstance(version, str) else "",
        )
        self._conns[sandbox_id] = conn
        return conn

    async def _create(self, spec: SandboxSpec) -> EnvdConnection:
        body: dict[str, Any] = {
            "templateID": self._template,
            "timeout": self._timeout_s,
            "autoPause": spec.persistent,
            "secure": True,
            "metadata": {"agentsvc_instance": spec.instance_id, "agentsvc_org": spec.org_id},
        }
        if spec.network == "none":
            body["allow_internet_access"] = False
        else:
            body["network"] = {
                "allowOut": list(spec.allowed_hosts),
                "denyOut": ["0.0.0.0/0"],
                "allowPublicTraffic": False,
            }
        status, answer = await self._api("POST", "/sandboxes", body)
        if status == 404:
            raise SandboxUnavailable(
                f"E2B has no template {self._template!r}: check AGENTSVC_E2B_TEMPLATE"
            )
        if status != 201:
            raise SandboxUnavailable(f"E2B answered {status} to creating a sandbox")
        return self._connection(answer)

    async def _connect(self, ref: str) -> EnvdConnection | None:
        """Connects to (and resumes) a sandbox; ``None`` when E2B has none."""
        if not _ID.fullmatch(ref):
            return None  # not an E2B sandbox id: nothing to ask
        status, answer = await self._api(
            "POST", f"/sandboxes/{_quote(ref)}/connect", {"timeout": self._timeout_s}
        )
        if status == 404:
            self._conns.pop(ref, None)
            return None
        if status not in (200, 201):
            raise SandboxUnavailable(f"E2B answered {status} to resuming the sandbox")
        return self._connection(answer)

    # --- the port -------------------------------------------------------------

    async def start(self, spec: SandboxSpec, *, resume: str | None = None) -> SandboxStarted:
        conn = await self._connect(resume) if resume else None
        lost = resume is not None and conn is None
        if conn is None:
            conn = await self._create(spec)
        await self._with_envd(conn.sandbox_id, lambda c: self._envd.make_dir(c, WORKSPACE))
        return SandboxStarted(ref=conn.sandbox_id, state_lost=lost)

    async def stop(self, ref: str, spec: SandboxSpec) -> None:
        _check_ref(ref)
        self._conns.pop(ref, None)
        if not spec.persistent:
            await self.destroy(ref)
            return
        status, _ = await self._api("POST", f"/sandboxes/{_quote(ref)}/pause", {"memory": True})
        if status == 404:
            raise SandboxGone("the sandbox no longer exists at E2B")
        if status not in (204, 409):  # 409: already paused
            raise SandboxUnavailable(f"E2B answered {status} to pausing the sandbox")

    async def destroy(self, ref: str) -> None:
        _check_ref(ref)
        self._conns.pop(ref, None)
        status, _ = await self._api("DELETE", f"/sandboxes/{_quote(ref)}")
        if status not in (204, 404):  # 404: already gone
            raise SandboxUnavailable(f"E2B answered {status} to deleting the sandbox")

    async def _conn(self, ref: str, *, fresh: bool = False) -> EnvdConnection:
        if self._problem:
            raise SandboxUnavailable(self._problem)
        conn = None if fresh else self._conns.get(ref)
        if conn is None:
            conn = await self._connect(ref)
        if conn is None:
            raise SandboxGone("the sandbox no longer exists at E2B")
        return conn

    async def _with_envd(self, ref: str, call: Callable[[EnvdConnection], Awaitable[T]]) -> T:
        """``call`` with the sandbox's connection, once more with a fresh one when
        envd says the one held may be stale."""
        try:
            return await call(await self._conn(ref))
        except EnvdStale:
            pass
        try:
            return await call(await self._conn(ref, fresh=True))
        except EnvdStale as again:
            raise again.final from None

    async def exec(
        self,
        ref: str,
        spec: SandboxSpec,
        command: str,
        *,
        timeout_s: float,
        max_output: int = 64_000,
        env: dict[str, str] | None = None,
    ) -> AsyncIterator[ExecOutput | ExecExit]:
        envs = dict(env or {})

        async def open_(c: EnvdConnection) -> tuple[EnvdConnection, httpx.Response]:
            response = await self._envd.start(
                c, command, cwd=WORKSPACE, env=envs, timeout_s=timeout_s
            )
            return c, response

        conn, response = await self._with_envd(ref, open_)
        run = e2b_process.run(
            self._envd, conn, response, timeout_s=timeout_s, max_output=max_output
        )
        try:
            async for item in run:
                yield item
        finally:
            await run.aclose()  # kills the command when the caller leaves early

    async def read_file(self, ref: str, path: str, *, max_bytes: int = 1_000_000) -> bytes:
        full = workspace_path(path)
        return await self._with_envd(ref, lambda c: self._envd.read_file(c, full, max_bytes))

    async def write_file(self, ref: str, path: str, data: bytes) -> None:
        full = workspace_path(path)
        if full == WORKSPACE:
            raise InvalidInput("path", "names the workspace itself, not a file")
        await self._with_envd(ref, lambda c: self._envd.write_file(c, full, data))

    async def list_files(self, ref: str, path: str = ".", *, limit: int = 1000) -> list[FileEntry]:
        full = workspace_path(path)
        entries = await self._with_envd(ref, lambda c: self._envd.list_dir(c, full))
        files = [_entry(e) for e in entries]
        files.sort(key=lambda f: (not f.is_dir, f.path))
        return files[:limit]

    async def disk_bytes(self, ref: str) -> int:
        try:
            out = ""
            async for item in self.exec(ref, _SPEC, "du -sb . | cut -f1", timeout_s=30):
                if isinstance(item, ExecOutput) and item.stream == "stdout":
                    out += item.data
            return int(out.strip() or 0)
        except (SandboxUnavailable, SandboxGone, ValueError):
            return 0


_SPEC = SandboxSpec(instance_id="", org_id="", persistent=True, memory_mb=0)


def _check_ref(ref: str) -> None:
    """A ref is an E2B sandbox id: letters, digits, ``-`` and ``_``, nothing that
    could change the URL it is put in."""
    if not _ID.fullmatch(ref):
        raise SandboxGone("E2B has no sandbox of that id")


def _quote(ref: str) -> str:
    return quote(ref, safe="")


def _entry(entry: dict[str, Any]) -> FileEntry:
    full = str(entry.get("path", ""))
    is_dir = entry.get("type") == "FILE_TYPE_DIRECTORY"
    try:
        size = 0 if is_dir else int(entry.get("size", 0))  # int64: a string in JSON
    except (TypeError, ValueError):
        size = 0
    return FileEntry(path=posixpath.relpath(full, WORKSPACE), is_dir=is_dir, size=size)
