"""The outbound guard's reasons, the IPv4 addresses hidden in IPv6 ones, and the
settings of its clients, pinned. Only loopback is contacted. Written to kill the
mutants `make mutation` found alive in ``agentsvc_adapters.outbound``
(docs/development.md)."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpcore
import httpx
import httpx2
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from agentsvc_adapters.outbound import (
    FAILURES,
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
    refusal_of,
    system_resolver,
    tls_context,
)
from tests.outbound import closed_port, fake_dns
from tests.unit.test_mutants_resolver import Webhook


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("169.254.169.254", "a cloud metadata address"),
        ("127.0.0.1", "a loopback address"),
        ("0.0.0.0", "an unspecified address"),
        ("::", "an unspecified address"),
        ("169.254.1.1", "a link-local address"),
        ("fe80::1", "a link-local address"),
        ("224.0.0.1", "a multicast address"),
        ("ff02::1", "a multicast address"),
        ("10.0.0.1", "a private address"),
        ("240.0.0.1", "a private address"),
        ("100.64.0.1", "not a globally routable address"),
        ("93.184.216.34", None),
        ("2606:4700::1111", None),
    ],
)
def test_each_kind_of_address_has_its_reason(address: str, problem: str | None) -> None:
    assert address_problem(ipaddress.ip_address(address)) == problem


@pytest.mark.parametrize(
    "address",
    [
        "::ffff:127.0.0.1",  # IPv4-mapped
        "2002:7f00:1::",  # 6to4
        "2001:0:7f00:1::",  # Teredo, server 127.0.0.1
        "64:ff9b::7f00:1",  # NAT64
    ],
)
def test_loopback_hidden_in_ipv6_is_found(address: str) -> None:
    assert address_problem(ipaddress.ip_address(address)) == (
        "a loopback address (embedded in an IPv6 address)"
    )


def test_nat64_keeps_only_the_low_32_bits() -> None:
    # 64:ff9b::a00:1 carries 10.0.0.1: a private address, not 255.255.255.255
    assert address_problem(ipaddress.ip_address("64:ff9b::a00:1")) == (
        "a private address (embedded in an IPv6 address)"
    )


def test_an_empty_hex_part_is_zero() -> None:
    assert parse_ip_literal("0x") == ipaddress.IPv4Address("0.0.0.0")
    assert parse_ip_literal("0x.0x.0x.0x1") == ipaddress.IPv4Address("0.0.0.1")


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://a.example/x y", "the URL contains whitespace or control characters"),
        ("ftp://a.example/", "the URL must start with https://"),
        ("https://u:p@a.example/", "the URL must not contain a user name or password"),
        ("https:///path", "the URL has no host"),
        (
            "http://a.example/",
            "plain http:// is refused, use https:// "
            "(AGENTSVC_ALLOW_PRIVATE_NETWORK=true allows it)",
        ),
        ("https://127.0.0.1/", "127.0.0.1 is a loopback address"),
    ],
)
def test_refusals_read_as_documented(url: str, reason: str) -> None:
    with pytest.raises(ValueError, match=r".") as raised:
        check_url(url, allow_private_network=False)
    assert str(raised.value) == reason
    assert OutboundGuard(allow_private_network=False).refusal(url) == reason


@pytest.mark.parametrize("url", ["https://a.example:99999/", "https://a.example:x/"])
def test_a_bad_port_is_not_a_valid_url(url: str) -> None:
    with pytest.raises(ValueError, match=r"^not a valid URL: ") as raised:
        check_url(url, allow_private_network=True)
    assert str(raised.value) != "not a valid URL: None"


def test_a_refusal_is_found_in_the_implicit_context_too() -> None:
    outer = RuntimeError("wrapped")
    outer.__context__ = Refused("refused by the outbound guard: why")
    assert refusal_of(outer) == "refused by the outbound guard: why"
    explicit = RuntimeError("wrapped")
    explicit.__cause__ = Refused("because")
    explicit.__context__ = ValueError("unrelated")
    assert refusal_of(explicit) == "because"
    assert refusal_of(RuntimeError("plain")) is None


def test_a_failure_with_an_unreadable_url_names_the_server() -> None:
    assert failure(OSError("x"), "http://[::1") == "could not reach the server"
    assert failure(OSError("x"), "https://a.example:1/p") == "could not reach a.example"


async def test_the_system_resolver_answers_each_address_once() -> None:
    found = await system_resolver("localhost", 443)
    assert found
    assert len(found) == len(set(found))
    assert all(ipaddress.ip_address(a).is_loopback for a in found)


@pytest.mark.parametrize("backend_class", [GuardedBackendV1, GuardedBackend])
async def test_unix_sockets_are_refused_with_a_reason(
    backend_class: type[GuardedBackendV1 | GuardedBackend],
) -> None:
    backend = backend_class(allow_private_network=True)
    with pytest.raises(Refused) as raised:
        await backend.connect_unix_socket("/tmp/x.sock")  # noqa: S108 - never opened
    assert str(raised.value) == "refused by the outbound guard: unix sockets are not allowed"
    assert backend.refusal == "unix sockets are not allowed"


async def test_the_backend_sleeps_as_asked() -> None:
    started = time.monotonic()
    await GuardedBackend(allow_private_network=True).sleep(0.05)
    assert time.monotonic() - started >= 0.04


def test_the_httpx2_client_keeps_what_it_is_given_and_times_out_by_default() -> None:
    backend = GuardedBackend(allow_private_network=True)
    auth = httpx2.BasicAuth("u", "p")

    def hook(request: httpx2.Request) -> None: ...

    client = guarded_httpx2_client(
        backend, headers={"X-Test": "1"}, auth=auth, event_hooks={"request": [hook]}
    )
    assert client.headers["X-Test"] == "1"
    assert client.auth is auth
    assert client.event_hooks["request"] == [hook]
    assert client.timeout == httpx2.Timeout(30.0)
    assert not client.follow_redirects
    assert not client.trust_env
    short = guarded_httpx2_client(backend, timeout=httpx2.Timeout(2.0))
    assert short.timeout == httpx2.Timeout(2.0)


def test_the_httpx_client_does_not_follow_redirects_or_read_the_environment() -> None:
    client = OutboundGuard(allow_private_network=True).http_client(timeout=3.0)
    assert not client.follow_redirects
    assert not client.trust_env
    assert client.timeout.read == 3.0


@pytest.fixture
async def webhook() -> AsyncIterator[Webhook]:
    hook = Webhook()
    await hook.start()
    yield hook
    await hook.stop()


async def test_the_httpx2_client_does_not_follow_a_redirect(webhook: Webhook) -> None:
    webhook.status = 302
    webhook.extra_head = b"location: /elsewhere\r\n"
    backend = GuardedBackend(
        allow_private_network=True, resolver=fake_dns({"svc.example.test": ["127.0.0.1"]})
    )
    async with guarded_httpx2_client(backend) as http:
        answer = await http.get(f"http://svc.example.test:{webhook.port}/start")
    assert answer.status_code == 302
    assert [line for line, _, _ in webhook.requests] == ["GET /start HTTP/1.1"]


# --- the connect-time check ----------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("127.255.1", "127.255.0.1"),
        ("127.16777215", "127.255.255.255"),
        ("127.1.", "127.0.0.1"),
        ("[::1]", "::1"),
    ],
)
def test_short_ipv4_forms_at_their_bounds(host: str, address: str) -> None:
    assert parse_ip_literal(host) == ipaddress.ip_address(address)


@pytest.mark.parametrize("host", ["127.16777216", "1.2.3.4.5", "256.1", "1.2.65536"])
def test_short_ipv4_forms_past_their_bounds_are_names(host: str) -> None:
    assert parse_ip_literal(host) is None


def test_host_names_keep_their_last_letters() -> None:
    assert normalise_host("EXAMPLE.TX.") == "example.tx"
    assert normalise_host("box") == "box"


def hanging_dns() -> Any:
    async def resolve(host: str, port: int) -> list[str]:
        await asyncio.sleep(30)
        return []

    return resolve


@pytest.mark.parametrize("backend_class", [GuardedBackendV1, GuardedBackend])
async def test_a_name_lookup_is_bounded_by_the_connect_timeout(
    backend_class: type[GuardedBackendV1 | GuardedBackend],
) -> None:
    backend = backend_class(allow_private_network=True, resolver=hanging_dns())
    started = time.monotonic()
    with pytest.raises(Exception) as raised:  # noqa: PT011 - the flavour's ConnectError
        await backend.connect_tcp("svc.example.test", 443, timeout=0.1)
    assert time.monotonic() - started < 2
    assert str(raised.value) == "could not reach svc.example.test"
    assert backend.refusal is None


@pytest.mark.parametrize("backend_class", [GuardedBackendV1, GuardedBackend])
async def test_a_scoped_ipv6_answer_is_checked_without_its_zone(
    backend_class: type[GuardedBackendV1 | GuardedBackend],
) -> None:
    dns = fake_dns({"svc.example.test": ["fe80::1%eth0"]})
    backend = backend_class(allow_private_network=False, resolver=dns)
    with pytest.raises(Refused) as raised:
        await backend.connect_tcp("svc.example.test", 443, timeout=1)
    assert str(raised.value) == (
        "refused by the outbound guard: svc.example.test resolves to a link-local address"
    )


@pytest.mark.parametrize("backend_class", [GuardedBackendV1, GuardedBackend])
async def test_a_host_that_cannot_be_normalised_is_refused_with_the_reason(
    backend_class: type[GuardedBackendV1 | GuardedBackend],
) -> None:
    backend = backend_class(allow_private_network=True, resolver=fake_dns({}))
    with pytest.raises(Refused) as raised:
        await backend.connect_tcp("bad host!", 443, timeout=1)
    assert (
        str(raised.value) == "refused by the outbound guard: 'bad host!' is not a valid host name"
    )


@pytest.mark.parametrize("flavour", [GuardedBackendV1, GuardedBackend])
async def test_an_address_that_refuses_falls_over_to_the_next(
    webhook: Webhook, flavour: type[GuardedBackendV1 | GuardedBackend]
) -> None:
    # 127.0.0.2 is on loopback too, but nothing listens there on this port
    dns = fake_dns({"svc.example.test": ["127.0.0.2", "127.0.0.1"]})
    backend = flavour(allow_private_network=True, resolver=dns)
    stream = await backend.connect_tcp("svc.example.test", webhook.port, timeout=2)
    await stream.aclose()
    lone = flavour(allow_private_network=True, resolver=fake_dns({"x.test": ["127.0.0.2"]}))
    with pytest.raises(Exception) as raised:  # noqa: PT011 - the flavour's ConnectError
        await lone.connect_tcp("X.test", webhook.port, timeout=2)
    assert str(raised.value) == "could not reach x.test"


# --- more of the guard's edges -----------------------------------------------------


def test_a_name_with_a_stray_bracket_is_not_a_host() -> None:
    # only a host that opens with a bracket (an IPv6 literal) loses its brackets
    with pytest.raises(ValueError, match="is not a valid host"):
        normalise_host("db.example.com]")


def test_five_parts_are_a_name_not_an_address() -> None:
    # inet_aton takes one to four parts; 1.2.3.4.0 is a name for DNS to answer
    assert parse_ip_literal("1.2.3.4.0") is None
    assert parse_ip_literal("127.0.0.1.0") is None


def test_a_reserved_ipv6_address_has_its_reason() -> None:
    assert address_problem(ipaddress.ip_address("4000::1")) == "a reserved address"


async def test_the_system_resolver_answers_an_address_as_itself() -> None:
    # a numeric host needs no DNS: the lookup is of the host given, not of this machine
    assert await system_resolver("192.0.2.7", 443) == ["192.0.2.7"]


class _Dialler:
    """Records what the guard asks its dialler for, and connects nowhere."""

    calls: list[tuple[Any, ...]]

    def __init__(self) -> None:
        self.calls = []

    async def connect_tcp(self, *args: Any) -> str:
        self.calls.append(args)
        return "stream"


class _Recording(GuardedBackendV1):
    _dialler = _Dialler  # type: ignore[assignment]  # a recording stand-in for the dialler


async def test_the_dialler_gets_the_port_timeout_and_socket_options_asked_for() -> None:
    """httpx's connect timeout, local address and socket options reach the
    connection the guard opens; the lookup is of the port asked for."""
    looked_up: list[tuple[str, int]] = []

    async def dns(host: str, port: int) -> list[str]:
        looked_up.append((host, port))
        return ["93.184.216.34"]

    backend = _Recording(allow_private_network=False, resolver=dns)
    options = [(6, 1, 1)]
    stream = await backend.connect_tcp(
        "svc.example.test", 8443, timeout=2.5, local_address="0.0.0.0", socket_options=options
    )
    assert stream == "stream"
    assert looked_up == [("svc.example.test", 8443)]
    dialler = backend._inner
    assert isinstance(dialler, _Dialler)
    assert dialler.calls == [("93.184.216.34", 8443, 2.5, "0.0.0.0", options)]


async def test_a_name_nobody_answers_on_is_counted_unreachable_once() -> None:
    with closed_port() as port:
        backend = GuardedBackendV1(
            allow_private_network=True, resolver=fake_dns({"svc.example.test": ["127.0.0.1"]})
        )
        before = FAILURES["unreachable"]
        with pytest.raises(httpcore.ConnectError, match=r"^could not reach svc\.example\.test$"):
            await backend.connect_tcp("svc.example.test", port, timeout=2)
    assert FAILURES["unreachable"] == before + 1


async def test_request_hooks_see_every_request_of_the_guards_clients(webhook: Webhook) -> None:
    seen: list[str] = []

    async def hook(request: httpx.Request) -> None:
        seen.append(str(request.url))
        request.headers["traceparent"] = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"

    guard = OutboundGuard(
        allow_private_network=True,
        resolver=fake_dns({"svc.example.test": ["127.0.0.1"]}),
        request_hooks=[hook],
    )
    async with guard.http_client(timeout=3.0) as http:
        answer = await http.get(f"http://svc.example.test:{webhook.port}/x")
    assert answer.status_code == 200
    assert seen == [f"http://svc.example.test:{webhook.port}/x"]
    [(_, headers, _)] = webhook.requests
    assert headers["traceparent"] == "00-" + "1" * 32 + "-" + "2" * 16 + "-01"


# --- TLS: the trusted authorities, and the name checked ------------------------------


def _certificates(directory: Path, name: str) -> tuple[Path, Path, Path]:
    """A test authority (its certificate file) and a server certificate and key it
    signed for ``name``."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "agentsvc test authority")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    server = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_file, cert_file, key_file = (directory / n for n in ("ca.pem", "cert.pem", "key.pem"))
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_file.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return ca_file, cert_file, key_file


@pytest.fixture
async def tls_site(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Webhook, int]]:
    """A loopback HTTPS server for ``svc.example.test`` whose authority only
    ``SSL_CERT_FILE`` names when the guard's one TLS context is made (made again
    for this test, and again after it); the variable is gone by the time anything
    connects, so only that context trusts the authority."""
    ca_file, cert_file, key_file = _certificates(tmp_path, "svc.example.test")
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    tls_context.cache_clear()
    tls_context()
    monkeypatch.delenv("SSL_CERT_FILE")
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert_file, key_file)
    hook = Webhook()
    server = await asyncio.start_server(hook._handle, "127.0.0.1", 0, ssl=server_tls)
    try:
        yield hook, server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()
        tls_context.cache_clear()


async def test_both_flavours_connect_with_the_one_tls_context_of_the_process(
    tls_site: tuple[Webhook, int],
) -> None:
    """Made once (``SSL_CERT_FILE`` honoured), shared by every connection: not a
    context of the TLS library's own per connection, which would load the trust
    store again each time and trust what the environment says then."""
    hook, port = tls_site
    dns = fake_dns({"svc.example.test": ["127.0.0.1"]})
    url = f"https://svc.example.test:{port}/x"
    async with OutboundGuard(allow_private_network=True, resolver=dns).http_client(
        timeout=3.0
    ) as http:
        assert (await http.get(url)).status_code == 200
    backend = GuardedBackend(allow_private_network=True, resolver=dns)
    async with guarded_httpx2_client(backend) as http2:
        assert (await http2.get(url)).status_code == 200
    assert len(hook.requests) == 2


async def test_the_certificate_is_checked_against_the_host_name_not_the_address(
    tls_site: tuple[Webhook, int],
) -> None:
    """The guard connects to the address it checked, and TLS still verifies the
    name the URL gave: a certificate for another name is refused."""
    hook, port = tls_site
    dns = fake_dns({"other.example.test": ["127.0.0.1"]})
    async with OutboundGuard(allow_private_network=True, resolver=dns).http_client(
        timeout=3.0
    ) as http:
        with pytest.raises(httpx.ConnectError):
            await http.get(f"https://other.example.test:{port}/x")
    assert hook.requests == []
