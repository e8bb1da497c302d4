"""The core's rules for URLs, outbound headers and embed domains."""

from __future__ import annotations

import pytest

from agentsvc_core.errors import InvalidInput
from agentsvc_core.rules import check_embed_domain, check_header, check_url_text


@pytest.mark.parametrize(
    "url",
    ["https://a.example/x y", "https://a.example/\t", "https://a.example/\x00", "https://a\u00a0b"],
)
def test_urls_refuse_whitespace_and_controls(url: str) -> None:
    with pytest.raises(InvalidInput):
        check_url_text("url", url)


def test_a_plain_url_passes() -> None:
    assert check_url_text("url", "https://a.example/p?q=1#f") == "https://a.example/p?q=1#f"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("X-Key", "sec\rret"),
        ("X-Key", "sec\nret"),
        ("X-Key", "secret\x00"),
        ("X Key", "secret"),
        ("", "secret"),
    ],
)
def test_headers_refuse_crlf_nul_and_non_token_names(name: str, value: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        check_header("credentials.headers", name, value)
    assert "sec" not in raised.value.detail  # values are credentials: never repeated


def test_a_header_with_a_tab_passes() -> None:
    check_header("h", "X-Api-Key", "abc\tdef ghi")


@pytest.mark.parametrize(
    "domain",
    ["example.com", "*.example.com", "localhost", "localhost:3000", "bücher.example", "A.B.C"],
)
def test_embed_domains_accept_host_names(domain: str) -> None:
    assert check_embed_domain("d", domain) == domain


@pytest.mark.parametrize(
    "domain",
    [
        "not a domain!!",
        "https://example.com",
        "example.com/x",
        "*",
        "*.*.example.com",
        "a..b",
        "-a.example",
        "example.com:0",
        "example.com:65536",
        "example.com:1:2",
        "[::1]",
        "x" * 64 + ".example",
        "",
    ],
)
def test_embed_domains_refuse_anything_else(domain: str) -> None:
    with pytest.raises(InvalidInput):
        check_embed_domain("d", domain)
