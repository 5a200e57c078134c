"""Jobs used by the test suite, registered through autodiscovery like a user's ``tasks.py``.

They write what they did into the ``Marker`` table, so tests (and subprocesses) count runs in
the database rather than in memory.
"""

import os
import time

from django_advisory_cron import locked_task

from .models import Marker


def _mark(job: str, note: str = "") -> None:
    Marker.objects.create(job=job, pid=os.getpid(), note=note)


def wait_for_file(path: str, timeout: float) -> None:
    """Return once ``path`` exists: the test decides when a job holding its lock finishes."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.02)


@locked_task
def sleepy(seconds: str = "1") -> str:
    """Sleeps while holding its lock, so racing replicas must skip."""
    _mark("sleepy")
    time.sleep(float(seconds))
    return "slept"


@locked_task(name="quick_scheduled", schedule="*/5 * * * *")
def quick_scheduled() -> str:
    """A fast scheduled job: finishes long before a late replica gets the lock."""
    _mark("quick_scheduled")
    return "done"


@locked_task(name="transactional", scope="transaction")
def transactional(seconds: str = "0") -> str:
    """Runs inside the lock's transaction."""
    _mark("transactional")
    time.sleep(float(seconds))
    return "committed"


@locked_task(name="failing", schedule="0 * * * *")
def failing() -> None:
    """Always fails, after writing a marker that must be rolled back in transaction scope."""
    _mark("failing")
    raise RuntimeError("boom")


@locked_task(name="hold_until")
def hold_until(path: str, timeout: str = "60") -> str:
    """Holds its lock until ``path`` exists, so a test decides when the winner finishes."""
    _mark("hold_until")
    wait_for_file(path, float(timeout))
    return "released"


@locked_task(name="q2_every_minute", schedule="* * * * *")
def q2_every_minute() -> str:
    """Scheduled through django-q2 in the q2 tests; runs longer than their ``retry``."""
    _mark("q2_every_minute")
    time.sleep(3)
    return "ticked"
