"""Test settings for ``cronjob import`` of entries whose schedule names clash: django-crontab
entries have no names, so two that call the same job with the same arguments derive the same
one (``send_report-daily``)."""

from tests.settings_import import *  # noqa: F403

CRONJOBS = [
    ("0 6 * * *", "tests.jobsapp.import_tasks.send_report", ["daily"]),
    ("30 3 * * *", "django.core.management.call_command", ["clearsessions"]),
    ("0 18 * * *", "tests.jobsapp.import_tasks.send_report", ["daily"]),
]
