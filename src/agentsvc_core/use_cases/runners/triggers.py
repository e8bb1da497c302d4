"""What starts runs: triggers as written, their tokens, and cron schedules (a
schedule's next tick in its time zone, the least interval allowed). Nothing here
does I/O; ``Runners`` (definitions.py) stores what these check."""

from __future__ import annotations

import hashlib
import itertools
import secrets
from datetime import UTC, datetime
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec
from cronsim import CronSim, CronSimError
from msgspec import UNSET, UnsetType

from agentsvc_core.entities.runner import Catchup, Overlap, Trigger, TriggerKind
from agentsvc_core.errors import InvalidInput
from agentsvc_core.rules import MAX_NAME, check_text

__all__ = [
    "MAX_INPUT_BYTES",
    "MAX_TRIGGERS",
    "TriggerChanges",
    "TriggerDraft",
    "check_cron",
    "check_input",
    "checked_trigger",
    "new_token",
    "next_tick",
    "token_hash",
]

MAX_TRIGGERS = 50
MAX_INPUT_BYTES = 256 * 1024
TOKEN_BYTES = 24  # 192 bits
_enc = msgspec.json.Encoder()


class TriggerDraft(msgspec.Struct, frozen=True, kw_only=True):
    kind: TriggerKind
    name: str = ""
    enabled: bool = True
    input: dict[str, Any] = {}
    cron: str | None = None
    timezone: str = "UTC"
    overlap: Overlap = "skip"
    catchup: Catchup = "none"
    end_at: datetime | None = None
    # an agent's scheduled task
    prompt: str | None = None
    thread_id: UUID | None = None


class TriggerChanges(msgspec.Struct, frozen=True, kw_only=True):
    name: str | UnsetType = UNSET
    enabled: bool | UnsetType = UNSET
    input: dict[str, Any] | UnsetType = UNSET
    cron: str | UnsetType = UNSET
    timezone: str | UnsetType = UNSET
    overlap: Overlap | UnsetType = UNSET
    catchup: Catchup | UnsetType = UNSET
    end_at: datetime | UnsetType | None = UNSET
    prompt: str | UnsetType = UNSET
    thread_id: UUID | UnsetType | None = UNSET


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def new_token() -> str:
    """A webhook or button trigger's token (shown once; only its hash is kept)."""
    return f"rt_{secrets.token_urlsafe(TOKEN_BYTES)}"


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidInput("timezone", f"{name!r} is not an IANA time zone") from None


def next_tick(cron: str, timezone: str, after: datetime) -> datetime:
    """The first tick of ``cron`` in ``timezone`` strictly after ``after`` (UTC)."""
    local = after.astimezone(_zone(timezone))
    return next(CronSim(cron, local)).astimezone(UTC)


def check_cron(cron: str, timezone: str, min_interval_s: float, now: datetime) -> None:
    check_text("cron", cron, max_len=200, required=True)
    zone = _zone(timezone)
    try:
        it = CronSim(cron, now.astimezone(zone))
        ticks = [next(it) for _ in range(4)]
    except (CronSimError, StopIteration) as exc:
        raise InvalidInput("cron", f"not a cron expression: {exc}") from None
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(ticks)]
    if gaps and min(gaps) < min_interval_s:
        raise InvalidInput(
            "cron",
            f"fires every {min(gaps):g} s; the least interval allowed is {min_interval_s:g} s"
            " (AGENTSVC_CRON_MIN_INTERVAL_S)",
        )


def check_input(field: str, value: dict[str, Any]) -> None:
    if len(_enc.encode(value)) > MAX_INPUT_BYTES:
        raise InvalidInput(field, f"at most {MAX_INPUT_BYTES} bytes of JSON")


def checked_trigger(t: Trigger, now: datetime, min_interval_s: float) -> Trigger:
    """The trigger checked, its ``next_fire_at`` the schedule's next tick (None:
    not a cron trigger, disabled, or past its ``end_at``)."""
    check_text("name", t.name, max_len=MAX_NAME)
    check_input("input", t.input)
    if t.kind != "cron":
        if t.cron is not None:
            raise InvalidInput("cron", "only a cron trigger has a schedule")
        return t
    if t.cron is None:
        raise InvalidInput("cron", "a cron trigger has a cron expression")
    check_cron(t.cron, t.timezone, min_interval_s, now)
    if t.end_at is not None and t.end_at.tzinfo is None:
        raise InvalidInput("end_at", "must carry a time zone (ISO 8601 with an offset or Z)")
    nxt = next_tick(t.cron, t.timezone, now) if t.enabled else None
    if nxt is not None and t.end_at is not None and nxt > t.end_at:
        nxt = None
    return msgspec.structs.replace(t, next_fire_at=nxt)
