"""Reading advisory locks from ``pg_locks`` on the server: what tests assert against."""

from __future__ import annotations

from typing import Any

import psycopg

from django_advisory_cron.core.keys import LockKey

HELD_BY = (
    "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND mode = %s "
    "AND classid::bigint = %s AND objid::bigint = %s AND objsubid = %s ORDER BY pid"
)


def holders(
    observer: psycopg.Connection[Any], key: LockKey, mode: str = "ExclusiveLock"
) -> list[int]:
    """Backend pids holding ``key`` in ``mode``, read from ``pg_locks`` on the server."""
    ids = key.lock_ids
    assert ids is not None
    rows = observer.execute(HELD_BY, (mode, *ids)).fetchall()
    return [int(row[0]) for row in rows]
