"""A django-tenants project for the per-tenant jobs' tests (tests/test_tenants.py): its own
database (the test runs ``migrate_schemas`` on a scratch one), the app in ``SHARED_APPS``,
django-tenants' router, the per-tenant job of tests/tenantsapp, and the admin and the
app's views (read in the project's own process: tests/tenantsapp/pages.py)."""

import os

from tests.settings import *  # noqa: F403
from tests.settings import ADVISORY_CRON, DATABASES

DATABASES = {
    "default": {**DATABASES["default"], "ENGINE": "django_tenants.postgresql_backend"},
}
DATABASE_ROUTERS = ["django_tenants.routers.TenantSyncRouter"]
SHARED_APPS = [
    "django_tenants",
    "django.contrib.admin",
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django_advisory_cron",
    "tests.tenantsapp",
]
TENANT_APPS = ["tests.tenantdata"]
if os.environ.get("TENANTS_NOT_SHARED"):  # what check E080 says: the app among the tenants'
    SHARED_APPS.remove("django_advisory_cron")
    TENANT_APPS.append("django_advisory_cron")
INSTALLED_APPS = [*SHARED_APPS, *(app for app in TENANT_APPS if app not in SHARED_APPS)]
TENANT_MODEL = "tenantsapp.Client"
TENANT_DOMAIN_MODEL = "tenantsapp.Domain"
ROOT_URLCONF = "tests.tenantsapp.urls"
ADVISORY_CRON = {**ADVISORY_CRON, "SCHEDULE_COMMANDS": [], "SCHEDULE_CELERY_TASKS": []}
if os.environ.get("TENANTS_NO_ROUTER"):  # django-tenants refuses to start without its router
    DATABASE_ROUTERS = []
if os.environ.get("TENANTS_OWN_ROUTER"):  # a router of the project's own, as django-tenants allows
    TENANT_SYNC_ROUTER = "tests.tenantsapp.routers.Router"
    DATABASE_ROUTERS = [TENANT_SYNC_ROUTER]
if os.environ.get("TENANTS_LOCKS_ELSEWHERE"):  # what check E081 says of the lock database
    DATABASES["locks"] = {**DATABASES["default"], "NAME": "somewhere_else"}
    ADVISORY_CRON = {**ADVISORY_CRON, "LOCK_DATABASE": "locks"}
if os.environ.get("TENANTS_LOCKS_DIRECT"):  # another alias of the same database: no error
    DATABASES["locks"] = {**DATABASES["default"], "ENGINE": "django.db.backends.postgresql"}
    ADVISORY_CRON = {**ADVISORY_CRON, "LOCK_DATABASE": "locks"}
if os.environ.get("TENANTS_SCHEDULES"):  # a schedule of the settings for one tenant
    ADVISORY_CRON = {
        **ADVISORY_CRON,
        "SCHEDULES": [
            {"name": "globex_digest", "job": "tenant_digest", "every": 2, "per_tenant": "globex"}
        ],
    }
