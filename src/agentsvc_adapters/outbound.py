"""The outbound guard: every HTTP client that contacts a URL a user or the
configuration supplies connects through it.

Guarded: the credential resolver, OAuth discovery, client registration and token
calls, the MCP transports (streamable HTTP and SSE), the MCP registry, the
webhook tools, the web tools (``web/``: ``web_fetch``, which follows redirects
itself and checks each hop, and the search API), the skill sources (``git/``:
git repositories and ``SKILL.md`` URLs, which follow redirects the same way),
the git remote code sessions fetch from and push to (``git/remote.py``, the same
way), the git hosts' APIs (``git_hosts/``) and the event webhooks' deliveries
(``event_webhooks.py``).

Rule, so that no user can point the service at its own network (SSRF): a URL whose
host resolves to a loopback, private, link-local, multicast, reserved, unspecified,
otherwise not globally routable or cloud metadata address is refused, and only
``https://`` is allowed;
``AGENTSVC_ALLOW_PRIVATE_NETWORK=true`` (``allow_private_network``) lifts both.

Host names are normalised before any check (``normalise_host``): full-width and
ideographic dots (U+3002, U+FF0E, U+FF61) become ``.``, a non-ASCII name goes
through IDNA with UTS-46 mapping (which also maps full-width digits and letters),
trailing dots are dropped and the name is lowercased. A host that cannot be
normalised is refused; so are URLs with a user name or password, and URLs with
whitespace or control characters anywhere.

Two layers:

- ``check_url`` is pure (no DNS): scheme, userinfo, the normalised host present,
  ``localhost`` names, and hosts that are IP literals in any form a C resolver
  accepts (``127.1``, ``2130706433``, ``0x7f.1``, ``017700000001``,
  ``[::ffff:127.0.0.1]``, 6to4, NAT64...). ``OutboundGuard.refusal`` (the core's
  ``UrlPolicy``) wraps it for a readable early error when a URL is configured.
- The network backends are what actually protect: for every TCP connection a
  guarded client opens, they normalise the host, resolve it themselves, refuse if
  *any* resolved address is not allowed, and then connect to an address they
  checked (TLS still verifies the certificate against the host name: httpcore
  passes the URL's host as SNI/``server_hostname``). Because the checked address
  is the one connected to, DNS rebinding between check and connect is not
  possible; every reconnect goes through the same check and redirects are never
  followed. One backend per httpcore flavour, ``GuardedBackend`` (httpcore2, under
  the MCP SDK's httpx2) and ``GuardedBackendV1`` (httpcore 1, under httpx), which
  only name their exceptions and dialler over the shared ``_Guarding``.
  ``guarded_httpx_client`` and ``guarded_httpx2_client`` make the clients:
  ``trust_env=False`` and an explicit transport, so proxies from the environment
  (``HTTP(S)_PROXY``, ``ALL_PROXY``) and ``.netrc`` are ignored and the
  connection is direct; redirects are off.

Error texts: a refusal says ``refused by the outbound guard: <host> resolves to
a loopback address`` (our policy, fine to say; the resolved address itself is
not named, so the guard is no DNS oracle for internal names); every other
network failure reads ``could not reach <host>`` (``failure`` renders both), never
an exception class or an OS error that would tell a closed port from a filtered
or a silent one.

Not guarded, on purpose: endpoints only the operator configures that may
legitimately be private: the JWKS URL (``adapters/auth/jwt.py``) and the model
providers (``adapters/llm/``, aiohttp). The MCP registry is operator-configured
too, but it is guarded (a private registry needs
``AGENTSVC_ALLOW_PRIVATE_NETWORK``).

Counted and logged: each refusal is logged once, at WARNING, with its reason (the
host name and why; never the URL, whose path or query may carry a token) and its
reason label (``[loopback]``), by
``note_refusal``, which the backends call and so do the clients that refuse a URL
before connecting (the resolver, OAuth). Refusals and connections that could not
be made are counted in ``FAILURES`` by a bounded reason (``reason_of``), read by
``/metrics`` at scrape time: nothing is added to a call that succeeds.

Residual risk: addresses on the path that are not the destination (a proxy the
operator configures at the network level, NAT) are out of scope; and stdio MCP
servers run locally by design, which is why they have their own switch.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import re
import socket
import ssl
import unicodedata
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, NoReturn
from urllib.parse import urlsplit

import anyio
import httpcore
import httpcore2
import httpx
import httpx2
import idna

from agentsvc_core.ports.mcp import UrlPolicy

__all__ = [
    "FAILURES",
    "GuardedBackend",
    "GuardedBackendV1",
    "OutboundGuard",
    "Refused",
    "Resolver",
    "address_problem",
    "check_url",
    "failure",
    "guarded_httpx2_client",
    "guarded_httpx_client",
    "normalise_host",
    "note_refusal",
    "parse_ip_literal",
    "reason_of",
    "refusal_of",
]

log = logging.getLogger("agentsvc.outbound")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[list[str]]]

METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack...
        "169.254.170.2",  # AWS ECS task metadata
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "100.100.100.200",  # Alibaba Cloud
    )
)
NAT64 = ipaddress.ip_network("64:ff9b::/96")
_PART = re.compile(r"0[xX][0-9a-fA-F]*|0[0-7]*|[1-9][0-9]*")
_DOTS = str.maketrans(dict.fromkeys("\u3002\uff0e\uff61", "."))
_NAME = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*")
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp", "Zs"})
# httpx's defaults; the pool is shared by all the calls of one client
_POOL: dict[str, Any] = {
    "max_connections": 100,
    "max_keepalive_connections": 20,
    "keepalive_expiry": 5.0,
}


# Outbound calls that failed at the guard, by reason: refusals (``reason_of``) and
# "unreachable" (no address, or none accepted a connection). Process-wide totals:
# a process is what Prometheus scrapes; read by /metrics, written only on failure.
FAILURES: Counter[str] = Counter()

# (words in a refusal's text, its reason label): the first match wins
_REASONS = (
    ("metadata", "metadata"),
    ("loopback", "loopback"),
    ("link-local", "link_local"),
    ("multicast", "multicast"),
    ("private", "private"),
    ("reserved", "reserved"),
    ("unspecified", "unspecified"),
    ("globally routable", "not_global"),
    ("https://", "scheme"),
    ("user name or password", "userinfo"),
    ("unix socket", "unix_socket"),
)


def reason_of(refusal: str) -> str:
    """The bounded label of a refusal's text (``/metrics``: never a host name)."""
    return next((label for words, label in _REASONS if words in refusal), "invalid_url")


def note_refusal(reason: str) -> None:
    """Count and log (once, WARNING) an outbound call the guard refused. ``reason``
    is the guard's text: a host name and why, never a URL."""
    code = reason_of(reason)
    FAILURES[code] += 1
    log.warning("outbound call refused by the outbound guard: %s [%s]", reason, code)


class Refused(Exception):
    """The guard's policy refused a connection; ``str()`` is the text to show."""


def normalise_host(host: str) -> str:
    """``host`` as the guard checks it (see the module docstring); ``ValueError``
    if it cannot be normalised. IPv6 literals come back compressed, unbracketed."""
    bracketed = host.startswith("[")
    if bracketed != host.endswith("]") or (bracketed and ":" not in host):
        raise ValueError(f"{host!r} is not a valid host")  # brackets hold an IPv6 address
    raw = host[1:-1] if bracketed else host
    if ":" in raw:
        try:
            return ipaddress.IPv6Address(raw).compressed
        except ValueError:
            raise ValueError(f"{host!r} is not a valid host") from None
    name = raw.translate(_DOTS)
    if not name.isascii():
        try:
            name = idna.encode(name, uts46=True).decode("ascii")
        except idna.IDNAError:
            raise ValueError(f"{host!r} is not a valid host name") from None
    name = name.rstrip(".").lower()
    if not _NAME.fullmatch(name):
        raise ValueError(f"{host!r} is not a valid host name")
    return name


def _number(part: str) -> int:
    if part[:2].lower() == "0x":
        return int(part[2:] or "0", 16)
    return int(part, 8) if part.startswith("0") else int(part)


def parse_ip_literal(host: str) -> IPAddress | None:
    """The address ``host`` denotes if it is an IP literal, in inet_aton's forms too."""
    host = host.strip("[]").rstrip(".")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or not all(_PART.fullmatch(p) for p in parts):
        return None
    nums = [_number(p) for p in parts]
    *head, last = nums
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(nums)):
        return None
    value = 0
    for n in head:
        value = value << 8 | n
    return ipaddress.IPv4Address(value << 8 * (5 - len(nums)) | last)


def address_problem(addr: IPAddress) -> str | None:
    """Why ``addr`` may not be connected to, or None if it is globally routable."""
    if isinstance(addr, ipaddress.IPv6Address):
        embedded: list[ipaddress.IPv4Address] = []
        if addr.ipv4_mapped is not None:
            embedded.append(addr.ipv4_mapped)
        if addr.sixtofour is not None:
            embedded.append(addr.sixtofour)
        if addr.teredo is not None:
            embedded.extend(addr.teredo)
        if addr in NAT64:
            embedded.append(ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF))
        for inner in embedded:
            if (problem := address_problem(inner)) is not None:
                return f"{problem} (embedded in an IPv6 address)"
    checks = (
        (addr in METADATA_ADDRESSES, "a cloud metadata address"),
        (addr.is_loopback, "a loopback address"),
        (addr.is_unspecified, "an unspecified address"),
        (addr.is_link_local, "a link-local address"),
        (addr.is_multicast, "a multicast address"),
        (addr.is_private, "a private address"),
        (addr.is_reserved, "a reserved address"),
        (not addr.is_global, "not a globally routable address"),
    )
    return next((reason for failed, reason in checks if failed), None)


def check_url(url: str, *, allow_private_network: bool) -> None:
    """Refuse (``ValueError`` with the reason) a URL the guard will never connect to.

    Pure: names are not resolved here; the backends check what they resolve to
    when connecting.
    """
    if any(ch.isspace() or unicodedata.category(ch) in _UNSAFE_CATEGORIES for ch in url):
        raise ValueError("the URL contains whitespace or control characters")
    try:
        parts = urlsplit(url)
        host = parts.hostname
        _ = parts.port  # raises ValueError on a bad port
    except ValueError as exc:
        raise ValueError(f"not a valid URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError("the URL must start with https://")
    if "@" in parts.netloc:
        raise ValueError("the URL must not contain a user name or password")
    if not host:
        raise ValueError("the URL has no host")
    name = normalise_host(host)
    if allow_private_network:
        return
    if scheme != "https":
        raise ValueError(
            "plain http:// is refused, use https:// (AGENTSVC_ALLOW_PRIVATE_NETWORK=true allows it)"
        )
    if name == "localhost" or name.endswith(".localhost"):
        raise ValueError(f"{name} is a loopback name")
    addr = parse_ip_literal(name)
    if addr is not None and (problem := address_problem(addr)) is not None:
        raise ValueError(f"{name} is {problem}")


def refusal_of(exc: BaseException) -> str | None:
    """The guard's refusal behind a failed request of a guarded client, if it was one."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, Refused):
            return str(seen)
        seen = seen.__cause__ or seen.__context__
    return None


def failure(exc: BaseException, url: str) -> str:
    """The text for a failed request of a guarded client: the guard's refusal, or
    ``could not reach <host>`` whatever else went wrong on the network."""
    if (refused := refusal_of(exc)) is not None:
        return refused
    try:
        host = urlsplit(url).hostname or url
    except ValueError:
        host = "the server"
    return f"could not reach {host}"


async def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to."""
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class _Guarding:
    """The network backend of both flavours: normalise, resolve, refuse if any
    address is not allowed, connect to a checked address. Every failure that is not
    a refusal reads ``could not reach <host>``. A flavour names its exceptions and
    its own dialler (its ``AnyIOBackend``); the methods are httpcore's interface.

    ``refusal`` keeps the last refusal's reason, for an owner that opens one
    connection at a time (an MCP session); shared clients read ``failure(exc)``.
    """

    _connect_error: type[Exception]  # the flavour's ConnectError
    _refused: type[Exception]  # ... and Refused
    _dial_errors: tuple[type[Exception], ...]  # what its dialler raises
    _dialler: Callable[[], Any]

    def __init__(self, *, allow_private_network: bool, resolver: Resolver | None = None) -> None:
        self.allow_private_network = allow_private_network
        self.refusal: str | None = None
        self._resolve = resolver or system_resolver
        self._inner = self._dialler()

    def _refuse(self, reason: str) -> Exception:
        self.refusal = reason
        note_refusal(reason)
        return self._refused(f"refused by the outbound guard: {reason}")

    async def _addresses(self, host: str, port: int, within: float | None) -> list[IPAddress]:
        try:
            name = normalise_host(host)
        except ValueError as exc:
            raise self._refuse(str(exc)) from None
        literal = parse_ip_literal(name)
        if literal is not None:
            addresses = [literal]
        else:
            try:
                with anyio.fail_after(within):
                    found = await self._resolve(name, port)
                addresses = [ipaddress.ip_address(a.split("%")[0]) for a in found]
            except (OSError, TimeoutError, ValueError):
                addresses = []
        if not addresses:
            FAILURES["unreachable"] += 1
            raise self._connect_error(f"could not reach {name}")
        if not self.allow_private_network:
            for addr in addresses:
                if (problem := address_problem(addr)) is not None:
                    raise self._refuse(f"{name} resolves to {problem}")
        return addresses

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> Any:
        for addr in await self._addresses(host, port, timeout):
            try:
                return await self._inner.connect_tcp(
                    str(addr), port, timeout, local_address, socket_options
                )
            except self._dial_errors:
                continue
        FAILURES["unreachable"] += 1
        raise self._connect_error(f"could not reach {normalise_host(host)}") from None

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        socket_options: Iterable[Any] | None = None,
    ) -> NoReturn:
        raise self._refuse("unix sockets are not allowed")

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


class _Refused1(Refused, httpcore.ConnectError):
    pass


class _Refused2(Refused, httpcore2.ConnectError):
    pass


class GuardedBackendV1(_Guarding, httpcore.AsyncNetworkBackend):
    """The guard as an httpcore (1.x) network backend, under httpx."""

    _connect_error, _refused, _dialler = httpcore.ConnectError, _Refused1, httpcore.AnyIOBackend
    _dial_errors = (httpcore.ConnectError, httpcore.ConnectTimeout)


class GuardedBackend(_Guarding, httpcore2.AsyncNetworkBackend):
    """The guard as an httpcore2 network backend, under httpx2 (the MCP SDK)."""

    _connect_error, _refused, _dialler = httpcore2.ConnectError, _Refused2, httpcore2.AnyIOBackend
    _dial_errors = (httpcore2.ConnectError, httpcore2.ConnectTimeout)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The one TLS client context of the process's outbound clients (certificate
    checks on; ``SSL_CERT_FILE``/``SSL_CERT_DIR`` honoured). Loading the CA store
    costs about 15 ms and a few hundred KB each time, and the guard's clients
    (providers, MCP, webhooks, the resolver, web pages...) made two contexts each;
    an ``SSLContext`` is made to be shared by connections."""
    return httpx.create_ssl_context()


class _GuardedTransportV1(httpx.AsyncHTTPTransport):
    """httpx's transport over a connection pool that uses ``GuardedBackendV1``."""

    def __init__(self, backend: GuardedBackendV1) -> None:
        super().__init__(trust_env=False, verify=tls_context())
        self._pool = httpcore.AsyncConnectionPool(tls_context(), network_backend=backend, **_POOL)


class _GuardedTransport(httpx2.AsyncHTTPTransport):
    """httpx2's transport over a connection pool that uses ``GuardedBackend``."""

    def __init__(self, backend: GuardedBackend) -> None:
        super().__init__(trust_env=False, verify=tls_context())
        self._pool = httpcore2.AsyncConnectionPool(tls_context(), network_backend=backend, **_POOL)


RequestHook = Callable[[Any], Awaitable[None]]


def guarded_httpx_client(
    backend: GuardedBackendV1, *, timeout: float, request_hooks: Iterable[RequestHook] = ()
) -> httpx.AsyncClient:
    """An httpx ``AsyncClient`` whose every connection goes through ``backend``;
    ``request_hooks`` see each request before it is sent (``traceparent``)."""
    return httpx.AsyncClient(
        timeout=timeout,
        transport=_GuardedTransportV1(backend),
        trust_env=False,
        follow_redirects=False,
        event_hooks={"request": list(request_hooks)},
    )


def guarded_httpx2_client(
    backend: GuardedBackend,
    headers: dict[str, str] | None = None,
    timeout: httpx2.Timeout | None = None,
    auth: httpx2.Auth | None = None,
    *,
    event_hooks: Mapping[str, list[Callable[..., Any]]] | None = None,
) -> httpx2.AsyncClient:
    """An httpx2 ``AsyncClient`` whose every connection goes through ``backend``
    (with ``backend`` bound, the MCP SDK's ``McpHttpClientFactory``)."""
    return httpx2.AsyncClient(
        headers=headers,
        timeout=timeout if timeout is not None else httpx2.Timeout(30.0),
        auth=auth,
        transport=_GuardedTransport(backend),
        trust_env=False,
        follow_redirects=False,
        event_hooks=event_hooks,
    )


class OutboundGuard(UrlPolicy):
    """The policy, built once at the composition root: the early URL check (the
    core's ``UrlPolicy``) and the guarded httpx clients of the adapters.
    ``resolver`` replaces the system DNS lookup (tests); ``request_hooks`` are
    installed on every client it makes (the ``traceparent`` header when tracing
    export is on)."""

    def __init__(
        self,
        *,
        allow_private_network: bool,
        resolver: Resolver | None = None,
        request_hooks: Iterable[RequestHook] = (),
    ) -> None:
        self.allow_private_network = allow_private_network
        self.resolver = resolver
        self.request_hooks = tuple(request_hooks)

    def refusal(self, url: str) -> str | None:
        try:
            check_url(url, allow_private_network=self.allow_private_network)
        except ValueError as exc:
            return str(exc)
        return None

    def http_client(self, *, timeout: float) -> httpx.AsyncClient:
        """A guarded httpx client with its own connection pool."""
        backend = GuardedBackendV1(
            allow_private_network=self.allow_private_network, resolver=self.resolver
        )
        return guarded_httpx_client(backend, timeout=timeout, request_hooks=self.request_hooks)
