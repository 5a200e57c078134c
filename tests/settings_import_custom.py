"""Test settings for ``cronjob import --from celery-beat`` of an entry whose schedule is a class
of the project's own (a ``celery.schedules.BaseSchedule`` that decides in ``is_due``), which
no cron expression or interval says, and a crontab restricting both kinds of day that cron
says with a step (``*/2``)."""

from celery.schedules import BaseSchedule, crontab

from tests.settings_import import *  # noqa: F403


class WhenSalesEnd(BaseSchedule):  # type: ignore[misc]  # celery has no types
    """Due when a sale ends: the project's own rule."""

    def is_due(self, last_run_at: object) -> tuple[bool, float]:
        return False, 60.0


CELERY_BEAT_SCHEDULE = {
    "sale-ends": {"task": "send_report", "schedule": WhenSalesEnd()},
    # Celery matches both day fields; cron too, when one starts with * (*/2: odd days).
    "odd-mondays": {
        "task": "send_report",
        "schedule": crontab(minute=0, hour=0, day_of_month="*/2", day_of_week="mon"),
    },
}
