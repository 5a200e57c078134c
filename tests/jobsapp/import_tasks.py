"""Jobs that the schedules of other schedulers name, for ``cronjob import``'s tests (loaded
by ``tests.settings_import``): by the job's name, or by its function's dotted path as a
Celery task's name or a django-q2 ``func`` names it."""

from django_advisory_cron import locked_task


@locked_task
def send_report(period: str = "daily", copies: int = 1) -> None:
    """Called by name (``send_report``) and by path (``tests.jobsapp.import_tasks.send_report``)."""


@locked_task(name="purge")
def purge_tokens(days: int = 30) -> None:
    """Registered as ``purge``; a Celery task names it by its path, ``...purge_tokens``."""
