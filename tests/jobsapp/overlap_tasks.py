"""Jobs for the overlap tests (tests/test_overlap.py), loaded with
``ADVISORY_CRON_JSON='{"JOBS_MODULE": "overlap_tasks", ...}'`` in the worker processes. Each
body records its start and its end (a marker each, with one token), so that the test sees how
many bodies overlapped, whichever process ran them."""

import os
import time
import uuid

from django_advisory_cron import locked_task

from .models import Marker

#: The ticks' interval, and how long a body runs: longer than two intervals, so that a job
#: allowed two runs at once would have three if nothing bounded it.
EVERY = 1
BODY = 2.5


def body(name: str, seconds: float = BODY, release: bool = False) -> None:
    """Run ``seconds`` (or, with ``release``, until the test writes a "release" marker for
    ``name``), between a start and an end marker."""
    token = uuid.uuid4().hex
    Marker.objects.create(job=name, pid=os.getpid(), note=f"start {token}")
    deadline = time.monotonic() + (60 if release else seconds)
    while time.monotonic() < deadline:
        if release and Marker.objects.filter(job=name, note="release").exists():
            break
        time.sleep(0.05)
    Marker.objects.create(job=name, pid=os.getpid(), note=f"end {token}")


@locked_task(name="overlap_two", every=EVERY, overlap="allow_all", max_concurrent=2)
def overlap_two() -> None:
    body("overlap_two")


@locked_task(name="overlap_skip", every=EVERY)
def overlap_skip() -> None:
    """The default policy: a tick that comes while a run is going is skipped."""
    body("overlap_skip")


@locked_task(name="overlap_body")
def overlap_body(name: str) -> None:
    """What the schedules kept in the database call."""
    body(name)


@locked_task(name="overlap_free", overlap="allow_all")
def overlap_free() -> None:
    """No schedule: started by ``runlocked``, it runs until the test releases it."""
    body("overlap_free", release=True)


@locked_task(name="overlap_replace", overlap="terminate_other")
def overlap_replace() -> None:
    """No schedule: started by ``runlocked``, it runs until the test releases it, or until a
    new run replaces it."""
    body("overlap_replace", release=True)


@locked_task(name="overlap_replace_every", every=3, overlap="terminate_other")
def overlap_replace_every() -> None:
    """Each tick's run goes on until the next tick's replaces it."""
    body("overlap_replace_every", release=True)
