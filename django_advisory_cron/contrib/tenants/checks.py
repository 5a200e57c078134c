"""System checks for per-tenant jobs: ``E080``, this app is not in ``SHARED_APPS`` (its run
table must be the shared schema's, one for every tenant); ``E081``, django-tenants' router
(``TENANT_SYNC_ROUTER``, else its own) is not in ``DATABASE_ROUTERS``, or the lock database
is another database than the tenants' (``TENANT_DB_ALIAS``); ``E082``, a job is
``per_tenant`` but django-tenants is not installed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core import checks

from ...conf import APP_LABEL, CHECK_TAG, app_settings, check_id
from ...jobs.job import registry

#: django-tenants' router, which keeps each app's tables in the schemas its lists say.
ROUTER = "django_tenants.routers.TenantSyncRouter"


def register_checks() -> None:
    """Register the tenants' checks (from the app's ``ready()``)."""
    checks.register(check_tenants, CHECK_TAG)


def check_tenants(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """One error per problem of the per-tenant set-up."""
    per_tenant = [job.name for job in registry.all() if job.per_tenant]
    if not apps.is_installed("django_tenants"):
        return [
            checks.Error(
                f"job {name!r} is per_tenant=True but django-tenants is not installed: its "
                "ticks are not run",
                hint="Install django-advisory-cron[tenants] and set up django-tenants, or "
                "remove per_tenant=True.",
                id=check_id("E082"),
            )
            for name in per_tenant
        ]
    found: list[checks.CheckMessage] = []
    shared = list(getattr(settings, "SHARED_APPS", ()))
    config = apps.get_app_config(APP_LABEL)
    if not {config.name, f"{type(config).__module__}.{type(config).__name__}"} & set(shared):
        found.append(
            checks.Error(
                f"{APP_LABEL} is not in SHARED_APPS: its run table would be made in each "
                "tenant's schema, and per-tenant runs need one shared table",
                hint=f"Add '{APP_LABEL}' to SHARED_APPS (not TENANT_APPS), then run "
                "manage.py migrate_schemas --shared.",
                id=check_id("E080"),
            )
        )
    router = getattr(settings, "TENANT_SYNC_ROUTER", ROUTER)
    if router not in list(getattr(settings, "DATABASE_ROUTERS", ())):
        found.append(
            checks.Error(
                f"django-tenants' router is not in DATABASE_ROUTERS: {APP_LABEL}'s tables may "
                "be made in the wrong schemas",
                hint=f"Add '{router}' to DATABASE_ROUTERS, as django-tenants' set-up says.",
                id=check_id("E081"),
            )
        )
    tenants = getattr(settings, "TENANT_DB_ALIAS", "default")
    lock = app_settings.lock_database
    databases = settings.DATABASES
    if (
        lock in databases
        and tenants in databases
        and databases[lock].get("NAME") != databases[tenants].get("NAME")
    ):
        found.append(
            checks.Error(
                f"the lock database {lock!r} is not the tenants' database {tenants!r}: "
                "per-tenant runs would be recorded apart from the tenants they run for",
                hint="Point ADVISORY_CRON['LOCK_DATABASE'] at the tenants' database (another "
                "alias of it, such as one that bypasses PgBouncer, is fine).",
                id=check_id("E081"),
            )
        )
    return found
