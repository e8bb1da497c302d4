"""Secrets in query strings never reach the access log.

uvicorn's access log (``agentsvc serve --access-log``) prints each request's path
with its query string; an OAuth callback carries ``code`` and ``state`` there.
``redact_access_log()`` puts a filter on the ``uvicorn.access`` logger that
replaces the values of ``SECRET_PARAMETERS`` with ``REDACTED`` before any handler
sees the line.
"""

from __future__ import annotations

import logging
import re

SECRET_PARAMETERS = (
    "code",
    "state",
    "error_description",
    "access_token",
    "token",
    "key",
    "api_key",
)

_SECRET_VALUE = re.compile(
    rf"([?&;](?:{'|'.join(SECRET_PARAMETERS)})=)[^&;#\s\"]*",
    re.IGNORECASE,
)


# a runner's inbound webhook carries its token in the path
_TOKEN_PATH = re.compile(r"(/api/runners/webhooks/)[^/?#\s\"]+")


def redact(text: str) -> str:
    """``/cb?code=abc&x=1`` -> ``/cb?code=REDACTED&x=1``;
    ``/api/runners/webhooks/rt_abc`` -> ``/api/runners/webhooks/REDACTED``."""
    if "/webhooks/" in text:
        text = _TOKEN_PATH.sub(r"\1REDACTED", text)
    return _SECRET_VALUE.sub(r"\1REDACTED", text) if "=" in text else text


class RedactQuerySecrets(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(
            isinstance(a, str) and ("=" in a or "/webhooks/" in a) for a in record.args
        ):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        elif isinstance(record.msg, str) and not record.args:
            record.msg = redact(record.msg)
        return True


_FILTER = RedactQuerySecrets()


def redact_access_log() -> None:
    """Install the filter (once: installing it again changes nothing)."""
    logging.getLogger("uvicorn.access").addFilter(_FILTER)
