"""The outbound guard's reasons, the IPv4 addresses hidden in IPv6 ones, and the
settings of its clients, pinned. Only loopback is contacted. Written to kill the
mutants `make mutation` found alive in ``agentsvc_adapters.outbound``
(docs/development.md)."""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

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
    refusal_of,
    system_resolver,
)
from tests.outbound import fake_dns
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
