"""Which ticks a late delivery runs: the ``CATCH_UP`` policy, judged on the database clock.

A delivery (from django-q2 today, from any other scheduler tomorrow) names the tick it was
meant for. It is *on time* while no later tick of the job has passed; then it runs just that
tick. Otherwise it is a catch-up, and ``ticks_to_run()`` splits the ticks missed since into
those to run and those passed over, by the policy:

* ``"latest"`` runs the most recent passed tick once;
* ``"all"`` runs the missed ticks in order (the most recent ``MAX_CATCH_UP``);
* ``"none"`` runs nothing.

Nothing here knows about django-q2; the policy is read by the caller from
``app_settings.CATCH_UP``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import connections

from . import sql

if TYPE_CHECKING:
    from .jobs import Job

#: At most this many missed ticks are run (``"all"``) or listed as passed over.
MAX_CATCH_UP = 64


def database_now(alias: str) -> datetime:
    """The database server's clock: ticks are judged on it, never on a host's clock."""
    text, params = sql.database_now()
    with connections[alias].cursor() as cursor:
        cursor.execute(text, params)
        row = cursor.fetchone()
    assert row is not None
    now: datetime = row[0]
    return now


def ticks_to_run(
    job: Job[Any, Any], tick: datetime, now: datetime, policy: str
) -> tuple[list[datetime], list[datetime]]:
    """Split the missed ticks from ``tick`` up to ``now`` into (to run, passed over).

    A delivery is on time when no later tick of the job has passed yet; then only ``tick``
    runs. A late delivery (the clusters were down, or the queue was backed up) is a catch-up:
    ``"latest"`` runs the most recent passed tick once, ``"all"`` runs the missed ticks in
    order (the most recent ``MAX_CATCH_UP``), ``"none"`` runs nothing.
    """
    schedule = job.schedule
    assert schedule is not None
    latest = schedule.previous_tick(now)
    if latest <= tick:
        return [tick], []
    missed = [latest]
    while len(missed) < MAX_CATCH_UP:
        earlier = schedule.previous_tick(missed[-1] - timedelta(microseconds=1))
        if earlier < tick:
            break
        missed.append(earlier)
    missed.reverse()
    if policy == "all":
        return missed, []
    if policy == "none":
        return [], missed
    return [latest], missed[:-1]
