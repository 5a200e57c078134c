"""Jobs for the tests of a run's lease after its lock is lost, and of pruning the history,
loaded with ``ADVISORY_CRON_JSON='{"JOBS_MODULE": "lease_tasks", ...}'`` in the processes
they start.

The bodies write when they start and end to the file named by ``LEASE_TASKS_LOG`` (one line
each: ``start|end job pid time``), never through the database: a body whose lock was lost
must go on undisturbed, as one that makes no query would.
"""

import os
import time
from datetime import timedelta
from typing import Any

from django.dispatch import receiver

from django_advisory_cron import locked_task, signals

from .job_names import LEASE_COMPANIONS

#: Seconds a lease body runs: well inside the lease the tests configure, so that a body
#: whose lock was lost one second in ends before its lease would, and long enough for the
#: loss and the other worker's skip of the next tick to come while it runs (1.5 s after
#: that tick, for claims late on a loaded machine).
BODY_SECONDS = 3.5
#: Seconds the shell body runs: a second ``runlocked``, started once the first body has
#: started, must be waiting before it ends (a Python start, several seconds when loaded).
SHELL_SECONDS = 5.0
#: The interval of the scheduled lease jobs: a tick comes while a body runs, and the tick
#: after a second body's start comes after that body's end (the test stops the workers then).
EVERY = timedelta(seconds=2)
#: Jobs due with ``lease_body`` at each of its ticks (claimed together with it).
COMPANIONS = LEASE_COMPANIONS


def note(event: str, job: str) -> None:
    path = os.environ.get("LEASE_TASKS_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"{event} {job} {os.getpid()} {time.time():.6f}\n")


@locked_task(name="lease_body", every=EVERY)
def lease_body() -> None:
    """Pure Python for ``BODY_SECONDS``: nothing stops it when its lock is lost."""
    note("start", "lease_body")
    time.sleep(BODY_SECONDS)
    note("end", "lease_body")


def _companion(number: int) -> None:
    name = f"lease_companion_{number}"

    def body() -> None:
        note("start", name)
        note("end", name)

    locked_task(name=name, every=EVERY)(body)


for _number in range(COMPANIONS):
    _companion(_number)


@locked_task(name="lease_shell")
def lease_shell() -> None:
    """Unscheduled; its body is a shell that the lock's loss cannot interrupt (``system()``
    waits for its child whatever signal arrives), as a long C call would be."""
    path = os.environ["LEASE_TASKS_LOG"]
    os.system(
        f"echo start lease_shell {os.getpid()} $(date +%s.%N) >> '{path}'; "
        f"sleep {SHELL_SECONDS:g}; echo end lease_shell {os.getpid()} $(date +%s.%N) >> '{path}'"
    )


#: The weekly job of the pruning test: its cron expression comes from the environment, so the
#: test can choose a day whose latest tick is days old whatever today is.
WEEKLY = os.environ.get("LEASE_TASKS_WEEKLY", "0 3 * * 0")


@locked_task(name="weekly_report", schedule=WEEKLY)
def weekly_report() -> None:
    note("start", "weekly_report")
    note("end", "weekly_report")


@locked_task(name="lease_lost_late_told", scope="session")
def lease_lost_late_told() -> None:
    """Queries until its lock is lost (the test terminates the lock's backend): the first
    query after the heartbeat found the loss raises, and the body ends."""
    from django.db import connection

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        time.sleep(0.02)


@receiver(signals.lock_lost)
def _told_once_the_body_ended(sender: Any, run: Any = None, **kwargs: Any) -> None:
    """For ``lease_lost_late_told``: the receivers connected after this one (``runlocked``'s,
    which stops the main thread) are told only once the body has ended, as a busy machine may
    order it."""
    if getattr(sender, "name", "") != "lease_lost_late_told" or run is None:
        return
    deadline = time.monotonic() + 10
    while not run.body_ended and time.monotonic() < deadline:
        time.sleep(0.005)
