"""Ticks that wait for their job's run going to end: ``overlap="buffer_one"`` and
``"buffer_all"``, leaderless.

A tick that finds its job busy (its lock held, or a run of it still alive) is recorded as a
row of its own, status ``waiting``, once per tick whichever replicas found it busy (a unique
index on the waiting rows' job and tick, and a transaction lock on the job's waiting key that
makes replicas record them one at a time, so the bound holds). A waiting row is nobody's run:
it has no lease, counts as no live run, and takes no tick. Whoever sees the job free next, the
process whose run just ended or any replica at the job's next tick, starts the oldest waiting
tick through the normal claim, so exactly one process runs it (the tick's unique run row), and
deletes its waiting row. A waiting tick whose replicas all died is started by the first
replica that runs the job again, once the dead run's lease has expired (as any claim treats a
dead run); it is never run twice, since its run is claimed like any other.
"""

from __future__ import annotations

import os
from datetime import datetime

from django.db import transaction

from ..core.keys import LockKey
from ..core.overlap import waiting_bound
from ..db import sql
from ..db.execute import fetch_one
from .history import HOST


def wait(
    alias: str, key: LockKey, *, job: str, tick: datetime, policy: str
) -> tuple[str, str] | None:
    """Record ``tick`` of ``job`` (whose lock is ``key``), which found the job busy, as
    waiting, or as skipped when its policy's bound is reached; ``(status, text)`` of the row
    written (or of the one another process wrote for it), ``None`` when the tick has run or
    is running."""
    with transaction.atomic(using=alias):
        fetch_one(alias, sql.lock_waiting(key.waiting_key()))
        row = fetch_one(
            alias,
            sql.wait_tick(
                job=job,
                tick=tick,
                policy=policy,
                bound=waiting_bound(policy),
                host=HOST,
                pid=os.getpid(),
            ),
        )
    return None if row is None else (str(row[0]), str(row[1]))


def oldest(alias: str, job: str, before: datetime | None = None) -> datetime | None:
    """The oldest tick of ``job`` still waiting (before ``before``, if given), or ``None``."""
    row = fetch_one(alias, sql.next_waiting(job=job, before=before))
    return None if row is None or row[0] is None else row[0]


def started(alias: str, job: str, tick: datetime) -> None:
    """The run of ``tick`` was claimed: its waiting row, if any, goes."""
    fetch_one(alias, sql.unwait_tick(job=job, tick=tick))
