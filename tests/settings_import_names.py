"""Test settings for the names ``cronjob import`` gives: celery beat entries named after the
jobs they call (``send-report`` beside the code job ``send_report``), as projects name them,
and django-crontab entries, which have no names."""

from celery.schedules import crontab

from tests.settings_import import *  # noqa: F403
from tests.settings_import import ADVISORY_CRON

ADVISORY_CRON = {
    **ADVISORY_CRON,
    "SCHEDULES": [{"name": "nightly_digest", "job": "send_report", "schedule": "0 3 * * *"}],
}

CELERY_BEAT_SCHEDULE = {
    # A job with a schedule of its own: the import's takes its place.
    "Nightly digest": {"task": "nightly_digest", "schedule": crontab(minute=0, hour=4)},
    # The job it calls, no arguments: the code job's own schedule.
    "send-report": {"task": "send_report", "schedule": crontab(minute=0, hour=6)},
    # The job it calls, with arguments: a schedule of that job, named apart from it.
    "send.report": {"task": "send_report", "schedule": 3600, "args": ["weekly"]},
    # Another job under a look-alike of the code job "purge"'s name.
    "Purge": {"task": "send_report", "schedule": 600},
    "nightly report (all)": {
        "task": "send_report",
        "schedule": crontab(minute=30, hour=2),
        "kwargs": {"period": "night/day"},
    },
}

CRONJOBS = [
    ("0 6 * * *", "tests.jobsapp.import_tasks.send_report", ["daily"]),
    ("*/5 * * * *", "purge", [], {"days": 1}),
    ("0 7 * * *", "tests.jobsapp.import_tasks.send_report"),
    ("0 * * * *", "proj.cron.gone"),
]
