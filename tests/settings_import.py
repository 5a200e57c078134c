"""Test settings for ``cronjob import``: django-q2 and (where it installs) django-celery-beat
beside their tables, a ``CELERY_BEAT_SCHEDULE`` of real celery schedules and a
django-crontab ``CRONJOBS``, calling the jobs of ``tests/jobsapp/import_tasks.py``.
The tests run ``manage.py cronjob import`` with ``--settings tests.settings_import``."""

import importlib.util
from datetime import timedelta

from celery.schedules import crontab, schedule, solar

from tests.settings_q2 import *  # noqa: F403
from tests.settings_q2 import INSTALLED_APPS

#: django-celery-beat supports Django < 6.1 only (the test extra leaves it out on Python 3.12+).
HAS_BEAT = importlib.util.find_spec("django_celery_beat") is not None
if HAS_BEAT:
    INSTALLED_APPS = [*INSTALLED_APPS, "django_celery_beat"]

ADVISORY_CRON = {
    "JOBS_MODULE": "import_tasks",
    # The Celery tasks CELERY_BEAT_SCHEDULE and the periodic tasks below name (--deliver celery).
    "SCHEDULE_CELERY_TASKS": [
        *("tests.jobsapp.import_tasks.send_report", "tests.jobsapp.import_tasks.purge_tokens"),
        *("send_report", "purge", "proj.tasks.gone"),
    ],
}

CELERY_TIMEZONE = "Europe/Paris"
CELERY_BEAT_SCHEDULE = {
    "weekday-report": {
        "task": "tests.jobsapp.import_tasks.send_report",
        "schedule": crontab(minute="*/15", hour="9-17", day_of_week="mon-fri"),
        "kwargs": {"period": "hourly"},
        "options": {"queue": "reports"},
    },
    "purge-every-10-minutes": {
        "task": "tests.jobsapp.import_tasks.purge_tokens",
        "schedule": timedelta(minutes=10),
        "args": (7,),
    },
    "report-by-name": {"task": "send_report", "schedule": 30.0},
    "report-by-schedule": {"task": "send_report", "schedule": schedule(timedelta(hours=1))},
    "at-dawn": {"task": "send_report", "schedule": solar("dawn_civil", 48.85, 2.35)},
    "first-monday": {
        "task": "send_report",
        "schedule": crontab(minute=0, hour=8, day_of_month="1-7", day_of_week="mon"),
    },
    "unknown-task": {"task": "proj.tasks.gone", "schedule": crontab(minute=0)},
    "bad-arguments": {"task": "purge", "schedule": 60, "kwargs": {"weeks": 2}},
}

CRONJOBS = [
    ("0 6 * * *", "tests.jobsapp.import_tasks.send_report", ["daily"]),
    ("30 3 * * *", "django.core.management.call_command", ["clearsessions"]),
    ("*/5 * * * *", "purge", [], {"days": 1}, "> purge.log 2>&1"),
    ("0 * * * *", "proj.cron.gone"),
]
