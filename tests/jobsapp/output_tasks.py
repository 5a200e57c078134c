"""Jobs for the captured-output tests, loaded with ``ADVISORY_CRON_JSON='{"JOBS_MODULE":
"output_tasks"}'``."""

import logging
from datetime import timedelta

from django_advisory_cron import locked_task

logger = logging.getLogger(__name__)
payments = logging.getLogger("payments")
elsewhere = logging.getLogger("elsewhere")


@locked_task(name="logs", capture=["payments"])
def logs(lines: str = "1") -> None:
    """Logs on its module's logger, on a logger it names, and on one it does not."""
    for number in range(int(lines)):
        logger.warning("line %d <b>bold</b>", number)
    payments.error("charged 3 cards")
    elsewhere.error("not captured")


@locked_task(name="quiet", capture=True)
def quiet() -> None:
    """Captures, and logs nothing."""


@locked_task(name="uncaptured")
def uncaptured() -> None:
    """Logs, without capture."""
    logger.warning("kept nowhere")


@locked_task(name="charges", capture=True)
def charges(count: str = "3") -> None:
    """Logs at INFO, as docs/usage.md's example does."""
    logger.info("charging %s subscriptions", count)
    logger.debug("not asked for")


@locked_task(name="charges_every1", every=timedelta(seconds=1), capture=True)
def charges_every1() -> None:
    """``charges`` at every second, for a worker."""
    logger.info("charging %s subscriptions", 3)
