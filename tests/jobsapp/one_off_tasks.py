"""Jobs for the one-off and max_runs tests (tests/test_one_off.py), loaded with
``ADVISORY_CRON_JSON='{"JOBS_MODULE": "one_off_tasks", ...}'``; the test gives the one-off's
moment in ``ONE_OFF_AT`` (every process reads the same one)."""

import os

from django_advisory_cron import locked_task

from .models import Marker

#: A moment to come when the test gives none (a command that only reads the jobs).
AT = os.environ.get("ONE_OFF_AT", "2099-01-01 00:00")


def _mark(name: str) -> None:
    Marker.objects.create(job=name, pid=os.getpid())


@locked_task(name="one_off_code", at=AT, timezone="Europe/Berlin")
def one_off_code() -> None:
    _mark("one_off_code")


@locked_task(name="limited_code", every=1, max_runs=2)
def limited_code() -> None:
    _mark("limited_code")


@locked_task(name="one_off_body")
def one_off_body(name: str) -> None:
    """What the schedules kept in settings and in the database call."""
    _mark(name)
