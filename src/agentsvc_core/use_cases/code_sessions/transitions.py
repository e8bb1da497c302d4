"""The pure rules of a code session's life: state (and what happened) in, the new
state and the timeline's events out, or None when the change does not apply to
the session as it is. The store applies them atomically (``CodeSessionStore.change``);
the job (``engine``) and the routes (``sessions``) only choose which.

    pending -> creating -> running <-> awaiting_input
                  |           |              |
                  +-----------+--------------+--> finished | error | cancelled
                                             +--> expired (waited past the limit)
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import msgspec

from agentsvc_core.entities.code_session import (
    ENDED,
    CodeSession,
    SessionStatus,
    SessionUsage,
    Turn,
)
from agentsvc_core.ports.code_sessions import NewEvent

__all__ = [
    "Outcome",
    "archived",
    "cancel_asked",
    "ended",
    "expired",
    "followed_up",
    "leased",
    "moved",
    "recorded",
    "released",
    "waiting",
]

Outcome = tuple[CodeSession, Sequence[NewEvent]] | None


def _status(status: SessionStatus, error: str | None = None) -> NewEvent:
    data: dict[str, Any] = {"status": status}
    if error is not None:
        data["error"] = error
    return NewEvent("status", data)


def moved(
    s: CodeSession,
    to: SessionStatus,
    now: datetime,
    *,
    frm: tuple[SessionStatus, ...],
    **work: Any,
) -> Outcome:
    """``s`` moved to ``to`` (from one of ``frm`` only), with ``work`` changed."""
    if s.status not in frm:
        return None
    changed = msgspec.structs.replace(s.work, **work)
    if to == "running" and changed.started_at is None:
        changed = msgspec.structs.replace(changed, started_at=now)
    if to == "awaiting_input":
        changed = msgspec.structs.replace(changed, waiting_since=now)
    return msgspec.structs.replace(s, status=to, work=changed, updated_at=now), [_status(to)]


def ended(
    s: CodeSession,
    to: SessionStatus,
    now: datetime,
    *,
    error: str | None = None,
    events: Sequence[NewEvent] = (),
) -> Outcome:
    """The session ended (``to`` is one of ``ENDED``); nothing when it had."""
    assert to in ENDED
    if s.ended:
        return None
    work = msgspec.structs.replace(
        s.work, ended_at=now, inflight=None, lease_until=None, lease_owner=None
    )
    return msgspec.structs.replace(s, status=to, error=error, work=work, updated_at=now), [
        *events,
        _status(to, error),
    ]


def recorded(
    s: CodeSession,
    now: datetime,
    events: Sequence[NewEvent],
    *,
    turns: Sequence[Turn] = (),
    usage: SessionUsage | None = None,
    **work: Any,
) -> Outcome:
    """What a step did, written before the next acts on it: ``turns`` added to the
    transcript, ``usage`` added to the session's, ``work`` changed. Nothing on an
    ended session (a cancel won the race: its writes stand)."""
    if s.ended:
        return None
    changed = msgspec.structs.replace(s.work, transcript=(*s.work.transcript, *turns), **work)
    total = s.usage
    if usage is not None:
        total = SessionUsage(
            tokens=total.tokens + usage.tokens,
            cost_usd=round(total.cost_usd + usage.cost_usd, 6),
            input_tokens=total.input_tokens + usage.input_tokens,
            output_tokens=total.output_tokens + usage.output_tokens,
        )
    return msgspec.structs.replace(s, work=changed, usage=total, updated_at=now), list(events)


def followed_up(s: CodeSession, content: str, now: datetime) -> Outcome:
    """A follow-up from the user: queued for the model (the job gives it at its
    next step, or as the answer to its question). None on an ended session."""
    if s.ended:
        return None
    work = msgspec.structs.replace(s.work, queued=(*s.work.queued, content))
    event = NewEvent("message", {"role": "user", "content": content})
    return msgspec.structs.replace(s, work=work, updated_at=now), [event]


def cancel_asked(s: CodeSession, now: datetime) -> Outcome:
    """A cancel: a session no job works on (``pending``, ``awaiting_input``) ends at
    once; one a job works on is flagged, and the job stops at its next check
    (between steps, and while a command runs). Nothing on an ended session, or
    one already flagged (a cancel is idempotent)."""
    if s.ended or s.work.cancel_requested:
        return None
    if s.status in ("pending", "awaiting_input"):
        return ended(s, "cancelled", now)
    work = msgspec.structs.replace(s.work, cancel_requested=True)
    return msgspec.structs.replace(s, work=work, updated_at=now), [
        NewEvent("notice", {"text": "cancel requested"})
    ]


def waiting(s: CodeSession, now: datetime) -> Outcome:
    """The model asked the user something: ``awaiting_input``, unless a follow-up
    is already queued (then the job answers with it and goes on: None)."""
    if s.work.queued or s.status != "running":
        return None
    return moved(s, "awaiting_input", now, frm=("running",))


def expired(s: CodeSession, now: datetime, limit: timedelta) -> Outcome:
    """A session still waiting for its user ``limit`` after it began to wait."""
    since = s.work.waiting_since
    if s.status != "awaiting_input" or since is None or now < since + limit:
        return None
    return ended(s, "expired", now, error=f"no answer within {int(limit.total_seconds())} s")


def leased(s: CodeSession, owner: str, now: datetime, until: datetime) -> Outcome:
    """A job takes (or renews) the session until ``until``: refused while another
    job's lease runs (a killed process's lease runs out)."""
    held = s.work.lease_until
    if s.work.lease_owner not in (None, owner) and held is not None and held > now:
        return None
    work = msgspec.structs.replace(s.work, lease_owner=owner, lease_until=until)
    return msgspec.structs.replace(s, work=work), []


def released(s: CodeSession, owner: str) -> Outcome:
    if s.work.lease_owner != owner:
        return None
    work = msgspec.structs.replace(s.work, lease_owner=None, lease_until=None)
    return msgspec.structs.replace(s, work=work), []


def archived(s: CodeSession, now: datetime) -> Outcome:
    """Archived: the stored key goes (the sandbox is the caller's to destroy); a
    session no job works on is cancelled first. None for a session a job works
    on (``creating``, ``running``: cancel it first) or one archived already."""
    if s.archived or s.status in ("creating", "running"):
        return None
    events: list[NewEvent] = []
    if not s.ended:
        went = ended(s, "cancelled", now)
        assert went is not None
        s, events = went[0], list(went[1])
    work = msgspec.structs.replace(s.work, credential_sealed=None, sandbox_gone=True)
    events.append(NewEvent("notice", {"text": "archived: the sandbox and the stored key are gone"}))
    return msgspec.structs.replace(s, archived=True, work=work, updated_at=now), events
