"""Which sites may embed a page (``agentsvc_web.embed_domains``): an entry that
does not pass the rule hides no other, and a site that is not an ``http(s)`` URL
with a host is refused, not crashed on. Written to kill the mutants `make
mutation` found alive in ``agentsvc_web.embed_domains`` (docs/development.md);
the rest of its tests are in tests/unit/test_runner_button.py."""

from __future__ import annotations

import pytest

from agentsvc_web.embed_domains import embedder_allowed, frame_ancestors


def test_an_invalid_entry_does_not_hide_the_valid_ones_after_it() -> None:
    assert frame_ancestors(["not a domain", "example.com", "a/b", "*.corp.example"]) == (
        "https://example.com https://*.corp.example"
    )
    assert embedder_allowed(
        origin="https://example.com", referer=None, domains=["not a domain", "example.com"]
    )


@pytest.mark.parametrize(
    "site",
    ["ftp://example.com", "wss://example.com", "ws://localhost:3000", "https://", "http://:3000"],
)
def test_a_site_that_is_not_an_http_url_with_a_host_is_refused(site: str) -> None:
    domains = ["example.com", "localhost:3000"]
    assert embedder_allowed(origin=site, referer=None, domains=domains) is False
    assert embedder_allowed(origin=None, referer=site, domains=domains) is False
