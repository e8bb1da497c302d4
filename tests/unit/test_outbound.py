"""The outbound guard (agentsvc_adapters.outbound) and the clients that use it:
credential resolver, OAuth, registry, and the httpx2 factory of the MCP transports.
Only loopback is ever contacted: names are mapped by an injected resolver."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from agentsvc_adapters.oauth import HttpOAuth
from agentsvc_adapters.outbound import (
    GuardedBackend,
    GuardedBackendV1,
    OutboundGuard,
    Refused,
    address_problem,
    check_url,
    failure,
    guarded_httpx2_client,
    normalise_host,
    parse_ip_literal,
)
from agentsvc_adapters.registry import HttpMcpRegistry
from agentsvc_adapters.resolver import HttpCredentialResolver
from agentsvc_core.errors import Upstream
from agentsvc_core.ports.resolver import Resolution, ResolverRequest
from tests.outbound import Listener, closed_port, fake_dns

REQUEST = ResolverRequest(user_id="u", org_id="o", provider="beta", model="gpt-x")
NOT_CONTACTED = Resolution(None, "refused")
SK_DIRECT = Resolution("sk-direct", "key")
# what an error text must never say: exception classes, OS error strings
LEAKS = re.compile(r"Error|Timeout|Exception|Errno|refused\b(?! by the outbound guard)", re.I)


# --- normalisation and the pure check -------------------------------------------


@pytest.mark.parametrize(
    ("host", "normal"),
    [
        ("127\u30020\u30020\u30021", "127.0.0.1"),  # ideographic full stop
        ("127\uff0e0\uff0e0\uff0e1", "127.0.0.1"),  # full-width full stop
        ("127\uff610\uff610\uff611", "127.0.0.1"),  # half-width ideographic full stop
        ("\uff11\uff12\uff17.0.0.1", "127.0.0.1"),  # full-width digits
        ("\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.com", "example.com"),  # full-width letters
        ("b\u00fccher.example", "xn--bcher-kva.example"),  # IDNA
        ("ExAmple.COM.", "example.com"),  # case, trailing dot
        ("LOCALHOST..", "localhost"),
        ("[::1]", "::1"),
        ("[0:0:0:0:0:ffff:7f00:1]", "::ffff:7f00:1"),
        ("my_host.example", "my_host.example"),
    ],
)
def test_hosts_are_normalised(host: str, normal: str) -> None:
    assert normalise_host(host) == normal


@pytest.mark.parametrize(
    "host",
    [
        "",
        ".",
        "a..b",
        "exa mple.com",
        "%31%32%37.0.0.1",
        "a/b",
        "[::1::2]",
        "\ufffd.example",
        # brackets hold an IPv6 address, both of them or neither
        "[db.example.com",
        "[db.example.com]",
        "[::1",
        "[127.0.0.1]",
    ],
)
def test_hosts_that_cannot_be_normalised_are_refused(host: str) -> None:
    with pytest.raises(ValueError, match="not a valid host"):
        normalise_host(host)


REFUSED = [
    "http://example.com/mcp",
    "https://127.0.0.1/",
    "https://127.1/",
    "https://2130706433/",
    "https://0x7f.1/",
    "https://0x7f000001/",
    "https://017700000001/",
    "https://[::1]/",
    "https://[::ffff:127.0.0.1]/",
    "https://[::ffff:7f00:1]/",
    "https://[2002:7f00:1::]/",
    "https://[64:ff9b::a00:1]/",
    "https://10.0.0.1/",
    "https://172.16.5.4/",
    "https://192.168.1.1:8443/",
    "https://100.64.0.1/",
    "https://169.254.169.254/latest/meta-data/",
    "https://[fd00:ec2::254]/",
    "https://100.100.100.200/",
    "https://[fe80::1]/",
    "https://224.0.0.1/",
    "https://0.0.0.0/",
    "https://0/",
    "https://240.0.0.1/",
    "https://localhost:8000/",
    "https://api.localhost/",
    "ftp://example.com/",
    "https:///no-host",
]


@pytest.mark.parametrize("url", REFUSED)
def test_check_url_refuses(url: str) -> None:
    with pytest.raises(ValueError, match=r"\S"):
        check_url(url, allow_private_network=False)


@pytest.mark.parametrize(
    "url", ["https://mcp.example.com/mcp", "https://93.184.216.34/", "https://[2606:4700::1]/"]
)
def test_check_url_allows_public_https(url: str) -> None:
    check_url(url, allow_private_network=False)


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8000/mcp", "http://localhost/", "https://10.1.2.3/"]
)
def test_check_url_allows_private_when_enabled(url: str) -> None:
    check_url(url, allow_private_network=True)


def test_ip_literal_forms() -> None:
    assert str(parse_ip_literal("127.1")) == "127.0.0.1"
    assert str(parse_ip_literal("0x7f.0.0.1")) == "127.0.0.1"
    assert str(parse_ip_literal("0177.0.0.1")) == "127.0.0.1"
    assert str(parse_ip_literal("10.65535")) == "10.0.255.255"
    assert str(parse_ip_literal("3232235777")) == "192.168.1.1"
    assert parse_ip_literal("example.com") is None
    assert parse_ip_literal("1.2.3.4.5") is None
    assert parse_ip_literal("256.1.1.1") is None
    v6 = parse_ip_literal("[::ffff:169.254.169.254]")
    assert v6 is not None
    assert address_problem(v6) is not None


@pytest.mark.parametrize(
    "url",
    [
        "https://127\u30020\u30020\u30021/",
        "https://127\uff0e0\uff0e0\uff0e1:8443/",
        "https://127\uff610\uff610\uff611/",
        "https://\uff11\uff12\uff17.0.0.1/",
        "https://LOCALHOST./",
        "https://localhost\u3002/",
        "https://10\u30020\u30020\u30021/",
        "https://169\uff0e254\uff0e169\uff0e254/latest/meta-data/",
    ],
)
def test_check_url_normalises_before_checking(url: str) -> None:
    with pytest.raises(ValueError, match=r"loopback|private|metadata"):
        check_url(url, allow_private_network=False)


@pytest.mark.parametrize("allow", [False, True])
@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://user:pw@example.com/", "user name or password"),
        ("https://token@example.com/", "user name or password"),
        ("https://example.com@127.0.0.1/", "user name or password"),
        ("https://exa mple.com/", "whitespace or control"),
        ("https://example.com/\n", "whitespace or control"),
        ("https://example.com/a\tb", "whitespace or control"),
        ("\x00https://example.com/", "whitespace or control"),
        ("https://example.com\u200b/", "whitespace or control"),
        ("https://%31%32%37.0.0.1/", "not a valid host"),
        ("https://a..b/", "not a valid host"),
    ],
)
def test_check_url_refuses_userinfo_controls_and_bad_hosts(
    url: str, reason: str, allow: bool
) -> None:
    with pytest.raises(ValueError, match=reason):
        check_url(url, allow_private_network=allow)


# --- the connect-time check, both client flavours --------------------------------


def flavours(
    guard: OutboundGuard,
) -> dict[str, Callable[[str], Awaitable[int]]]:
    """GET a URL with each guarded client; answers the status."""

    async def httpx1(url: str) -> int:
        async with guard.http_client(timeout=5) as http:
            return (await http.get(url)).status_code

    async def httpx2(url: str) -> int:
        backend = GuardedBackend(
            allow_private_network=guard.allow_private_network, resolver=guard.resolver
        )
        async with guarded_httpx2_client(backend) as http:
            return (await http.get(url)).status_code

    return {"httpx": httpx1, "httpx2": httpx2}


@pytest.fixture
async def target() -> AsyncIterator[Listener]:
    async with Listener() as listener:
        yield listener


@pytest.mark.parametrize("flavour", ["httpx", "httpx2"])
@pytest.mark.parametrize(
    ("host", "addresses"),
    [
        ("svc.example.test", ["127.0.0.1"]),
        ("svc.example.test", ["::1"]),
        ("svc.example.test", ["127.0.0.1", "10.0.0.1"]),
        ("127\u30020\u30020\u30021", []),
        ("127.1", []),
    ],
)
async def test_connect_time_check_refuses_before_connecting(
    target: Listener, flavour: str, host: str, addresses: list[str]
) -> None:
    guard = OutboundGuard(
        allow_private_network=False, resolver=fake_dns({"svc.example.test": addresses})
    )
    with pytest.raises(Exception) as caught:  # noqa: PT011 - each flavour's own ConnectError
        await flavours(guard)[flavour](f"http://{host}:{target.port}/")
    assert failure(caught.value, "http://x/").startswith("refused by the outbound guard: ")
    assert "resolves to a loopback address" in str(caught.value)
    assert target.connections == 0


@pytest.mark.parametrize("backend_class", [GuardedBackendV1, GuardedBackend])
async def test_one_refused_address_refuses_the_name(
    backend_class: type[GuardedBackendV1 | GuardedBackend],
) -> None:
    # A public address first: the dialler is replaced, so that even a broken guard
    # cannot send anything off this machine.
    dns = fake_dns({"svc.example.test": ["93.184.216.34", "127.0.0.1"]})
    backend = backend_class(allow_private_network=False, resolver=dns)
    dialled: list[str] = []

    class NoNetwork:
        async def connect_tcp(self, host: str, *args: object) -> None:
            dialled.append(host)
            raise OSError("no network in this test")

    backend._inner = NoNetwork()
    with pytest.raises(Refused, match=r"svc\.example\.test resolves to a loopback address"):
        await backend.connect_tcp("svc.example.test", 443)
    assert dialled == []


@pytest.mark.parametrize("flavour", ["httpx", "httpx2"])
async def test_connections_go_to_the_checked_address(target: Listener, flavour: str) -> None:
    guard = OutboundGuard(
        allow_private_network=True, resolver=fake_dns({"svc.example.test": ["127.0.0.1"]})
    )
    assert await flavours(guard)[flavour](f"http://svc.example.test:{target.port}/") == 200
    assert target.connections == 1


@pytest.mark.parametrize("flavour", ["httpx", "httpx2"])
async def test_environment_proxies_are_never_contacted(
    target: Listener, flavour: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with Listener() as proxy:
        set_proxies(monkeypatch, proxy.port)
        guard = OutboundGuard(
            allow_private_network=True, resolver=fake_dns({"svc.example.test": ["127.0.0.1"]})
        )
        assert await flavours(guard)[flavour](f"http://svc.example.test:{target.port}/") == 200
    assert (proxy.connections, target.connections) == (0, 1)


def set_proxies(monkeypatch: pytest.MonkeyPatch, port: int) -> None:
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{port}")
        monkeypatch.setenv(name.lower(), f"http://127.0.0.1:{port}")


# --- the credential resolver -------------------------------------------------------


def loopback_dns() -> OutboundGuard:
    return OutboundGuard(
        allow_private_network=False, resolver=fake_dns({"resolver.example.test": ["127.0.0.1"]})
    )


async def test_resolver_never_connects_to_a_name_that_resolves_to_loopback(
    target: Listener, caplog: pytest.LogCaptureFixture
) -> None:
    resolver = HttpCredentialResolver(loopback_dns())
    caplog.set_level(logging.INFO, "agentsvc.resolver")
    try:
        url = f"https://resolver.example.test:{target.port}/resolve"
        # refused when connecting (the URL itself passes): still a refusal
        assert await resolver.resolve(url, REQUEST, ["s3cret"], 2000) == NOT_CONTACTED
    finally:
        await resolver.aclose()
    assert target.connections == 0
    assert "resolver.example.test resolves to a loopback address" in caplog.text


async def test_resolver_refuses_full_width_dots(target: Listener) -> None:
    resolver = HttpCredentialResolver(loopback_dns())
    try:
        for dot in ("\u3002", "\uff0e", "\uff61"):
            url = f"https://127{dot}0{dot}0{dot}1:{target.port}/"
            assert await resolver.resolve(url, REQUEST, ["s3cret"], 2000) == NOT_CONTACTED
    finally:
        await resolver.aclose()
    assert target.connections == 0


async def test_resolver_on_a_private_network_when_allowed(target: Listener) -> None:
    guard = OutboundGuard(
        allow_private_network=True, resolver=fake_dns({"resolver.example.test": ["127.0.0.1"]})
    )
    resolver = HttpCredentialResolver(guard)
    try:
        url = f"http://resolver.example.test:{target.port}/resolve"
        assert await resolver.resolve(url, REQUEST, ["s3cret"], 2000) == SK_DIRECT
    finally:
        await resolver.aclose()
    assert target.connections == 1


async def test_a_host_httpx_cannot_encode_is_a_failure_not_a_crash() -> None:
    # full-width letters: normalised (and allowed) by the guard, refused by httpx's
    # own IDNA encoding; the DNS table is empty, so nothing could be contacted anyway
    guard = OutboundGuard(allow_private_network=False, resolver=fake_dns({}))
    url = "https://\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.test/r"
    assert guard.refusal(url) is None
    resolver, oauth = HttpCredentialResolver(guard), HttpOAuth(guard)
    try:
        answer = await resolver.resolve(url, REQUEST, ["s3cret"], 2000)
        assert answer == Resolution(None, "unreachable")
        with pytest.raises(Upstream, match=r"^could not reach "):
            await oauth.discover(url)
    finally:
        await resolver.aclose()
        await oauth.aclose()


# --- OAuth -----------------------------------------------------------------------


async def test_oauth_discovery_of_a_name_that_resolves_to_loopback_is_refused(
    target: Listener,
) -> None:
    guard = OutboundGuard(
        allow_private_network=False, resolver=fake_dns({"mcp.example.test": ["127.0.0.1"]})
    )
    oauth = HttpOAuth(guard)
    try:
        with pytest.raises(Upstream) as caught:
            await oauth.discover(f"https://mcp.example.test:{target.port}/mcp")
    finally:
        await oauth.aclose()
    assert caught.value.detail == (
        "refused by the outbound guard: mcp.example.test resolves to a loopback address"
    )
    assert not LEAKS.search(caught.value.detail)
    assert target.connections == 0


async def test_oauth_errors_do_not_tell_a_closed_port_from_a_silent_one() -> None:
    oauth = HttpOAuth(OutboundGuard(allow_private_network=True), timeout_s=0.5)
    details = []
    try:
        with closed_port() as port:
            with pytest.raises(Upstream) as closed:
                await oauth.discover(f"http://127.0.0.1:{port}/mcp")
            details.append(closed.value.detail)
        async with Listener(silent=True) as silent:
            with pytest.raises(Upstream) as timed_out:
                await oauth.discover(f"http://127.0.0.1:{silent.port}/mcp")
            details.append(timed_out.value.detail)
        assert silent.connections == 1
    finally:
        await oauth.aclose()
    assert details == ["could not reach 127.0.0.1", "could not reach 127.0.0.1"]


# --- the registry and every adapter's proxies -------------------------------------


async def test_registry_goes_through_the_guard(target: Listener) -> None:
    guard = OutboundGuard(
        allow_private_network=False, resolver=fake_dns({"registry.example.test": ["10.0.0.8"]})
    )
    registry = HttpMcpRegistry(f"https://registry.example.test:{target.port}", guard)
    try:
        with pytest.raises(Upstream) as caught:
            await registry.search("x", 5)
    finally:
        await registry.aclose()
    assert caught.value.detail == (
        "the MCP registry could not be reached "
        "(refused by the outbound guard: registry.example.test resolves to a private address)"
    )
    assert target.connections == 0


async def test_the_adapters_ignore_environment_proxies(
    target: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with Listener() as proxy:
        set_proxies(monkeypatch, proxy.port)
        guard = OutboundGuard(
            allow_private_network=True, resolver=fake_dns({"svc.example.test": ["127.0.0.1"]})
        )
        base = f"http://svc.example.test:{target.port}"
        resolver, oauth = HttpCredentialResolver(guard), HttpOAuth(guard)
        registry = HttpMcpRegistry(base, guard)
        try:
            assert await resolver.resolve(base, REQUEST, ["s3cret"], 2000) == SK_DIRECT
            assert await registry.search("x", 5) == []
            with pytest.raises(Upstream, match="publishes no protected-resource metadata"):
                await oauth.discover(base)
        finally:
            for adapter in (resolver, oauth, registry):
                await adapter.aclose()
    assert proxy.connections == 0
    assert target.connections == 3
