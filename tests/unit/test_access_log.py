"""The access log's filter: secret query parameters are printed as ``REDACTED``."""

from __future__ import annotations

import logging

import pytest

from agentsvc_web.access_log import RedactQuerySecrets, redact


@pytest.mark.parametrize(
    ("path", "shown"),
    [
        ("/cb?code=abc&state=xyz", "/cb?code=REDACTED&state=REDACTED"),
        ("/cb?x=1&CODE=abc#frag", "/cb?x=1&CODE=REDACTED#frag"),
        (
            "/a?error_description=bad+thing&error=access_denied",
            "/a?error_description=REDACTED&error=access_denied",
        ),
        (
            "/a?access_token=t&token=u&key=v&api_key=w",
            "/a?access_token=REDACTED&token=REDACTED&key=REDACTED&api_key=REDACTED",
        ),
        ("/a?error_code=1&keys=2&statement=3", "/a?error_code=1&keys=2&statement=3"),
        ("/plain/path", "/plain/path"),
    ],
)
def test_secret_values_are_redacted(path: str, shown: str) -> None:
    assert redact(path) == shown


def test_the_filter_rewrites_uvicorns_access_line() -> None:
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", "/api/mcps/x/oauth/callback?code=SECRET&state=S2", "1.1", 400),
        None,
    )
    assert RedactQuerySecrets().filter(record)
    line = record.getMessage()
    assert "SECRET" not in line
    assert "S2" not in line
    assert "callback?code=REDACTED&state=REDACTED HTTP/1.1" in line
