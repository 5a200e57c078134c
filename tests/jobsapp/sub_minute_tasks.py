"""The sub-minute jobs of docs/usage.md, loaded with
``ADVISORY_CRON_JSON='{"JOBS_MODULE": "sub_minute_tasks"}'`` and the default ``MAX_SKEW``."""

from datetime import timedelta

from django_advisory_cron import locked_task


@locked_task(name="poll_inbox", every=timedelta(seconds=5))
def poll_inbox() -> None:
    """Every 5 seconds, as docs/usage.md declares it."""


@locked_task(name="flush_metrics", schedule="* * * * * */10")
def flush_metrics() -> None:
    """Seconds 0, 10, ..., 50."""
