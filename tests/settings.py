"""Settings for the test suite: a real PostgreSQL, from DATABASE_URL or a throwaway cluster.

Subprocesses started by the tests (``manage.py runlocked``) import these settings too; they
inherit ``DATABASE_URL`` from the test process, so only the first process starts a server.

Under pytest-xdist every worker starts a cluster of its own (tests restart the server, read
``pg_locks`` and ``pg_stat_activity`` server-wide, and terminate backends): a cluster is
started when ``DATABASE_URL`` is unset, or when it names a cluster that ``TESTS_THROWAWAY_FOR``
says another process (the xdist controller, another worker) started. A subprocess of worker
``gw0`` inherits ``PYTEST_XDIST_WORKER=gw0`` and ``TESTS_THROWAWAY_FOR=gw0``, so it reuses that
worker's cluster. A ``DATABASE_URL`` given by the user (``TESTS_THROWAWAY_FOR`` unset) is used
as it is, and the suite then runs serially (tests/conftest.py).
"""

import json
import os
import sys
from typing import NoReturn

from django_advisory_cron.testing import (
    PostgresServer,
    PostgresSetupError,
    parse_database_url,
    start_postgres,
)


def cannot_start(error: PostgresSetupError) -> NoReturn:
    """Stop with one line saying what to do: pytest's usage error under pytest, else an exit."""
    message = f"The tests need PostgreSQL. {error}"
    if "pytest" in sys.modules:
        import pytest

        raise pytest.UsageError(message) from None
    raise SystemExit(message)


#: Which process's throwaway cluster this is: an xdist worker's name, else "main".
OWNER = os.environ.get("PYTEST_XDIST_WORKER", "main")

#: The cluster this process started, if any (tests that restart PostgreSQL need it).
THROWAWAY: PostgresServer | None = None
if not os.environ.get("DATABASE_URL") or os.environ.get("TESTS_THROWAWAY_FOR", OWNER) != OWNER:
    try:
        THROWAWAY = start_postgres()
    except PostgresSetupError as error:
        cannot_start(error)
    os.environ["DATABASE_URL"] = THROWAWAY.url("postgres")
    os.environ["TESTS_THROWAWAY_FOR"] = OWNER

SECRET_KEY = "tests-only-not-secret"
#: A fast hasher, as Django's testing docs advise: the tests log users in many times, and on a
#: loaded machine each PBKDF2 hash took seconds (a browser's login outwaited its 15 s).
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "tests.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

DATABASES = {
    "default": parse_database_url(os.environ["DATABASE_URL"]),
    "sqlite": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
}
if os.environ.get("TESTS_SECOND_ALIAS"):
    # The subprocesses of tests with jobs on "another database": a second alias of the same
    # one, so that its lock connections are told apart by alias.
    DATABASES["second"] = parse_database_url(os.environ["DATABASE_URL"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django_advisory_cron",
    "tests.jobsapp",
]

MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"django_advisory_cron": {"handlers": ["console"], "level": "INFO"}},
}

# Subprocesses started by a test may set ADVISORY_CRON (a JSON object), e.g. another
# JOBS_MODULE or a shorter HEARTBEAT.
ADVISORY_CRON = json.loads(os.environ.get("ADVISORY_CRON_JSON") or "{}")
# The commands and Celery tasks the tests' database schedules call (never shell and the like,
# which the allow-list tests try).
TEST_SCHEDULE_COMMANDS = [
    *("check", "clearsessions", "flakymark", "loud", "marker", "noop"),
    *("migrate", "sendtestemail"),  # their arguments are checked, never run
]
TEST_CELERY_TASKS = ["tests.record_tick", "billing.ping"]
ADVISORY_CRON.setdefault("SCHEDULE_COMMANDS", TEST_SCHEDULE_COMMANDS)
ADVISORY_CRON.setdefault("SCHEDULE_CELERY_TASKS", TEST_CELERY_TASKS)
