"""Secrets in request lines never reach the access log.

uvicorn's access log (``agentsvc serve --access-log``) prints each request's path
with its query string: the path percent-encoded, the query as the client sent it.
``redact_access_log()`` puts a filter on the ``uvicorn.access`` logger that
rewrites the line before any handler sees it:

- the values of ``SECRET_PARAMETERS`` (an OAuth callback's ``code`` and ``state``)
  become ``REDACTED``;
- a runner webhook's path token becomes ``REDACTED``;
- anything shaped like one of this service's own credentials (an ``ask_`` API
  key, an ``rt_`` runner token, a ``whsec_`` signing secret:
  ``agentsvc_core.redact.TOKEN_PREFIXES``) becomes ``REDACTED`` wherever it is
  and whatever parameter name it came under (``?token%3D=rt_...``, a token pasted
  into another parameter), plain or percent-encoded (``rt%5F...``).

The error log lines that name a request's path (``agentsvc_web.errors``) use
``redact`` too.
"""

from __future__ import annotations

import logging
import re

from agentsvc_core.redact import TOKEN_PREFIXES

SECRET_PARAMETERS = (
    "code",
    "state",
    "error_description",
    "access_token",
    "token",
    "key",
    "api_key",
)


def _plain_or_escaped(char: str) -> str:
    """A pattern for ``char`` as it is, or as its ``%XX`` escape (either case)."""
    escape = "".join(f"[{d}{d.lower()}]" if d.isalpha() else d for d in f"{ord(char):02X}")
    return f"(?:{re.escape(char)}|%{escape})"


def _either_way(word: str) -> str:
    return "".join(_plain_or_escaped(c) for c in word)


# a parameter's name, plain or escaped, and an escaped "=" or more before its own
# (``token%3D=...``, which the service reads as a parameter named "token=")
_SECRET_VALUE = re.compile(
    rf"([?&;](?:{'|'.join(_either_way(p) for p in SECRET_PARAMETERS)})(?:%3D)*=)[^&;#\s\"]*",
    re.IGNORECASE,
)


# a runner's inbound webhook carries its token in the path
_TOKEN_PATH = re.compile(r"(/api/runners/webhooks/)[^/?#\s\"]+")


# A prefix (each character plain or escaped), then at least 8 characters of the
# token alphabet or escapes. It starts where no letter or digit comes before it,
# or right after an escape (``%3Drt_...``): ``sort_by=...`` is left alone.
_TOKEN_SHAPE = re.compile(
    r"(?:(?<![A-Za-z0-9])|(?<=%[0-9A-Fa-f]{2}))"
    + "(?:"
    + "|".join(_either_way(prefix) for prefix in TOKEN_PREFIXES)
    + r")(?:[A-Za-z0-9_-]|%[0-9A-Fa-f]{2}){8,}"
)
# a line holds a token only if it holds a prefix (its letters plain) or an escape:
# the pattern is not run on other lines
_HINTS = (*TOKEN_PREFIXES, "%")


def redact(text: str) -> str:
    """``/cb?code=abc&x=1`` -> ``/cb?code=REDACTED&x=1``;
    ``/api/runners/webhooks/rt_abc`` -> ``/api/runners/webhooks/REDACTED``;
    ``/x?token%3D=rt_abcdefgh...`` -> ``/x?token%3D=REDACTED``."""
    if "/webhooks/" in text:
        text = _TOKEN_PATH.sub(r"\1REDACTED", text)
    if any(hint in text for hint in _HINTS):
        text = _TOKEN_SHAPE.sub("REDACTED", text)
    return _SECRET_VALUE.sub(r"\1REDACTED", text) if "=" in text else text


def _may_hold_secret(text: str) -> bool:
    return "=" in text or "/webhooks/" in text or any(hint in text for hint in _HINTS)


class RedactQuerySecrets(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(
            isinstance(a, str) and _may_hold_secret(a) for a in record.args
        ):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        elif isinstance(record.msg, str) and not record.args:
            record.msg = redact(record.msg)
        return True


_FILTER = RedactQuerySecrets()


def redact_access_log() -> None:
    """Install the filter (once: installing it again changes nothing)."""
    logging.getLogger("uvicorn.access").addFilter(_FILTER)
