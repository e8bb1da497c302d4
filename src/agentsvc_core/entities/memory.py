"""Memories: short facts an agent keeps, in a scope (docs/memory.md).

A memory belongs to an agent and to one scope: ``agent`` (every conversation of
the agent; ``scope_id`` is ``None``), ``thread`` (one conversation; ``scope_id``
is its id) or ``user`` (one end user; ``scope_id`` is the user id). Only
``active`` memories are searched; a memory replaced by a newer one with the same
``key`` in the same scope is ``superseded`` (kept, ``superseded_by`` names the
newer one).
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from typing import Literal, get_args
from uuid import UUID

import msgspec

__all__ = [
    "MEMORY_SCOPES",
    "MEMORY_STATUSES",
    "Memory",
    "MemoryScope",
    "MemoryStatus",
    "fingerprint",
    "words",
]

MemoryScope = Literal["agent", "thread", "user"]
MemoryStatus = Literal["active", "superseded"]
MEMORY_SCOPES: tuple[MemoryScope, ...] = get_args(MemoryScope)
MEMORY_STATUSES: tuple[MemoryStatus, ...] = get_args(MemoryStatus)

_WORD = re.compile(r"\w+")


class Memory(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    org_id: str
    agent_id: UUID
    scope: MemoryScope
    scope_id: str | None  # the thread id or the user id; None for the agent scope
    content: str
    key: str | None = None  # a short subject ("tea"): a new fact of the same key replaces it
    status: MemoryStatus = "active"
    superseded_by: UUID | None = None
    created_at: datetime
    updated_at: datetime


def fingerprint(content: str) -> str:
    """Two facts are the same when their texts are, case and spacing aside."""
    normal = " ".join(content.casefold().split())
    return hashlib.sha256(normal.encode()).hexdigest()


def words(text: str) -> list[str]:
    """The words of a text, lowercased, each once, in order (a search's terms)."""
    return list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
