"""Test settings for ``cronjob import`` of a celery-beat entry whose interval a job cannot
have: 100 nanoseconds, no ``timedelta`` (issue 33)."""

from tests.settings_import import *  # noqa: F403

CELERY_BEAT_SCHEDULE = {"every-100-ns": {"task": "send_report", "schedule": 1e-7}}
