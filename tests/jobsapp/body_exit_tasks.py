"""Jobs whose bodies raise what a signal would (``SystemExit``, ``KeyboardInterrupt``), for the
tests of runs that end that way; loaded with
``ADVISORY_CRON_JSON='{"JOBS_MODULE": "body_exit_tasks", ...}'`` in the worker processes (and
in the child processes the workers start, which inherit the environment)."""

import logging
import os
import signal
import sys
import time
from datetime import timedelta

from django.db import transaction

from django_advisory_cron import locked_task

from .models import Marker


def _mark(job: str) -> None:
    Marker.objects.create(job=job, pid=os.getpid())


@locked_task(name="exits_3", every=timedelta(seconds=2), scope="session")
def exits_3() -> None:
    """Calls ``sys.exit(3)``: a failure of the job, not a stop of the worker."""
    _mark("exits_3")
    sys.exit(3)


@locked_task(name="raises_interrupt", every=timedelta(seconds=2), scope="session")
def raises_interrupt() -> None:
    """Raises ``KeyboardInterrupt`` itself: no signal was received."""
    _mark("raises_interrupt")
    raise KeyboardInterrupt


@locked_task(name="exits_3_in_process", every=timedelta(seconds=2), timeout=30)
def exits_3_in_process() -> None:
    """``sys.exit(3)`` in a job with a timeout: it runs in a process of its own."""
    _mark("exits_3_in_process")
    sys.exit(3)


@locked_task(name="exits_3_on_commit", every=timedelta(seconds=2), scope="transaction")
def exits_3_on_commit() -> None:
    """Transaction scope: the run commits, then a callback the body registered exits."""
    _mark("exits_3_on_commit")
    transaction.on_commit(lambda: sys.exit(3))


@locked_task(name="exits_3_once", scope="session")
def exits_3_once() -> None:
    """No schedule: for ``runlocked``."""
    _mark("exits_3_once")
    sys.exit(3)


@locked_task(name="generator_exit", scope="session")
def generator_exit() -> None:
    _mark("generator_exit")
    raise GeneratorExit


@locked_task(name="sleeps", scope="session")
def sleeps() -> None:
    """Sleeps until a signal stops it."""
    _mark("sleeps")
    time.sleep(60)


@locked_task(name="exits_3_on_commit_once", scope="transaction")
def exits_3_on_commit_once() -> None:
    """No schedule, for ``runlocked``: the run commits, then its callback exits."""
    _mark("exits_3_on_commit_once")
    transaction.on_commit(lambda: sys.exit(3))


@locked_task(name="sigint_at_start", scope="session")
def sigint_at_start() -> None:
    """Never runs its body: a SIGINT comes while the run's start is logged (see below)."""
    _mark("sigint_at_start")


class _SigintWhileLogged(logging.Filter):
    """A Ctrl-C between the run's row and its body: while "job sigint_at_start started" is
    logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith("job sigint_at_start started"):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # the handler raises before this ends
        return True


logging.getLogger("django_advisory_cron").addFilter(_SigintWhileLogged())
