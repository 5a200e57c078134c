"""Test settings with django-q2 on the ORM broker, for the ``qcluster`` subprocesses.

The pytest process keeps ``tests.settings``; the q2 tests run ``manage.py`` with
``--settings tests.settings_q2`` against the same test database. ``Q2_RETRY``, ``Q2_TIMEOUT``,
``Q2_GUARD_CYCLE``, ``Q2_SYNC_ON_MIGRATE`` and ``Q2_RECORD_SKIPS`` in the environment let one
test tune a cluster.
"""

import os

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "django_q"]

Q_CLUSTER = {
    "name": "advisory-cron-tests",
    "orm": "default",
    "workers": 2,
    "timeout": int(os.environ.get("Q2_TIMEOUT", "30")),
    "retry": int(os.environ.get("Q2_RETRY", "60")),
    "poll": 0.2,
    # django-q2's guard calls the scheduler once its cycles add up to 30 s: with 30 it calls it
    # on the first cycle, as the cluster starts, and every 30 s after (as with the default).
    "guard_cycle": float(os.environ.get("Q2_GUARD_CYCLE", "0.5")),
    "catch_up": False,
    "ack_failures": False,
    "max_attempts": 0,
    "log_level": "INFO",
}

ADVISORY_CRON = {
    "SYNC_ON_MIGRATE": os.environ.get("Q2_SYNC_ON_MIGRATE", "") == "1",
    "RECORD_SKIPS": os.environ.get("Q2_RECORD_SKIPS", "") == "1",
}
