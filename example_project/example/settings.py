"""Settings of the example site.

The database comes from ``DATABASE_URL``. Without it, the first process starts a throwaway
PostgreSQL cluster and exports its URL, so the replicas it launches share that one server
(which is the whole point: advisory locks live in one PostgreSQL).
"""

import os

from django_advisory_cron.testing import PostgresServer, parse_database_url, start_postgres

#: The cluster this process started, if any; whoever started it stops it.
THROWAWAY: PostgresServer | None = None
if not os.environ.get("DATABASE_URL"):
    THROWAWAY = start_postgres()
    os.environ["DATABASE_URL"] = THROWAWAY.url("postgres")

SECRET_KEY = os.environ.get("SECRET_KEY", "example-only-not-secret")
DEBUG = os.environ.get("DEBUG") == "1"
ALLOWED_HOSTS = ["localhost", "127.0.0.1"]
ROOT_URLCONF = "example.urls"
WSGI_APPLICATION = "example.wsgi.application"
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

DATABASES = {"default": parse_database_url(os.environ["DATABASE_URL"])}

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_advisory_cron",
    "digest",
]

# The demo's django-q2 mode (``demo.py --q2``) sets DEMO_Q2=1 for itself and every replica:
# the jobs are then scheduled through django-q2 clusters on the ORM broker, with no crontab.
if os.environ.get("DEMO_Q2") == "1":
    INSTALLED_APPS.insert(INSTALLED_APPS.index("django_advisory_cron"), "django_q")
    Q_CLUSTER = {
        "name": "demo",
        "orm": "default",
        "workers": 2,
        "timeout": 10,
        # Deliberately shorter than poll_bounces' 3 s (check W061 says so): while a worker
        # still runs a tick, django-q2 hands it to another worker, and that delivery is a
        # recorded skip. In production make it longer than timeout.
        "retry": 2,
        "poll": 0.2,
    }

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
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

STATIC_URL = "static/"

# Every key is optional; these are the defaults, spelled out for readers of the example.
ADVISORY_CRON = {
    "MAX_SKEW": 60,
    "HISTORY_DAYS": 90,
    # A replica that loses a tick writes nothing (the default). The demo sets DEMO=1 for
    # itself and every replica, to record each replica's skip and show its part.
    "RECORD_SKIPS": os.environ.get("DEMO") == "1",
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "django_advisory_cron": {
            "handlers": ["console"],
            "level": os.environ.get("ADVISORY_CRON_LOG_LEVEL", "WARNING"),
        }
    },
}
