"""The outbound guard counts its failures by a bounded reason (read by /metrics)
and logs each refusal once (docs/operations.md, "Metrics: `/metrics`" and "Logs and
request ids")."""

from __future__ import annotations

import logging

import httpcore
import pytest

from agentsvc_adapters.outbound import FAILURES, GuardedBackendV1, Resolver, check_url, reason_of


def dns(answer: list[str]) -> Resolver:
    async def resolve(host: str, port: int) -> list[str]:
        return answer

    return resolve


@pytest.mark.parametrize(
    ("url", "label"),
    [
        ("https://127.0.0.1/x", "loopback"),
        ("https://localhost/x", "loopback"),
        ("https://10.1.2.3/", "private"),
        ("https://169.254.169.254/latest", "metadata"),
        ("https://169.254.1.1/", "link_local"),
        ("https://224.0.0.1/", "multicast"),
        ("https://0.0.0.0/", "unspecified"),
        ("http://example.com/", "scheme"),
        ("ftp://example.com/", "scheme"),
        ("https://user:pw@example.com/", "userinfo"),
        ("https://exa mple.com/", "invalid_url"),
    ],
)
def test_each_refusal_has_a_bounded_label(url: str, label: str) -> None:
    with pytest.raises(ValueError, match=r"\w") as refused:
        check_url(url, allow_private_network=False)
    assert reason_of(str(refused.value)) == label


async def test_a_refused_connection_is_counted_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "agentsvc.outbound")
    backend = GuardedBackendV1(allow_private_network=False, resolver=dns(["10.0.0.7"]))
    before = FAILURES["private"]
    with pytest.raises(httpcore.ConnectError, match="refused by the outbound guard"):
        await backend.connect_tcp("internal.example", 443)
    assert FAILURES["private"] == before + 1
    (line,) = [r for r in caplog.records if r.name == "agentsvc.outbound"]
    assert line.levelno == logging.WARNING
    assert line.getMessage() == (
        "outbound call refused by the outbound guard: "
        "internal.example resolves to a private address [private]"
    )
    assert "10.0.0.7" not in line.getMessage()  # no DNS oracle


async def test_a_name_that_resolves_to_nothing_is_counted_unreachable_not_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "agentsvc.outbound")
    backend = GuardedBackendV1(allow_private_network=False, resolver=dns([]))
    before = FAILURES["unreachable"]
    with pytest.raises(httpcore.ConnectError, match="could not reach"):
        await backend.connect_tcp("nowhere.example", 443)
    assert FAILURES["unreachable"] == before + 1
    assert not [r for r in caplog.records if r.name == "agentsvc.outbound"]
