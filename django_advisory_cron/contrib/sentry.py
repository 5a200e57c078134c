"""Sentry Crons: check-ins from the replica that runs a scheduled tick (``SENTRY_CRONS``).

Uses the SDK's own ``capture_checkin``: ``in_progress`` when the run starts, then ``ok`` or
``error`` with the run's duration. Each check-in carries the monitor's configuration, derived
from the job, so Sentry creates and updates the monitor by itself (upsert): the schedule,
its time zone, ``max_runtime`` and a check-in margin equal to the tolerance ``cronstatus``
allows before calling a job overdue (``MAX_SKEW + OVERDUE_GRACE``, in whole minutes).

Only runs of a scheduled tick are reported: a run started by hand outside the schedule would
look like an early check-in. Schedules Sentry cannot express (an interval that is not a whole
number of minutes, a six-field cron expression with seconds) are not reported; system check
``W042`` names such jobs.
"""

from __future__ import annotations

import math
import re
from typing import Any

from django.conf import settings
from sentry_sdk.crons import MonitorStatus, capture_checkin

from ..conf import app_settings
from ..core.cron_reading import ALIASES
from ..core.once import Once
from ..core.schedule import Every
from ..ops.monitoring import Timer

#: Statuses reported as ``ok``; every other end of a run is an ``error`` check-in.
OK_STATUSES = ("succeeded",)
#: Sentry's longest monitor slug.
MAX_SLUG = 50


def monitor_slug(name: str) -> str:
    """The monitor's slug: the job name in lower case, other characters as ``-``."""
    return re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-")[:MAX_SLUG]


def sentry_schedule(job: Any) -> dict[str, Any] | None:
    """The monitor schedule of ``job``, or ``None`` when Sentry cannot express it."""
    schedule = job.ticking_schedule
    if schedule is None or isinstance(schedule, Once):  # no schedule to miss a tick of
        return None
    if isinstance(schedule, Every):
        seconds = schedule.min_interval.total_seconds()
        if seconds % 60:
            return None
        return {"type": "interval", "value": int(seconds // 60), "unit": "minute"}
    if schedule.has_seconds:
        return None
    expression = ALIASES.get(schedule.expression, schedule.expression)
    return {"type": "crontab", "value": expression}


def monitor_config(job: Any) -> dict[str, Any] | None:
    """What Sentry needs to create the monitor of ``job``; ``None`` for an unreportable job."""
    schedule = sentry_schedule(job)
    if schedule is None:
        return None
    margin = (app_settings.MAX_SKEW + app_settings.OVERDUE_GRACE) / 60
    config: dict[str, Any] = {
        "schedule": schedule,
        # An interval ticks in real time (UTC); a cron expression in the job's time zone.
        "timezone": "UTC"
        if schedule["type"] == "interval"
        else (getattr(job, "timezone", None) or settings.TIME_ZONE),
        "checkin_margin": max(1, math.ceil(margin)),
    }
    if job.max_runtime:
        config["max_runtime"] = max(1, math.ceil(job.max_runtime / 60))
    return config


class SentryCrons:
    """The ``SENTRY_CRONS`` reporter."""

    label = "Sentry Crons"

    def __init__(self) -> None:
        self.timer = Timer()
        self.check_ins: dict[int, str] = {}

    def started(self, job: Any, run: Any) -> None:
        config = monitor_config(job) if run.tick is not None else None
        if config is None:
            return
        self.timer.start(run)
        check_in = capture_checkin(
            monitor_slug=monitor_slug(job.name),
            status=MonitorStatus.IN_PROGRESS,
            monitor_config=config,  # type: ignore[arg-type]  # a TypedDict in the SDK
        )
        if check_in is not None:
            self.check_ins[id(run)] = check_in

    def ended(self, job: Any, run: Any) -> None:
        check_in = self.check_ins.pop(id(run), None)
        duration = self.timer.stop(run)
        if check_in is None:
            return
        capture_checkin(
            monitor_slug=monitor_slug(job.name),
            check_in_id=check_in,
            status=MonitorStatus.OK if run.status in OK_STATUSES else MonitorStatus.ERROR,
            duration=duration,
            monitor_config=monitor_config(job),  # type: ignore[arg-type]
        )
