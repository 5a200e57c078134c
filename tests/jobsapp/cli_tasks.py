"""Jobs for the ``cronjob list|history|crontab`` tests: a cron job in a zone of its own, one in
``TIME_ZONE``, a six-field one, an interval, a Tasks-delivered one and an unscheduled one that
fails. Loaded with ``ADVISORY_CRON_JSON='{"JOBS_MODULE": "cli_tasks"}'``."""

from datetime import timedelta

from django_advisory_cron import locked_task


@locked_task(name="cli_paris", schedule="30 2 * * *", timezone="Europe/Paris")
def cli_paris() -> None:
    """Runs at 02:30 in Paris, whatever TIME_ZONE says."""


@locked_task(name="cli_hourly", schedule="0 * * * *")
def cli_hourly() -> None:
    """Runs at the top of every hour, in TIME_ZONE."""


@locked_task(name="cli_seconds", schedule="0 3 * * * 30")
def cli_seconds() -> None:
    """Runs at 03:00:30: a seconds field, which crontab cannot express."""


@locked_task(name="cli_every", every=timedelta(minutes=2))
def cli_every() -> None:
    """An interval job: cronworker only."""


@locked_task(name="cli_enqueued", schedule="*/15 * * * *", deliver="tasks")
def cli_enqueued() -> None:
    """Handed to the Tasks framework at each tick."""


@locked_task(name="cli_broken")
def cli_broken(fail: str = "yes") -> str:
    """Fails with a two-line message when asked to, so the history shows its first line."""
    if fail == "yes":
        raise RuntimeError("disk full on /var\nsecond line")
    return "done"
