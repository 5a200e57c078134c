"""Test settings for ``cronjob import --from crontab`` of django-crontab's three-item form,
``(cron, function, shell suffix)``: its third item is the suffix of the crontab line, not
arguments, when it is a string (django-crontab's ``add_jobs`` and ``run_job``)."""

from tests.settings_import import *  # noqa: F403

CRONJOBS = [
    ("0 6 * * *", "tests.jobsapp.import_tasks.send_report", ">> report.log 2>&1"),
    ("30 3 * * *", "purge", ">> purge.log", {"days": 2}),
    # django-crontab's README's own example.
    ("@reboot", "purge", ">> boot.log"),
]
