"""Test settings for ``cronjob import --from celery-beat`` of an entry whose schedule is a class
of the project's own (a ``celery.schedules.BaseSchedule`` that decides in ``is_due``), which
no cron expression or interval says."""

from celery.schedules import BaseSchedule

from tests.settings_import import *  # noqa: F403


class WhenSalesEnd(BaseSchedule):  # type: ignore[misc]  # celery has no types
    """Due when a sale ends: the project's own rule."""

    def is_due(self, last_run_at: object) -> tuple[bool, float]:
        return False, 60.0


CELERY_BEAT_SCHEDULE = {"sale-ends": {"task": "send_report", "schedule": WhenSalesEnd()}}
