"""The outbound address guard for HTTP MCP servers.

Rule (decisions): a URL whose host resolves to a loopback, private, link-local,
multicast, reserved, unspecified, otherwise not globally routable or cloud
metadata address is refused, and only ``https://`` is allowed;
``AGENTSVC_ALLOW_PRIVATE_NETWORK=true`` (``allow_private_network``) lifts both.

Two layers:

- ``check_url`` is pure (no DNS): scheme, host present, ``localhost`` names, and
  hosts that are IP literals in any form a C resolver accepts (``127.1``,
  ``2130706433``, ``0x7f.1``, ``017700000001``, ``[::ffff:127.0.0.1]``, 6to4,
  NAT64...). The web layer calls it when a server is configured, for a readable
  early error.
- ``GuardedBackend`` is what actually protects: an httpcore2 network backend that,
  for every TCP connection the MCP transports open, resolves the host itself,
  refuses if *any* resolved address is not allowed, and then connects to the
  address it checked (TLS still verifies the certificate against the host name:
  httpcore2 passes the URL's host as SNI/``server_hostname``). Because the checked
  address is the one connected to, DNS rebinding between check and connect is not
  possible; redirects and every reconnect go through the same check. Proxies from
  the environment are not used (``trust_env=False`` and an explicit transport), so
  the connection is direct.

Residual risk: addresses on the path that are not the destination (a proxy the
operator configures at the network level, NAT) are out of scope; and stdio
servers run locally by design, which is why they have their own switch.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpcore2
import httpx2

__all__ = [
    "GuardedBackend",
    "address_problem",
    "check_url",
    "guarded_http_client",
    "parse_ip_literal",
]

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
                return f"{problem} (embedded in {addr})"
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

    Pure: names are not resolved here; ``GuardedBackend`` checks what they resolve
    to when connecting.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname
        _ = parts.port  # raises ValueError on a bad port
    except ValueError as exc:
        raise ValueError(f"not a valid URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError("the URL must start with https://")
    if not host:
        raise ValueError("the URL has no host")
    if allow_private_network:
        return
    if scheme != "https":
        raise ValueError(
            "plain http:// is refused, use https:// (AGENTSVC_ALLOW_PRIVATE_NETWORK=true allows it)"
        )
    name = host.rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        raise ValueError(f"{host} is a loopback name")
    addr = parse_ip_literal(host)
    if addr is not None and (problem := address_problem(addr)) is not None:
        raise ValueError(f"{host} is {problem}")


async def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (numeric forms are parsed by the C library)."""
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class GuardedBackend(httpcore2.AsyncNetworkBackend):
    """Resolves, checks every address, then connects to a checked address.

    ``refusal`` keeps the last refusal's reason so the client can report it.
    """

    def __init__(self, *, allow_private_network: bool, resolver: Resolver | None = None) -> None:
        self.allow_private_network = allow_private_network
        self.refusal: str | None = None
        self._resolve = resolver or system_resolver
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore2's interface
        local_address: str | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        try:
            with anyio.fail_after(timeout):
                found = await self._resolve(host, port)
        except TimeoutError:
            raise httpcore2.ConnectTimeout(f"resolving {host} timed out") from None
        except OSError as exc:
            raise httpcore2.ConnectError(f"cannot resolve {host}: {exc.strerror or exc}") from None
        addresses = [ipaddress.ip_address(a.split("%")[0]) for a in found]
        if not addresses:
            raise httpcore2.ConnectError(f"{host} resolves to no address")
        if not self.allow_private_network:
            for addr in addresses:
                if (problem := address_problem(addr)) is not None:
                    self.refusal = f"{host} resolves to {addr}, {problem}"
                    raise httpcore2.ConnectError(self.refusal)
        last: Exception | None = None
        for addr in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(addr), port, timeout, local_address, socket_options
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                last = exc
        assert last is not None
        raise last

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore2's interface
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        raise httpcore2.ConnectError("unix sockets are not allowed")

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


class _GuardedTransport(httpx2.AsyncHTTPTransport):
    """httpx2's transport over a connection pool that uses ``GuardedBackend``."""

    def __init__(self, backend: GuardedBackend) -> None:
        super().__init__(trust_env=False)
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(),  # SSL_CERT_FILE/DIR still honoured
            max_connections=20,
            keepalive_expiry=5.0,
            network_backend=backend,
        )


def guarded_http_client(
    backend: GuardedBackend,
    headers: dict[str, str] | None = None,
    timeout: httpx2.Timeout | None = None,
    auth: httpx2.Auth | None = None,
    *,
    event_hooks: Mapping[str, list[Callable[..., Any]]] | None = None,
) -> httpx2.AsyncClient:
    """An ``AsyncClient`` whose every connection goes through ``backend`` (with
    ``backend`` bound, the SDK's ``McpHttpClientFactory``)."""
    return httpx2.AsyncClient(
        headers=headers,
        timeout=timeout if timeout is not None else httpx2.Timeout(30.0),
        auth=auth,
        transport=_GuardedTransport(backend),
        trust_env=False,
        follow_redirects=False,
        event_hooks=event_hooks,
    )
