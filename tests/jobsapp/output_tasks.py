"""Jobs for the captured-output tests, loaded with ``ADVISORY_CRON_JSON='{"JOBS_MODULE":
"output_tasks"}'``."""

import logging

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
