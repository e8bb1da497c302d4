"""Which processes are alive: each holds a session advisory lock on its own id.

A process draws a random id when it builds its storage (``new_owner``); every run
it begins records it (``runs.owner``), and its stop bus's listening connection,
which lives as long as the process, holds a session advisory lock on it (``LOCK``).
PostgreSQL drops a session's locks the moment its connection ends, so a process
that crashed or was killed holds none: a running run whose owner's lock nobody
holds (``ORPHANED``) belongs to a process that is gone, and can be marked
interrupted at once instead of after the heartbeat's stale limit.

The listening connection reconnects when it drops; until it has, its process
looks gone too. That only matters to a stop or a sweep in that moment, and a
stop would have missed the process anyway (it travels on that connection).
"""

from __future__ import annotations

import secrets

# pg_try_advisory_lock: ids are 63 random bits, so another holder is all but
# impossible, and a lock that waited would stall the listener for good
LOCK = "SELECT pg_try_advisory_lock(%s)"

# a condition on ``runs``: it has an owner, and no session of this database holds
# that owner's lock (a one-key advisory lock shows its key as classid, objid, and
# objsubid 1)
ORPHANED = (
    "owner IS NOT NULL AND owner NOT IN (SELECT (l.classid::bigint << 32) | l.objid::bigint"
    " FROM pg_locks l WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted"
    " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))"
)


def new_owner() -> int:
    """A process's id: 63 random bits, so a non-negative bigint."""
    return secrets.randbits(63)
