"""A job with an invalid schedule, loaded only by ``tests.settings_badjobs``."""

from django_advisory_cron import locked_task


@locked_task(schedule="0 25 * * *")
def bad_schedule() -> None:
    """Hour 25 does not exist."""
