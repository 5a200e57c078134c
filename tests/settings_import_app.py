"""Test settings for ``cronjob import --from celery-beat`` with the schedule set on the
project's Celery app (``app.conf.beat_schedule``), not in the settings: the app is made here,
as a project's ``proj/__init__.py`` makes it by importing its ``celery.py``."""

from celery import Celery
from celery.schedules import crontab

from tests.settings import *  # noqa: F403

ADVISORY_CRON = {"JOBS_MODULE": "import_tasks"}

celery_app = Celery("tests")
celery_app.conf.timezone = "America/New_York"
celery_app.conf.beat_schedule = {
    "morning-report": {
        "task": "send_report",
        "schedule": crontab(minute=30, hour=7),
        "args": ["morning"],
    },
}
