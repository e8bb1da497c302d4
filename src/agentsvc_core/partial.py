"""Partial updates (PATCH and PUT bodies, and the core's ``...Changes`` structs): a
field left ``UNSET`` is not changed; ``None`` is a value (it clears a nullable one)."""

from __future__ import annotations

from collections.abc import Container
from typing import Any

import msgspec
from msgspec import UNSET

__all__ = ["given_fields"]


def given_fields(changes: msgspec.Struct, *, leave: Container[str] = ()) -> dict[str, Any]:
    """The fields ``changes`` supplied (those not ``UNSET``), by name, but for the
    ones in ``leave`` (which the caller handles itself)."""
    return {
        f: value
        for f in changes.__struct_fields__
        if f not in leave and (value := getattr(changes, f)) is not UNSET
    }
