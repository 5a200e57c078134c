"""Jobs for the retry tests, loaded with ``ADVISORY_CRON_JSON='{"JOBS_MODULE":
"retry_tasks"}'``: each attempt leaves a ``Marker``; a job fails until its attempt number
reaches the one named by a file."""

import logging
import os
from datetime import timedelta
from pathlib import Path

from django_advisory_cron import locked_task

from .models import Marker

logger = logging.getLogger(__name__)


class Flaky(Exception):
    """What the flaky jobs raise until their attempt succeeds."""


def _attempt(name: str, succeed_at: int) -> None:
    Marker.objects.create(job=name, pid=os.getpid())
    made = Marker.objects.filter(job=name).count()
    if made < succeed_at:
        raise Flaky(f"attempt {made} of {name} fails")


@locked_task(name="flaky", schedule="0 0 1 1 *", retries=3, retry_backoff=0.5)
def flaky(succeed_at: str) -> None:
    """Fails until its ``succeed_at``-th attempt (counted in markers)."""
    _attempt("flaky", int(succeed_at))


@locked_task(name="flaky_value", schedule="0 0 1 1 *", retries=3, retry_on=ValueError)
def flaky_value(succeed_at: str) -> None:
    """Retries only ``ValueError``: its ``Flaky`` failure is not retried."""
    _attempt("flaky_value", int(succeed_at))


@locked_task(name="flaky_every", every=timedelta(seconds=3), retries=5, retry_backoff=0.1)
def flaky_every() -> None:
    """Every 3 s, failing twice per tick before it succeeds (the tick's count of markers): its
    two back-offs take 0.3 s at most, so a claim late by seconds on a loaded machine still
    retries before the next tick."""
    Marker.objects.create(job="flaky_every", pid=os.getpid(), note=str(os.getpid()))
    attempts = Path(os.environ.get("FLAKY_DIR", "/tmp")) / f"flaky_every-{os.getpid()}"
    count = int(attempts.read_text()) + 1 if attempts.exists() else 1
    attempts.write_text(str(count % 3))
    if count % 3:
        raise Flaky(f"attempt {count} fails")


@locked_task(name="flaky_soon", every=timedelta(seconds=2), retries=3, retry_backoff=5)
def flaky_soon() -> None:
    """Its back-off is longer than its interval: the next tick comes before a retry could."""
    _attempt("flaky_soon", 99)


@locked_task(name="flaky_lost", schedule="0 0 1 1 *", retries=3, retry_backoff=4, capture=True)
def flaky_lost() -> None:
    """Fails at every attempt, each written to a file first (not a row: once the lock is
    lost, the run's queries stop, and an attempt started then must still be seen)."""
    attempts = Path(os.environ["FLAKY_DIR"]) / "flaky_lost"
    with attempts.open("a") as written:
        written.write("attempt\n")
    number = len(attempts.read_text().splitlines())
    logger.warning("attempt %d of flaky_lost", number)
    raise Flaky(f"attempt {number} of flaky_lost fails")
