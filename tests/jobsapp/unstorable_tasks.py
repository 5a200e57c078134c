"""Jobs whose output or error holds text PostgreSQL cannot store as it is (a NUL, an unpaired
surrogate), loaded with ``ADVISORY_CRON_JSON='{"JOBS_MODULE": "unstorable_tasks"}'``; the
``binary`` command does the same from a management command."""

import logging
import os

from django_advisory_cron import locked_task

logger = logging.getLogger(__name__)

#: A file name with a byte that is not UTF-8, as ``os.listdir`` returns it.
UNDECODABLE = os.fsdecode(b"report-\xff.csv")


@locked_task(name="logs_nul", capture=True, every=1)
def logs_nul() -> None:
    logger.warning("abc\x00def")


@locked_task(name="logs_undecodable", capture=True, every=1)
def logs_undecodable() -> None:
    logger.warning("wrote %s", UNDECODABLE)


@locked_task(name="raises_nul", every=1)
def raises_nul() -> None:
    raise ValueError("bad\x00value")


@locked_task(name="raises_undecodable", every=1)
def raises_undecodable() -> None:
    raise ValueError(f"cannot read {UNDECODABLE}")


@locked_task(name="logs_euro", capture=True)
def logs_euro() -> None:
    """Logs a character a LATIN1 database cannot hold."""
    logger.warning("costs 5 \u20ac")


@locked_task(name="raises_euro")
def raises_euro() -> None:
    raise ValueError("costs 5 \u20ac")


@locked_task(name="logs_euro_each_second", capture=True, every=1)
def logs_euro_each_second() -> None:
    """``logs_euro`` on a schedule: a cronworker's run whose finish a LATIN1 database refuses."""
    logger.warning("costs 5 \u20ac")


@locked_task(name="logs_plain_each_second", capture=True, every=1)
def logs_plain_each_second() -> None:
    """Logs text every database holds: its finish is never refused."""
    logger.warning("plain")
