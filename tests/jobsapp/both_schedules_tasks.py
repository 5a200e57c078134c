"""A job declared with both ``schedule=`` and ``every=``, which ``@locked_task`` refuses;
loaded with ``ADVISORY_CRON_JSON='{"JOBS_MODULE": "both_schedules_tasks"}'``."""

from django_advisory_cron import locked_task


@locked_task(name="both_schedules", schedule="* * * * *", every=5)
def both_schedules() -> None:
    """A cron expression and an interval: which one would tick?"""
