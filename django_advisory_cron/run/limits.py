"""``max_runs``: a schedule that ends after a number of runs of its ticks.

The runs are counted from the run history (the rows that take a tick), not kept in a counter:
nothing else is written, an operator who deletes runs gives them back, and the count is exact
where it matters. A worker reads the counts of its due jobs that have a limit before it claims
their ticks, and stops waking for a job that had its runs; that read can be one run behind
(another replica's run of the tick before may not have its row yet). The runner counts again
once it holds the job's lock and has claimed the tick: runs of one job are serialised by that
lock, so the rows of every earlier run are there, and a tick beyond the limit is recorded as a
skip and not run. ``max_runs=2`` on two replicas runs exactly twice.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.backends.base.base import BaseDatabaseWrapper

from ..db import sql
from ..db.execute import fetch_all


def runs_of(
    connection: BaseDatabaseWrapper | str, names: Iterable[str], besides: int | None = None
) -> dict[str, int]:
    """How many runs of its ticks each of ``names`` has had, in one statement (but the run
    ``besides``)."""
    names = list(names)
    if not names:
        return {}
    rows = fetch_all(connection, sql.ticked_runs(names, besides))
    return {job: int(count) for job, count in rows}


def ended(limit: int | None, runs: int) -> str:
    """Why a schedule with ``max_runs=limit`` that had ``runs`` is done, or ``""``."""
    if limit is None or runs < limit:
        return ""
    return f"after its max_runs={limit} runs"
