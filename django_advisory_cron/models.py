"""Run history: one row per run or recorded skip, with one run per (job, tick)."""

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


#: Statuses that take a tick: a second run of the same tick is refused while one of these exists.
#: An interrupted run gives its tick back, so the next holder of the lock may run it again.
TICK_TAKING = (RunStatus.RUNNING, RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.LOCK_LOST)


class JobRun(models.Model):
    job = models.CharField(_("job"), max_length=200)
    tick = models.DateTimeField(_("tick"), null=True, blank=True)
    host = models.CharField(_("host"), max_length=255)
    pid = models.PositiveIntegerField(_("pid"))
    started = models.DateTimeField(_("started"))
    finished = models.DateTimeField(_("finished"), null=True, blank=True)
    status = models.CharField(_("status"), max_length=20, choices=RunStatus.choices)
    error = models.TextField(_("error"), blank=True, default="")

    class Meta:
        verbose_name = _("job run")
        verbose_name_plural = _("job runs")
        ordering = ["-started", "-id"]
        indexes = [models.Index(fields=["job", "-started"], name="advisory_cron_job_started")]
        constraints = [
            models.UniqueConstraint(
                fields=["job", "tick"],
                condition=models.Q(status__in=[status.value for status in TICK_TAKING]),
                name="advisory_cron_one_run_per_tick",
            )
        ]

    def __str__(self) -> str:
        return f"{self.job} @ {self.tick or self.started}: {self.status}"

    @property
    def duration(self) -> float | None:
        """Seconds from start to finish, when finished."""
        if self.finished is None:
            return None
        return (self.finished - self.started).total_seconds()
