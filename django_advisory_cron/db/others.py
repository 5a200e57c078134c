"""The statements about a job's other runs, by its ``overlap`` policy and ``max_runs``: the
runs a new one replaces or asks to stop, the ticks that wait for the run going to end, and the
count of a job's runs. As in [sql][django_advisory_cron.db.sql], each function returns its
statement of ``queries.sql``, literal and named, and its parameters."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ..core.keys import LockKey
from ..core.text import storable
from .queries import QUERIES
from .sql import Statement, key_params, who_params


def replace_runs(
    key: LockKey,
    *,
    job: str,
    tick: datetime | None,
    host: str,
    pid: int,
    policy: str = "terminate_other",
    grace: float = 0,
) -> Statement:
    """``overlap="terminate_other"``: end the job's runs going for ticks before ``tick`` (their
    rows say they were replaced, their leases end) and, if any, terminate the backends holding
    ``key``; one row, the runs replaced and the backends terminated. With ``policy``
    ``"cancel_other"``: the runs asked to stop that still go after ``grace`` seconds (their
    rows say that too)."""
    return QUERIES["replace_runs"], {
        **key_params(key),
        "job": job,
        "tick": tick,
        "host": storable(host),
        "pid": pid,
        "policy": policy,
        "grace": f"{grace:g}",
    }


def request_cancel(*, job: str, tick: datetime | None, host: str, pid: int) -> Statement:
    """``overlap="cancel_other"``: ask the job's runs going for ticks before ``tick`` to stop
    (their rows carry the request); one row per run asked, its id."""
    return QUERIES["request_cancel"], {"job": job, "tick": tick, "host": storable(host), "pid": pid}


def runs_going(ids: Sequence[int]) -> Statement:
    """How many of the runs ``ids`` still go (running, their leases alive); one column."""
    return QUERIES["runs_going"], {"ids": list(ids)}


def lock_waiting(key: LockKey) -> Statement:
    """``overlap`` buffer_one and buffer_all: take the transaction lock ``key`` (the job's
    waiting key) that serialises the recording of its waiting ticks across replicas."""
    return QUERIES["lock_waiting"], key_params(key)


def wait_tick(
    *, job: str, tick: datetime, policy: str, bound: int, host: str, pid: int
) -> Statement:
    """Record ``tick``, which found its job busy, as waiting (at most ``bound`` wait), after
    ``lock_waiting`` in the same transaction; ``(status, text)`` of the row written (or of
    the one another process wrote), none when the tick has run or is running."""
    return QUERIES["wait_tick"], {
        **who_params(job, host, pid),
        "tick": tick,
        "policy": policy,
        "bound": bound,
    }


def next_waiting(*, job: str, before: datetime | None = None) -> Statement:
    """The job's oldest waiting tick no run has taken (before ``before``, if given); one
    column, NULL for none. Deletes the waiting rows of ticks a run has taken."""
    return QUERIES["next_waiting"], {"job": job, "before": before}


def unwait_tick(*, job: str, tick: datetime) -> Statement:
    """Delete the waiting row of ``tick``, whose run was just claimed."""
    return QUERIES["unwait_tick"], {"job": job, "tick": tick}


def ticked_runs(jobs: list[str], besides: int | None = None) -> Statement:
    """How many runs of its ticks each of ``jobs`` has had, but the run ``besides``: rows
    ``(job, count)``, what ``max_runs`` counts."""
    return QUERIES["ticked_runs"], {"jobs": list(jobs), "besides": besides}
