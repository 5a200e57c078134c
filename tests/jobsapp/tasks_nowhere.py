"""A job delivered to a Tasks backend that ``TASKS`` lacks, for the bad-input tests; loaded
with ``ADVISORY_CRON_JSON='{"JOBS_MODULE": "tasks_nowhere"}'`` (its check error would stop
every other command of ``tests.settings_tasks``)."""

from datetime import timedelta

from django_advisory_cron import locked_task


@locked_task(name="tasks_nowhere", every=timedelta(seconds=2), deliver="tasks:nowhere")
def tasks_nowhere() -> None:
    """Names a backend alias that TASKS does not configure."""
