"""Django for the benchmarks: the test suite's apps on DATABASE_URL or a durable throwaway
PostgreSQL."""

from __future__ import annotations

from typing import Any

import django
from django.conf import settings

from benchmarks.measure import Observer, url_or_server
from django_advisory_cron.testing import parse_database_url


def setup() -> tuple[Any, str]:
    """Configure and migrate, and print the server's header line; return the throwaway server
    (or None) and the database URL."""
    url, server = url_or_server()
    settings.configure(
        DEBUG=False,
        SECRET_KEY="benchmark-only",
        ALLOWED_HOSTS=["testserver"],
        ROOT_URLCONF="tests.urls",
        USE_TZ=True,
        DATABASES={"default": parse_database_url(url)},
        INSTALLED_APPS=[
            "django.contrib.admin",
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.sessions",
            "django.contrib.messages",
            "django_advisory_cron",
        ],
        MIDDLEWARE=[
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
            "django.contrib.messages.middleware.MessageMiddleware",
        ],
        TEMPLATES=[
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
        ],
        # Warm lock connections, as in a scheduler process (a plain process keeps none); the
        # commands bench_catalog's schedules call.
        ADVISORY_CRON={
            "JOBS_MODULE": "bench_jobs_none",
            "LOCK_POOL_SIZE": 8,
            "SCHEDULE_COMMANDS": ["clearsessions", "sendtestemail"],
        },
    )
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    observer = Observer(url)
    print(observer.header())
    observer.close()
    return server, url


def hourly_jobs_and_admin(count: int) -> tuple[Any, Any]:
    """Register ``count`` hourly jobs, ``bench.job0`` ..., each at minute ``number % 60``, and
    a superuser; return the user and a test client logged in as them."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from django_advisory_cron import locked_task

    for number in range(count):
        locked_task(name=f"bench.job{number}", schedule=f"{number % 60} * * * *")(lambda: None)
    user = get_user_model().objects.create_superuser("bench", password="bench")
    client = Client()
    client.force_login(user)
    return user, client
