"""The statements of the read side (health, metrics, run charts, failure streaks, the
timeline): each a function returning its named statement of ``queries.sql`` and its
parameters, as [sql][django_advisory_cron.db.sql] does for the run path. They read the history
and write nothing; the cost of each follows the jobs and the window it shows, not the size of
the history (the indexes each walks are named in ``queries.sql``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from .queries import QUERIES
from .sql import Statement

#: The columns of a run row the read side loads (everything but the lease and task fields).
# fmt: off
RUN_COLUMNS = (
    "id", "job", "tick", "host", "pid", "started", "finished", "status", "error", "manual",
)
#: The columns of a job's state row the read side loads (all of them).
STATE_COLUMNS = (
    "job", "paused", "paused_at", "paused_until", "paused_by", "reason",
    "run_requested", "run_requested_by", "changed", "schedule_reset",
)
# fmt: on


def job_summaries(
    jobs: list[str],
    *,
    skips: list[str],
    since: datetime | None,
    late_bounds: list[float],
    targets: Sequence[str],
    prefix: str | None = None,
) -> Statement:
    """For each job in ``jobs``, in one statement: its last run that was not a skip, the
    start of its last success, and (with ``since``) its runs per status started since then
    and how late they started. Each row is the job name, the last run's ``RUN_COLUMNS``
    (NULLs when it never ran), the last success, a JSON object of counts as text, the
    lateness: a JSON object giving, per number of ``late_bounds`` (ascending) a run's
    lateness is at or below, how many runs, and their lateness in seconds summed (NULLs
    without ``since``), and, for the jobs among ``targets`` (the others' are NULLs), the tick
    and start of the last run that had a tick; then the job's state row (``STATE_COLUMNS``,
    NULLs without one) and, with ``prefix``, on one row (the others' are NULLs), the live
    workers (sessions whose ``application_name`` starts with it), oldest first, as three
    arrays: names, session starts, client addresses. The cost follows the number of jobs and
    the runs inside the window, not the history's size (the indexes it walks:
    ``queries.sql``)."""
    params = {
        "jobs": list(jobs),
        "skips": list(skips),
        "since": since,
        "late_bounds": [-bound for bound in reversed(late_bounds)],
        "targets": list(targets),
        "prefix": prefix,
    }
    return QUERIES["job_summaries"], params


def recent_runs(jobs: list[str], *, skips: list[str], limit: int) -> Statement:
    """The last ``limit`` runs of each job that were not skips, job by job in the order of
    ``jobs``, newest first within a job:
    ``(job, tick, host, pid, status, seconds)``, the tick in seconds since the epoch and the
    seconds it ran (so far, for a running one, never below 0) computed here, so a page of run
    charts converts no times but the ticks it shows."""
    return QUERIES["recent_runs"], {"jobs": list(jobs), "skips": list(skips), "limit": limit}


def timeline_runs(
    jobs: list[str],
    *,
    span: timedelta,
    ahead: timedelta,
    ends: datetime | None,
    skips: list[str],
    limit: int,
) -> Statement:
    """The timeline's window (``span`` long, ending at ``ends`` or ``ahead`` of the database's
    now) and, for each of ``jobs``, its pause and its runs in the window (its ``limit`` newest,
    in no order): ``(now, starts, ends, job, paused, paused_until, id, tick, started,
    finished, status, manual, attempts, host, backfill)``, every time but ``paused_until`` in
    seconds since the epoch."""
    return QUERIES["timeline_runs"], {
        "jobs": list(jobs),
        "span": span,
        "ahead": ahead,
        "ends": ends,
        "skips": list(skips),
        "limit": limit,
    }


def failures_in_a_row(*, job: str, run_id: int, failing: list[str], limit: int | None) -> Statement:
    """How many runs of ``job`` ended in one of ``failing`` since its last success before its
    run ``run_id``, that run included, counted up to ``limit`` (``None``: all). Two ranges of
    ``(job, status, started, id)``: one row for the last success, then the failures since it,
    so the cost follows the streak (about 1 ms per 1,000 failures), not the history. Runs
    started after the run do not count, so the answer does not depend on when it is read."""
    params = {"job": job, "run_id": run_id, "failing": failing, "limit": limit}
    return QUERIES["failures_in_a_row"], params
