"""Secrets out of what a stored trace keeps (tool arguments and results, a model
call's text): known values (the turn's own key) and the shapes credentials take.

The service's own secrets never reach a span by construction (no key, token or
credential is an attribute or a payload). What can carry one is content from
outside: a tool result echoing a header, a model repeating a token a user pasted.
So the text is scanned for the usual shapes (bearer tokens, provider and cloud keys,
JSON Web Tokens, private key blocks, values of fields named like secrets) and each
is replaced with ``[REDACTED]``. It works on JSON text: what it replaces never holds
a quote or a backslash, so the JSON stays valid.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["REDACTED", "redact"]

REDACTED = "[REDACTED]"

# Values of JSON fields (or query and form fields) whose names say secret.
_NAMED = re.compile(
    r"""(?ix)
    ("(?:[a-z0-9_-]*?(?:password|passwd|secret|api[_-]?key|apikey|access[_-]?token
        |refresh[_-]?token|id[_-]?token|auth[_-]?token|client[_-]?secret|private[_-]?key
        |authorization|cookie|session[_-]?token|x-api-key))"\s*:\s*)
    "(?:[^"\\]|\\.)*"
    """
)
# Shapes of credentials wherever they are.
_SHAPES = re.compile(
    r"""(?x)
      (?i:bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}
    | \beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}   # JWT
    | \b(?:sk|pk|rk)-(?:[a-z]+-)?[A-Za-z0-9_-]{16,}                  # provider keys
    | \bask_[A-Za-z0-9_]{16,}                                        # this service's keys
    | \b(?:AKIA|ASIA)[0-9A-Z]{16}\b                                  # AWS access key ids
    | \bgh[pousr]_[A-Za-z0-9]{30,}                                   # GitHub tokens
    | \bgithub_pat_[A-Za-z0-9_]{30,}
    | \bxox[abprs]-[A-Za-z0-9-]{10,}                                 # Slack tokens
    | \bAIza[0-9A-Za-z_-]{30,}                                       # Google API keys
    | -----BEGIN[A-Z ]*PRIVATE\ KEY-----.*?-----END[A-Z ]*PRIVATE\ KEY-----
    | (?i:(?:password|passwd|secret|token|api_?key)=)[^\s&"\\]{4,}    # query or form
    """,
    re.DOTALL,
)
_MIN_KNOWN = 8  # shorter known values would match by chance


def redact(text: str, known: Iterable[str] = ()) -> str:
    """``text`` with every known value and every credential-shaped part replaced."""
    for value in known:
        if len(value) >= _MIN_KNOWN and value in text:
            text = text.replace(value, REDACTED)
    if '"' in text:
        text = _NAMED.sub(lambda m: f'{m.group(1)}"{REDACTED}"', text)
    return _SHAPES.sub(REDACTED, text)
