"""The per-tenant checks where a real django-tenants project cannot reach them: ``E082`` (a
per-tenant job in a project without django-tenants, as this tier's settings are) and the
router half of ``E081`` (django-tenants itself refuses to start without its router, so only
a project whose settings changed after start-up gets there). tests/test_tenants_checks.py
runs the others through ``manage.py check`` of a real django-tenants project."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.core import checks
from django.test import override_settings

from django_advisory_cron import locked_task
from django_advisory_cron.conf import CHECK_TAG
from django_advisory_cron.contrib.tenants import checks as tenant_checks

pytestmark = pytest.mark.usefixtures("fresh_registry")


class Router:
    """A project's own tenant router (``TENANT_SYNC_ROUTER``), routing nothing here."""


def found(ids: set[str]) -> list[checks.CheckMessage]:
    """The messages of ``ids`` among this app's checks, with no database's (this tier has none;
    Django 6.1 runs the database checks unless told which databases)."""
    return [
        message
        for message in checks.run_checks(tags=[CHECK_TAG], databases=[])
        if (message.id or "").rpartition(".")[2] in ids
    ]


def test_a_per_tenant_job_without_django_tenants_is_e082_naming_it() -> None:
    assert found({"E080", "E081", "E082"}) == []

    @locked_task(name="per_tenant_digest", every=60, per_tenant=True)
    def digest() -> None: ...

    [message] = found({"E080", "E081", "E082"})
    assert message.id == "django_advisory_cron.E082"
    assert "'per_tenant_digest'" in message.msg and "\n" not in message.msg
    assert message.hint is not None and "per_tenant=True" in message.hint


def test_the_tenant_router_missing_is_e081(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(apps, "is_installed", lambda name: name in {"django_tenants"})
    with override_settings(SHARED_APPS=["django_advisory_cron"], DATABASE_ROUTERS=[]):
        [message] = tenant_checks.check_tenants()
    assert message.id == "django_advisory_cron.E081"
    assert "DATABASE_ROUTERS" in message.msg and "\n" not in message.msg
    assert message.hint is not None and tenant_checks.ROUTER in message.hint
    with override_settings(
        SHARED_APPS=["django_advisory_cron"],
        TENANT_SYNC_ROUTER="tests.unit.test_tenants_checks.Router",
        DATABASE_ROUTERS=["tests.unit.test_tenants_checks.Router"],
    ):
        assert tenant_checks.check_tenants() == []  # the project's own router is the router
