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

__all__ = ["REDACTED", "TOKEN_PREFIXES", "redact"]

REDACTED = "[REDACTED]"

# This service's own credentials: API keys, runner trigger tokens and signing
# secrets, each a prefix and ``secrets.token_urlsafe`` (A-Z a-z 0-9 _ -). The web
# layer's access log finds them by these prefixes too (``agentsvc_web.access_log``).
TOKEN_PREFIXES = ("ask_", "rt_", "whsec_")

# Values of JSON fields (or query and form fields) whose names say secret.
_NAMED = re.compile(
    r"""(?ix)
    ("(?:[a-z0-9_-]*?(?:password|passwd|secret|api[_-]?key|apikey|access[_-]?token
        |refresh[_-]?token|id[_-]?token|auth[_-]?token|client[_-]?secret|private[_-]?key
        |authorization|cookie|token|credentials?|x-api-key))"\s*:\s*)
    "(?:[^"\\]|\\.)*"
    """
)
# Shapes of credentials wherever they are, each behind a literal its matches hold
# (looked for in the lowercased text first): text with none of them, the usual
# case, costs a few substring searches instead of a regular expression scan.
_SHAPES: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = tuple(
    (triggers, re.compile(pattern, re.DOTALL))
    for triggers, pattern in (
        (("bearer", "basic"), r"(?i:bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"),
        (("eyj",), r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"),  # JWT
        (("sk-", "pk-", "rk-"), r"\b(?:sk|pk|rk)-(?:[a-z]+-)?[A-Za-z0-9_-]{16,}"),  # provider keys
        (TOKEN_PREFIXES, r"\b(?:ask|rt|whsec)_[A-Za-z0-9_-]{16,}"),  # this service's own
        (("akia", "asia"), r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),  # AWS access key ids
        (
            ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
            r"\bgh[pousr]_[A-Za-z0-9]{30,}|\bgithub_pat_[A-Za-z0-9_]{30,}",
        ),
        (("xox",), r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),  # Slack tokens
        (("aiza",), r"\bAIza[0-9A-Za-z_-]{30,}"),  # Google API keys
        (
            ("private key-----",),
            r"-----BEGIN[A-Z ]*PRIVATE KEY-----.*?-----END[A-Z ]*PRIVATE KEY-----",
        ),
        (
            ("password=", "passwd=", "secret=", "token=", "apikey=", "api_key="),
            r"(?i:(?:password|passwd|secret|token|api_?key)=)[^\s&\"\\]{4,}",  # query or form
        ),
    )
)
# how the names ``_NAMED`` looks for end, with their closing quote (in the
# lowercased text)
_NAME_HINTS = (
    'password"',
    'passwd"',
    'secret"',
    'key"',
    'token"',
    'authorization"',
    'cookie"',
    'credential"',
    'credentials"',
)
_MIN_KNOWN = 8  # shorter known values would match by chance


def redact(text: str, known: Iterable[str] = ()) -> str:
    """``text`` with every known value and every credential-shaped part replaced."""
    for value in known:
        if len(value) >= _MIN_KNOWN and value in text:
            text = text.replace(value, REDACTED)
    lower = text.lower()
    if '"' in text and any(h in lower for h in _NAME_HINTS):
        text = _NAMED.sub(lambda m: f'{m.group(1)}"{REDACTED}"', text)
        lower = text.lower()
    for triggers, pattern in _SHAPES:
        if any(t in lower for t in triggers):
            text = pattern.sub(REDACTED, text)
    return text
