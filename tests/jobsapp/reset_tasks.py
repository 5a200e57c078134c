"""A job for the reset-after-disable test, loaded with
``ADVISORY_CRON_JSON='{"JOBS_MODULE": "reset_tasks"}'``: every second in code, every missed tick
caught up."""

from django_advisory_cron import locked_task


@locked_task(name="every_second", every=1, catch_up="all")
def every_second() -> None:
    """Nothing: its run rows are what the test reads."""
