"""Jobs for the jitter tests (tests/test_jitter.py), loaded with
``ADVISORY_CRON_JSON='{"JOBS_MODULE": "jitter_tasks", ...}'`` in the worker processes."""

import os
from datetime import timedelta

from django_advisory_cron import locked_task

from .jitter_values import EVERY, JITTER
from .models import Marker


def _mark(name: str) -> None:
    Marker.objects.create(job=name, pid=os.getpid())


@locked_task(name="jitter_a", every=timedelta(seconds=EVERY), jitter=JITTER)
def jitter_a() -> None:
    _mark("jitter_a")


@locked_task(name="jitter_b", every=EVERY, jitter=timedelta(seconds=JITTER))
def jitter_b() -> None:
    _mark("jitter_b")


@locked_task(name="jitter_none", every=EVERY)
def jitter_none() -> None:
    """Due at the same ticks, with no jitter: it starts at its tick."""
    _mark("jitter_none")


@locked_task(name="jitter_body")
def jitter_body(name: str) -> None:
    """What the jittered schedules kept in settings and in the database call."""
    _mark(name)


@locked_task(name="jitter_delivered", every=EVERY, jitter=JITTER, deliver="tasks")
def jitter_delivered() -> None:
    """Enqueued at each tick plus its offset (to the default, immediate, backend: it runs
    inline, in the scheduler that enqueued it)."""
    _mark("jitter_delivered")


@locked_task(name="jitter_cron", every=10, jitter=9)
def jitter_cron() -> None:
    """Started by "cron" (the test) with runlocked at its ticks: ten seconds apart, so that a
    process slow to start still finds the tick it was started for."""
    _mark("jitter_cron")
