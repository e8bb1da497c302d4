"""Invariants of the domain's values, checked before anything reaches storage.

The domain decides what text is acceptable, not the database: PostgreSQL refuses
NUL characters in ``text``, so the core refuses them for every adapter alike.
Bounds are public constants so the web layer can publish the same numbers in its
OpenAPI schema.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import msgspec

from agentsvc_core.entities import RUNTIME_PROVIDERS, Agent, ToolProfile
from agentsvc_core.errors import InvalidInput

__all__ = [
    "DEFAULT_APPROVAL_TIMEOUT_MINUTES",
    "HEADER_NAME",
    "MAX_APPROVAL_TIMEOUT_MINUTES",
    "MAX_BINDINGS",
    "MAX_BINDINGS_BYTES",
    "MAX_CLIENT_TOOLS",
    "MAX_CONTENT",
    "MAX_DESCRIPTION",
    "MAX_KEY_NAME",
    "MAX_METADATA_KEY",
    "MAX_METADATA_KEYS",
    "MAX_METADATA_VALUE",
    "MAX_MODEL_ID",
    "MAX_NAME",
    "MAX_OFFSET",
    "MAX_ORG_ID",
    "MAX_PREAMBLE",
    "MAX_PROFILES",
    "MAX_PROFILE_NAME",
    "MAX_PROFILE_TOOLS",
    "MAX_TITLE",
    "MAX_TOOL_NAME",
    "MAX_USER_ID",
    "MIN_APPROVAL_TIMEOUT_MINUTES",
    "_check_profiles",
    "check_agent",
    "check_bindings",
    "check_embed_domain",
    "check_header",
    "check_metadata",
    "check_model_id",
    "check_org_id",
    "check_text",
    "check_url_text",
    "join_overlay",
]

MAX_NAME = 256
MAX_DESCRIPTION = 10_000
MAX_PREAMBLE = 200_000
MAX_MODEL_ID = 200
MAX_ORG_ID = 128
MAX_KEY_NAME = 256
MAX_PROFILES = 100
MAX_PROFILE_NAME = 64
MAX_PROFILE_TOOLS = 500
MAX_TOOL_NAME = 200
MAX_TITLE = 1000
MAX_METADATA_KEYS = 64
MAX_METADATA_KEY = 128
MAX_METADATA_VALUE = 2048
MAX_BINDINGS = 100
MAX_BINDINGS_BYTES = 64 * 1024
MAX_CONTENT = 1_000_000
MAX_USER_ID = 256
MAX_CLIENT_TOOLS = 128
MAX_OFFSET = 1_000_000_000  # history offsets (PostgreSQL's OFFSET is a bigint)

# Model ids: "claude-sonnet-4-5", "beta:gpt-4o", "meta-llama/Llama-3.1-8B", "local".
_MODEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]*")
_ORG_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# RFC 7230 section 3.2.6: a header name is a token
HEADER_NAME = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_TOKEN = re.compile(HEADER_NAME)
# one label of a host name, in its ASCII (IDNA) form
_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")
MAX_HOST = 253


def check_text(field: str, value: str, *, max_len: int, required: bool = False) -> str:
    """Refuse NUL characters, overlong values and (when required) blank values."""
    if "\x00" in value:
        raise InvalidInput(field, "must not contain NUL characters")
    if len(value) > max_len:
        raise InvalidInput(field, f"must be at most {max_len} characters")
    if required and not value.strip():
        raise InvalidInput(field, "must not be empty")
    return value


def check_url_text(field: str, value: str) -> str:
    """A URL has no whitespace or control character anywhere: such a URL is a typo
    at best, and at worst splits or smuggles a request line once it is sent."""
    if any(c.isspace() or unicodedata.category(c) == "Cc" for c in value):
        raise InvalidInput(field, "must not contain spaces or control characters")
    return value


def check_header(field: str, name: str, value: str) -> None:
    """An outbound header the service will send as configured: the name is an RFC
    7230 token; the value has no control character but tab (CR and LF would start
    another header, NUL cuts it). Neither is repeated in the refusal: values are
    credentials."""
    if not _TOKEN.fullmatch(name):
        raise InvalidInput(
            field, "header names must be RFC 7230 tokens (letters, digits and !#$%&'*+-.^_`|~)"
        )
    if any(c != "\t" and unicodedata.category(c) == "Cc" for c in value):
        raise InvalidInput(f"{field}.{name}", "must not contain CR, LF, NUL or other controls")


def check_embed_domain(field: str, value: str) -> str:
    """A host name that may embed the service: ``example.com``, ``*.example.com``,
    ``localhost:3000``, ``bücher.example``; no scheme, path, space or address list."""
    host, _, port = value.partition(":") if value.count(":") == 1 else (value, "", "")
    if host.startswith("*."):
        host = host[2:]
    try:
        ascii_host = host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        ascii_host = ""
    labels_ok = all(_LABEL.fullmatch(label) for label in ascii_host.split("."))
    port_ok = not port or (port.isascii() and port.isdigit() and 0 < int(port) < 65536)
    if not (ascii_host and len(ascii_host) <= MAX_HOST and labels_ok and port_ok):
        raise InvalidInput(
            field, "must be host names, optionally with a leading '*.' and a ':port'"
        )
    return value


def check_model_id(field: str, value: str) -> str:
    if len(value) > MAX_MODEL_ID or not _MODEL_ID.fullmatch(value):
        raise InvalidInput(
            field,
            f"must be a model id of at most {MAX_MODEL_ID} characters "
            "(letters, digits and . _ : / @ + -)",
        )
    return value


def check_org_id(field: str, value: str) -> str:
    if len(value) > MAX_ORG_ID or not _ORG_ID.fullmatch(value):
        raise InvalidInput(
            field,
            f"must be 1-{MAX_ORG_ID} characters of letters, digits, '.', '_' or '-'",
        )
    return value


def _check_profiles(profiles: dict[str, ToolProfile]) -> None:
    if len(profiles) > MAX_PROFILES:
        raise InvalidInput("tool_profiles", f"at most {MAX_PROFILES} profiles")
    for name, profile in profiles.items():
        check_text("tool_profiles", name, max_len=MAX_PROFILE_NAME, required=True)
        field = f"tool_profiles.{name}"
        check_text(f"{field}.description", profile.description, max_len=MAX_DESCRIPTION)
        if len(profile.tools) > MAX_PROFILE_TOOLS:
            raise InvalidInput(f"{field}.tools", f"at most {MAX_PROFILE_TOOLS} tools")
        for tool in profile.tools:
            check_text(f"{field}.tools", tool, max_len=MAX_TOOL_NAME, required=True)


def check_metadata(field: str, metadata: dict[str, str]) -> dict[str, str]:
    if len(metadata) > MAX_METADATA_KEYS:
        raise InvalidInput(field, f"at most {MAX_METADATA_KEYS} keys")
    for key, value in metadata.items():
        check_text(field, key, max_len=MAX_METADATA_KEY, required=True)
        check_text(f"{field}.{key}", value, max_len=MAX_METADATA_VALUE)
    return metadata


def check_bindings(field: str, bindings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if len(bindings) > MAX_BINDINGS:
        raise InvalidInput(field, f"at most {MAX_BINDINGS} entries")
    encoded = msgspec.json.encode(bindings)
    if len(encoded) > MAX_BINDINGS_BYTES:
        raise InvalidInput(field, f"at most {MAX_BINDINGS_BYTES} bytes of JSON")
    if _holds_nul(bindings):
        raise InvalidInput(field, "must not contain NUL characters")
    return bindings


def _holds_nul(value: object) -> bool:
    """A NUL in any key or text of a JSON value (not the six characters ``\\u0000``,
    which are harmless text; bounded in depth and size by the checks before it)."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_nul(v) for v in value)
    return False


def join_overlay(overlay: str | list[str] | None) -> str | None:
    """A thread or message overlay: arrays are joined with a blank line."""
    if overlay is None:
        return None
    return overlay if isinstance(overlay, str) else "\n\n".join(overlay)


# how long an agent's tool calls wait for a person's approval (minutes; docs/tools.md)
DEFAULT_APPROVAL_TIMEOUT_MINUTES = 60
MIN_APPROVAL_TIMEOUT_MINUTES = 1
MAX_APPROVAL_TIMEOUT_MINUTES = 7 * 24 * 60


def check_agent(agent: Agent) -> Agent:
    """Every invariant of an agent; run on create and after every change."""
    check_text("name", agent.name, max_len=MAX_NAME, required=True)
    check_text("description", agent.description, max_len=MAX_DESCRIPTION)
    check_text("stable_preamble", agent.stable_preamble, max_len=MAX_PREAMBLE)
    check_model_id("default_model", agent.default_model)
    if agent.tool_profiles is not None:
        _check_profiles(agent.tool_profiles)
    if agent.default_profile is not None and agent.default_profile not in (
        agent.tool_profiles or {}
    ):
        raise InvalidInput("default_profile", "must name one of the agent's toolProfiles")
    if agent.runtime_provider is not None and agent.runtime_provider not in RUNTIME_PROVIDERS:
        raise InvalidInput("runtime_provider", f"must be one of {', '.join(RUNTIME_PROVIDERS)}")
    if not (
        MIN_APPROVAL_TIMEOUT_MINUTES
        <= agent.approval_timeout_minutes
        <= MAX_APPROVAL_TIMEOUT_MINUTES
    ):
        raise InvalidInput(
            "approval_timeout_minutes",
            f"must be between {MIN_APPROVAL_TIMEOUT_MINUTES} and {MAX_APPROVAL_TIMEOUT_MINUTES}",
        )
    return agent
