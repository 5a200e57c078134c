"""Jobs for the business calendar tests (tests/test_calendars.py), loaded with
``ADVISORY_CRON_JSON='{"JOBS_MODULE": "calendar_tasks", ...}'``. The test adds today's date
(and the days beside it) to ``dates:e2e-off`` as an operator would: every tick of the jobs on
that calendar is skipped; ``dates:e2e-on`` has no date, so its job runs every tick."""

import os

from django_advisory_cron import locked_task

from .models import Marker


def _mark(name: str) -> None:
    Marker.objects.create(job=name, pid=os.getpid())


@locked_task(name="calendar_off", every=2, calendar="dates:e2e-off")
def calendar_off() -> None:
    _mark("calendar_off")


@locked_task(name="calendar_on", every=2, calendar="dates:e2e-on")
def calendar_on() -> None:
    _mark("calendar_on")


@locked_task(name="calendar_us", every=2, calendar="holidays:US")
def calendar_us() -> None:
    """Runs unless today is a US public holiday (the test asks the package which)."""
    _mark("calendar_us")


@locked_task(name="calendar_body")
def calendar_body(name: str) -> None:
    """What the schedules kept in settings and in the database call."""
    _mark(name)
