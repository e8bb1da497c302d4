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


RT = "rt_Ab3-dE_fGhIjKlMnOpQrStUvWxYz012345"  # a runner token's shape
ASK = "ask_Zy9-xW_vUtSrQpOnMlKjIhGfEdCbA0123456789ab"  # an API key's


@pytest.mark.parametrize(
    ("path", "shown"),
    [
        # a parameter name the named list does not catch: the token's shape does
        (f"/api/runners/x/button?token%3D={RT}", "/api/runners/x/button?token%3D=REDACTED"),
        (f"/x?t={RT}&y=1", "/x?t=REDACTED&y=1"),
        (f"/x?q={ASK}", "/x?q=REDACTED"),
        (f"/x/{ASK}/y", "/x/REDACTED/y"),
        # percent-encoded, in part or whole
        (f"/x?t=rt%5F{RT[3:]}", "/x?t=REDACTED"),
        ("/x?t=%72%74%5f" + RT[3:], "/x?t=REDACTED"),
        (f"/x?t=%3D{RT}", "/x?t=%3DREDACTED"),
        ("/x?t=" + RT[:12] + "%2D" + RT[12:], "/x?t=REDACTED"),
        # named parameters whose names are escaped or followed by escaped "="
        ("/cb?%63ode=abc&x=1", "/cb?%63ode=REDACTED&x=1"),
        ("/cb?state%3D%3D=abc", "/cb?state%3D%3D=REDACTED"),
        # words that merely contain a prefix are left alone
        ("/x?sort_by=created_at_descending&id=task_", "/x?sort_by=created_at_descending&id=task_"),
    ],
)
def test_tokens_are_redacted_by_their_shape(path: str, shown: str) -> None:
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


def test_the_filter_redacts_a_token_under_a_malformed_name() -> None:
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", f"/api/runners/r/button?token%3D={RT}", "1.1", 422),
        None,
    )
    assert RedactQuerySecrets().filter(record)
    assert RT[3:] not in record.getMessage()
