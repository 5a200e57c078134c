"""A run's statuses, and the groups of them the package reasons about, defined once.

Plain values with no model behind them, so the wire and run layers can name a status without
loading the models (``models.JobRun`` stores them; it imports them from here).
"""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class RunStatus(models.TextChoices):
    RUNNING = "running", _("running")
    SUCCEEDED = "succeeded", _("succeeded")
    FAILED = "failed", _("failed")
    SKIPPED_LOCKED = "skipped_locked", _("skipped: locked by another process")
    SKIPPED_TICK = "skipped_tick", _("skipped: already ran this tick")
    INTERRUPTED = "interrupted", _("interrupted")
    LOCK_LOST = "lock_lost", _("lock lost")
    TIMED_OUT = "timed_out", _("timed out")
    SKIPPED_PAUSED = "skipped_paused", _("skipped: paused")
    SKIPPED_CALENDAR = "skipped_calendar", _("skipped: calendar")
    #: A tick that found its job busy, kept to start when the run going ends (overlap
    #: buffer_one, buffer_all): no run yet, nobody's, and no lease.
    WAITING = "waiting", _("waiting: starts when the run going ends")


#: Statuses that take a tick: a second run of the same tick is refused while one of these exists.
#: An interrupted run gives its tick back, so the next holder of the lock may run it again.
TICK_TAKING = (
    RunStatus.RUNNING,
    RunStatus.SUCCEEDED,
    RunStatus.FAILED,
    RunStatus.LOCK_LOST,
    RunStatus.TIMED_OUT,
)

#: Rows recorded for a run that did not start: the lock was held, the tick had run, the job
#: was paused, or its calendar skips the tick's day; or, not yet, its tick waits for the run
#: going to end (overlap buffer_one, buffer_all). The history's pages and charts show runs
#: without them.
SKIPS = (
    RunStatus.SKIPPED_LOCKED,
    RunStatus.SKIPPED_TICK,
    RunStatus.SKIPPED_PAUSED,
    RunStatus.SKIPPED_CALENDAR,
    RunStatus.WAITING,
)

#: Runs that ended without their job's success and took their tick (nobody runs it again): a
#: job whose last run is one of these is failing. An interrupted run is not: its tick is given
#: back and runs again.
FAILING = (RunStatus.FAILED, RunStatus.LOCK_LOST, RunStatus.TIMED_OUT)
