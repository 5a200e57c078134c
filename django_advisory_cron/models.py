"""Run history: one row per run (and per skip, with ``RECORD_SKIPS``), with one run per (job,
tick)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, NoReturn

from django.db import models, transaction
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

# Re-exported: the models are where Django code looks for a model field's choices.
from .core.statuses import TICK_TAKING as TICK_TAKING
from .core.statuses import RunStatus as RunStatus

#: How the runner writes an attempt that failed and was retried, one line each before the
#: run's own error (``attempt 1: ConnectionError: ...``).
EARLIER_ATTEMPT = re.compile(r"attempt \d+: ")


class JobRunQuerySet(models.QuerySet["JobRun"]):
    """Run history queries; ``prune_jobruns`` is a thin wrapper around ``prune()``."""

    def prunable(self, older_than: datetime) -> JobRunQuerySet:
        """Runs started before ``older_than``, minus the rows the scheduling rules still read.

        Kept whatever their age:

        - rows whose body may still be running: ``running`` rows, and any row whose lease has
          not expired (a ``lock_lost`` run's body may go on until then);
        - each job's latest recorded tick, as the catch-up reads it
          (``sql.latest_recorded_ticks``): the row with the greatest tick among the statuses
          that take a tick (``TICK_TAKING``), and the latest started row that has a tick,
          whatever its status. Pruning them would make a worker's next start think the tick
          was missed, and run it again;
        - each job's latest success: the Jobs page and ``cronstatus`` need it to tell an
          overdue job from one that never ran.

        Those rows are found in the whole history (on this queryset's database), whatever
        filters this queryset has.
        """
        history = self.model._default_manager.using(self.db)
        latest_success = (
            history.filter(status=RunStatus.SUCCEEDED)
            .order_by("job", "-started", "-id")
            .distinct("job")
            .values("id")
        )
        greatest_taken_tick = (
            history.filter(status__in=TICK_TAKING, tick__isnull=False)
            .order_by("job", "-tick")
            .distinct("job")
            .values("id")
        )
        latest_with_tick = (
            history.filter(tick__isnull=False)
            .order_by("job", "-started", "-id")
            .distinct("job")
            .values("id")
        )
        return (
            self.filter(started__lt=older_than)
            .exclude(status=RunStatus.RUNNING)
            .exclude(lease_until__gte=Now())
            .exclude(id__in=latest_success)
            .exclude(id__in=greatest_taken_tick)
            .exclude(id__in=latest_with_tick)
        )

    def prune(self, older_than: datetime, batch_size: int = 1000) -> int:
        """Delete ``prunable()`` rows ``batch_size`` per transaction; return how many went.

        Small batches keep each transaction (and its row locks and WAL) short, so pruning a
        large history never blocks the runner.
        """
        alias = self.db
        total = 0
        while True:
            with transaction.atomic(using=alias):
                prunable = self.prunable(older_than).order_by("id")
                ids = list(prunable.values_list("id", flat=True)[:batch_size])
                if not ids:
                    return total
                self.model._default_manager.using(alias).filter(id__in=ids).delete()
            total += len(ids)


class JobRun(models.Model):
    job = models.CharField(_("job"), max_length=200)
    tick = models.DateTimeField(_("tick"), null=True, blank=True)
    host = models.CharField(_("host"), max_length=255)
    pid = models.PositiveIntegerField(_("pid"))
    started = models.DateTimeField(_("started"))
    finished = models.DateTimeField(_("finished"), null=True, blank=True)
    status = models.CharField(_("status"), max_length=20, choices=RunStatus.choices)
    error = models.TextField(_("error"), blank=True, default="")
    #: Until when a session-scoped run counts as alive without a heartbeat renewing it.
    #: Holding the job's lock does not prove an earlier holder stopped (its lock connection
    #: may have died while its body runs on), so a row whose lease has not expired keeps the
    #: job from starting again, whatever its status: a ``lock_lost`` row keeps the lease it
    #: had (no longer renewed) until its body ends. Cleared when a run's end is recorded.
    lease_until = models.DateTimeField(_("lease until"), null=True, blank=True)
    #: Started by hand ("run now"), outside the schedule: such a run never takes a tick. The
    #: defaults live in the database too: the run statements insert rows in raw SQL.
    manual = models.BooleanField(_("manual"), default=False, db_default=False)
    #: Started by ``cronjob backfill`` for a past tick that had no run (marked once the run
    #: holds its tick, before its body runs).
    backfill = models.BooleanField(_("backfill"), default=False, db_default=False)
    #: The task result id when the run was delivered through a task queue.
    task_id = models.CharField(_("task id"), max_length=255, blank=True, default="", db_default="")
    #: How many times the body was called for this run: more than one when a failed attempt
    #: was retried (``@locked_task(retries=...)``); each failed attempt's error is in ``error``.
    attempts = models.PositiveSmallIntegerField(_("attempts"), default=1, db_default=1)
    #: What the job logged and a wrapped command printed, when the job captures its output
    #: (at most ``CAPTURE_LIMIT`` characters: the beginning and the end).
    output = models.TextField(_("output"), blank=True, default="", db_default="")

    objects = JobRunQuerySet.as_manager()

    class Meta:
        verbose_name = _("job run")
        verbose_name_plural = _("job runs")
        ordering = ["-started", "-id"]
        indexes = [
            models.Index(fields=["job", "-started"], name="advisory_cron_job_started"),
            # The acquiring statement looks for the job's dead ``running`` rows on every run.
            models.Index(
                fields=["job"],
                condition=models.Q(status="running"),
                name="advisory_cron_running",
            ),
            # ... and for the job's rows whose lease has not expired, whatever their status
            # (a ``lock_lost`` run's body may still be running): only rows whose body has not
            # reported its end carry a lease, so this index stays as small as the runs going on.
            models.Index(
                fields=["job"],
                condition=models.Q(lease_until__isnull=False),
                name="advisory_cron_leased",
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["job", "tick"],
                condition=models.Q(status__in=[status.value for status in TICK_TAKING]),
                name="advisory_cron_one_run_per_tick",
            ),
            # A tick its calendar skips is recorded once (with RECORD_SKIPS), by any replica.
            models.UniqueConstraint(
                fields=["job", "tick"],
                condition=models.Q(status="skipped_calendar"),
                name="advisory_cron_one_calendar_skip",
            ),
            # A tick waits once (overlap buffer_one, buffer_all), whichever replicas found its
            # job busy.
            models.UniqueConstraint(
                fields=["job", "tick"],
                condition=models.Q(status=RunStatus.WAITING.value),
                name="advisory_cron_one_wait_per_tick",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.job} @ {self.tick or self.started}: {self.status}"

    @property
    def duration(self) -> float | None:
        """Seconds from start to finish, when finished."""
        if self.finished is None:
            return None
        return (self.finished - self.started).total_seconds()

    @property
    def lateness(self) -> float | None:
        """Seconds from its tick to its start (negative: before its tick, a clock ahead), for a
        run that has a tick."""
        if self.tick is None:
            return None
        return (self.started - self.tick).total_seconds()

    @property
    def earlier_attempts(self) -> list[str]:
        """The errors of the attempts that failed and were retried, a line each: the first
        lines of ``error`` (at most one per attempt)."""
        lines = self.error.strip().splitlines()[: self.attempts]
        count = next((n for n, line in enumerate(lines) if not EARLIER_ATTEMPT.match(line)), None)
        return lines if count is None else lines[:count]

    @property
    def run_error(self) -> str:
        """The run's own error: ``error`` without its earlier attempts' lines (empty for a run
        that succeeded on a retry)."""
        return "\n".join(self.error.strip().splitlines()[len(self.earlier_attempts) :])

    @property
    def attempts_note(self) -> str:
        """``on attempt 2`` (a success), ``after 3 attempts`` (any other end), or ``""`` for
        a run of one attempt."""
        if self.attempts <= 1:
            return ""
        if self.status == RunStatus.SUCCEEDED:
            return str(_("on attempt %(n)d") % {"n": self.attempts})
        return str(_("after %(n)d attempts") % {"n": self.attempts})


class JobState(models.Model):
    """What an operator said about a job: paused (maybe until a time), "run now" requests,
    and when its override was last dropped.

    Jobs live in code; a row exists only for a job someone paused, triggered or reset.
    """

    job = models.CharField(_("job"), max_length=200, primary_key=True)
    paused = models.BooleanField(_("paused"), default=False)
    paused_at = models.DateTimeField(_("paused at"), null=True, blank=True)
    #: A pause ends by itself at this time (``None``: until resumed).
    paused_until = models.DateTimeField(_("paused until"), null=True, blank=True)
    paused_by = models.CharField(_("paused by"), max_length=150, blank=True, default="")
    reason = models.TextField(_("reason"), blank=True, default="")
    #: A "run now" request not yet picked up by a worker.
    run_requested = models.DateTimeField(_("run requested"), null=True, blank=True)
    run_requested_by = models.CharField(
        _("run requested by"), max_length=150, blank=True, default=""
    )
    changed = models.DateTimeField(_("changed"), auto_now=True)
    #: When the job's override was last deleted (a reset to its code's schedule), on the
    #: database's clock, set by the schedules' table (migration 0014): the override's
    #: ``changed`` anchored catch-up, and this does once it is gone, so a worker started
    #: later does not catch up ticks the override took away.
    schedule_reset = models.DateTimeField(_("schedule reset"), null=True, blank=True)

    class Meta:
        verbose_name = _("job state")
        verbose_name_plural = _("job states")

    def __str__(self) -> str:
        return f"{self.job}: {'paused' if self.paused else 'active'}"


class HeldLockQuerySet(models.QuerySet["HeldLock"]):
    """Rows of the held-locks view: they can be read, never written."""

    def _refuse(self, method: str) -> NoReturn:
        raise TypeError(f"{self.model.__name__} rows are read-only: {method}() is not supported")

    def create(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("create")

    def bulk_create(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("bulk_create")

    def bulk_update(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("bulk_update")

    def get_or_create(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("get_or_create")

    def update_or_create(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("update_or_create")

    def update(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("update")

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse("delete")


class HeldLockManager(models.Manager["HeldLock"]):
    """Read-only, and plain: the rows are neither annotated nor routed to the lock database.

    Use [held_locks()][django_advisory_cron.ops.heldlocks.held_locks], which reads the lock
    database and adds job names, hold times and stale flags in SQL.
    """

    def get_queryset(self) -> HeldLockQuerySet:
        return HeldLockQuerySet(self.model, using=self._db)


class HeldLock(models.Model):
    """One advisory lock of the current database, as the server's lock table lists it, with
    its backend.

    Read-only: backed by the ``django_advisory_cron_heldlock`` view (see migration 0002).
    """

    id = models.TextField(primary_key=True)
    pid = models.IntegerField(_("pid"))
    granted = models.BooleanField(_("granted"))
    mode = models.TextField(_("mode"))
    classid = models.BigIntegerField(_("classid"))
    objid = models.BigIntegerField(_("objid"))
    objsubid = models.SmallIntegerField(_("objsubid"))
    key1 = models.IntegerField(_("key 1"), null=True)
    key2 = models.IntegerField(_("key 2"), null=True)
    bigkey = models.BigIntegerField(_("bigint key"), null=True)
    waitstart = models.DateTimeField(_("waiting since"), null=True)
    usename = models.TextField(_("user"), blank=True)
    application_name = models.TextField(_("application name"), blank=True)
    client_addr = models.GenericIPAddressField(_("client address"), null=True)
    backend_start = models.DateTimeField(_("connection started"), null=True)
    xact_start = models.DateTimeField(_("transaction started"), null=True)
    query_start = models.DateTimeField(_("query started"), null=True)
    state = models.TextField(_("state"), blank=True)
    wait_event = models.TextField(_("wait event"), blank=True)
    query = models.TextField(_("current query"), blank=True)

    objects = HeldLockManager()

    class Meta:
        managed = False
        db_table = "django_advisory_cron_heldlock"
        verbose_name = _("held lock")
        verbose_name_plural = _("held locks")
        default_permissions = ("view",)
        permissions = [
            ("terminate_backend", _("Can terminate a backend holding an advisory lock")),
            ("view_query", _("Can view the query text of sessions holding locks")),
        ]
        ordering = ["pid"]

    def __str__(self) -> str:
        held = "held" if self.granted else "waiting"
        return f"{self.mode} advisory lock {self.keys} ({held}, pid {self.pid})"

    @property
    def keys(self) -> str:
        """The key as it was passed to ``pg_advisory_lock``: ``(int, int)`` or one bigint."""
        if self.objsubid == 2:
            return f"({self.key1}, {self.key2})"
        return str(self.bigkey)


class RegisteredJob(JobRun):
    """The "Jobs" admin page: registered jobs live in code, not in a table of their own."""

    class Meta:
        proxy = True
        verbose_name = _("job")
        verbose_name_plural = _("jobs")
        default_permissions = ("view",)
        permissions = [("operate_job", _("Can pause, resume and run jobs now"))]


class Timeline(JobRun):
    """The admin's Timeline page: every job's runs and coming ticks along one time axis. No
    table and no permission of its own: whoever may see the Jobs page may see it."""

    class Meta:
        proxy = True
        verbose_name = _("timeline")
        verbose_name_plural = _("timeline")
        default_permissions = ()


class EnqueuedTick(models.Model):
    """A tick handed to a task queue (``deliver="tasks"``): the claim that makes schedulers
    enqueue each tick once.

    Every scheduler (``cronworker`` replica, ``runlocked --enqueue``) inserts the row for
    ``(job, tick)`` before it enqueues; only the one whose insert wins enqueues. The run itself
    is still recorded in [JobRun][django_advisory_cron.models.JobRun] by whichever task worker
    runs it, with the same ``task_id``.
    """

    job = models.CharField(_("job"), max_length=200)
    tick = models.DateTimeField(_("tick"))
    #: The Tasks backend alias the tick was enqueued to.
    backend = models.CharField(_("backend"), max_length=200)
    #: The task result id the backend returned (empty until the enqueue returns).
    task_id = models.CharField(_("task id"), max_length=255, blank=True, default="")
    host = models.CharField(_("host"), max_length=255)
    pid = models.PositiveIntegerField(_("pid"))
    enqueued = models.DateTimeField(_("enqueued"))

    class Meta:
        verbose_name = _("enqueued tick")
        verbose_name_plural = _("enqueued ticks")
        constraints = [
            models.UniqueConstraint(
                fields=["job", "tick"], name="advisory_cron_one_enqueue_per_tick"
            )
        ]
        indexes = [
            # Claims still waiting for their task id: each claim of the job looks for those
            # whose sender died (a few rows, among a week of claims).
            models.Index(
                fields=["job"], name="advisory_cron_unanswered", condition=models.Q(task_id="")
            )
        ]

    def __str__(self) -> str:
        return f"{self.job} @ {self.tick}: task {self.task_id or '(enqueuing)'}"


class Schedule(models.Model):
    """A schedule kept in the database: added and edited in the admin or with ``manage.py
    cronjob``, no deploy. It calls a registered job with arguments, or a management command;
    or, with ``override``, changes the schedule of the job of the same name defined in code.

    Its ``name`` is the job name its runs, lock and ticks go by. ``changed`` is set by the
    database on every write, on the database's clock (the clock ticks are judged on), and a
    trigger tells the listening workers.
    """

    name = models.CharField(_("name"), max_length=200, unique=True)
    #: Changes the job of this name defined in code, instead of adding one.
    override = models.BooleanField(_("overrides a job defined in code"), default=False)
    job = models.CharField(_("job"), max_length=200, blank=True, default="")
    command = models.CharField(_("management command"), max_length=200, blank=True, default="")
    args = models.JSONField(_("arguments"), default=list, blank=True)
    kwargs = models.JSONField(_("keyword arguments"), default=dict, blank=True)
    cron = models.CharField(_("cron schedule"), max_length=200, blank=True, default="")
    #: An interval schedule, in seconds (exclusive with ``cron``).
    every = models.FloatField(_("every (seconds)"), null=True, blank=True)
    timezone = models.CharField(_("time zone"), max_length=64, blank=True, default="")
    enabled = models.BooleanField(_("enabled"), default=True)
    catch_up = models.CharField(
        _("catch-up"),
        max_length=10,
        blank=True,
        default="",
        choices=[("latest", "latest"), ("all", "all"), ("none", "none")],
    )
    max_lateness = models.FloatField(_("max lateness (seconds)"), null=True, blank=True)
    #: A run starting more than this after its tick makes the job late (not skipped).
    late_after = models.FloatField(_("late after (seconds)"), null=True, blank=True)
    timeout = models.FloatField(_("timeout (seconds)"), null=True, blank=True)
    deliver = models.CharField(_("deliver to"), max_length=200, blank=True, default="")
    description = models.CharField(_("description"), max_length=500, blank=True, default="")
    starts = models.DateTimeField(_("starts"), null=True, blank=True)
    ends = models.DateTimeField(_("ends"), null=True, blank=True)
    #: Around the body: each ``NULL`` is the job's own (for a command: none, none, no, yes).
    retries = models.PositiveIntegerField(_("retries"), null=True, blank=True)
    retry_backoff = models.FloatField(_("retry back-off (seconds)"), null=True, blank=True)
    at_most_once = models.BooleanField(_("at most once"), null=True, blank=True)
    capture = models.BooleanField(_("captured output"), null=True, blank=True)
    #: Seconds each tick may start after it, at an offset every replica computes alike.
    jitter = models.FloatField(_("jitter (seconds)"), null=True, blank=True)
    #: A one-off's moment (exclusive with ``cron`` and ``every``); ``timezone`` is the zone
    #: it was typed in.
    at = models.DateTimeField(_("once at"), null=True, blank=True)
    #: The schedule ends after this many runs of its ticks.
    max_runs = models.PositiveIntegerField(_("max runs"), null=True, blank=True)
    #: What a tick that comes while a run is going does (empty: skip), and ``allow_all``'s
    #: runs at once (``NULL``: 2).
    overlap = models.CharField(
        _("overlap policy"), max_length=16, blank=True, default="", db_default=""
    )
    max_concurrent = models.PositiveSmallIntegerField(
        _("max concurrent runs"), null=True, blank=True
    )
    #: The business calendar its ticks skip or keep (``core.calendars``; empty: none).
    calendar = models.CharField(
        _("calendar"), max_length=200, blank=True, default="", db_default=""
    )
    #: The tenant schemas it runs for with django-tenants: ``*`` every one, else names joined
    #: by commas (empty: as its job does).
    per_tenant = models.CharField(
        _("tenants"), max_length=500, blank=True, default="", db_default=""
    )
    created = models.DateTimeField(_("created"), db_default=Now())
    changed = models.DateTimeField(_("changed"), db_default=Now())
    changed_by = models.CharField(_("changed by"), max_length=150, blank=True, default="")

    class Meta:
        verbose_name = _("schedule")
        verbose_name_plural = _("schedules")
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(~models.Q(cron=""), every__isnull=True, at__isnull=True)
                    | models.Q(cron="", every__isnull=False, at__isnull=True)
                    | models.Q(cron="", every__isnull=True, at__isnull=False)
                    | models.Q(override=True, at__isnull=True)
                ),
                name="advisory_cron_schedule_one_kind",
            ),
            models.CheckConstraint(
                condition=models.Q(every__isnull=True) | models.Q(every__gt=0),
                name="advisory_cron_schedule_every_positive",
            ),
            models.CheckConstraint(
                condition=models.Q(retry_backoff__isnull=True) | models.Q(retry_backoff__gt=0),
                name="advisory_cron_schedule_retry_backoff_positive",
            ),
            models.CheckConstraint(
                condition=models.Q(jitter__isnull=True) | models.Q(jitter__gte=0),
                name="advisory_cron_schedule_jitter_not_negative",
            ),
            models.CheckConstraint(
                condition=models.Q(max_runs__isnull=True) | models.Q(max_runs__gte=1),
                name="advisory_cron_schedule_max_runs_positive",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class ScheduleVersion(models.Model):
    """One change of a row of the database's schedules: what the row held after it (``state``;
    ``None`` once it was deleted), when, by whom and why.

    Written by the table's trigger (migration 0026), never by the app: every write, from the
    admin, ``cronjob``, an import or plain SQL, is kept. Who and why come from the
    transaction's ``advisory_cron.changed_by`` and ``advisory_cron.change_note`` settings,
    which the app's write paths set (see
    [changing][django_advisory_cron.jobs.versions.changing]); a write that sets none is the
    database user's. Numbered from 1 per schedule name, across a removal and an add again.
    """

    name = models.CharField(_("schedule"), max_length=200)
    number = models.PositiveIntegerField(_("version"))
    recorded = models.DateTimeField(_("recorded"))
    changed_by = models.CharField(_("changed by"), max_length=150, blank=True, default="")
    note = models.TextField(_("note"), blank=True, default="")
    #: The row's columns after the change (``id``, ``created``, ``changed`` and ``changed_by``
    #: aside), as JSON; ``None``: the row was deleted.
    state = models.JSONField(_("state"), null=True, blank=True)

    class Meta:
        verbose_name = _("schedule version")
        verbose_name_plural = _("schedule versions")
        ordering = ["name", "-number"]
        default_permissions = ()
        constraints = [
            models.UniqueConstraint(fields=["name", "number"], name="advisory_cron_one_version")
        ]
        indexes = [models.Index(fields=["name", "recorded"], name="advisory_cron_version_recorded")]

    def __str__(self) -> str:
        return f"{self.name} version {self.number}"


class CalendarDate(models.Model):
    """A day an operator adds to a business calendar's days (``calendar``: a source's name,
    such as ``business:FR`` or ``dates:plant``): a job whose ``calendar=`` names that source
    skips it (or, with ``keep``, runs on it), as it does the package's holidays."""

    calendar = models.CharField(_("calendar"), max_length=200)
    day = models.DateField(_("day"))
    reason = models.CharField(_("reason"), max_length=200, blank=True, default="")

    class Meta:
        verbose_name = _("calendar date")
        verbose_name_plural = _("calendar dates")
        ordering = ["calendar", "day"]
        constraints = [
            models.UniqueConstraint(fields=["calendar", "day"], name="advisory_cron_one_date")
        ]

    def __str__(self) -> str:
        return f"{self.calendar} {self.day.isoformat()}"
