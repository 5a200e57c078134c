"""Which Tasks framework this process has: Django's own ``django.tasks`` (Django 6.0 and
later), else the ``django-tasks`` backport (Django 5.2), else none.

Imported only when a tick is delivered or checked, never at start-up, so a project without a
Tasks framework (or without a ``"default"`` backend) loads this app unchanged.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ...delivery.targets import DeliveryError

NOT_INSTALLED = (
    "no Tasks framework is installed: Django 6.0+ has django.tasks; on Django 5.2 "
    "pip install 'django-advisory-cron[tasks]' (the django-tasks backport)"
)


def framework() -> ModuleType:
    """``django.tasks`` or ``django_tasks``; raises
    [DeliveryError][django_advisory_cron.delivery.targets.DeliveryError] when neither is
    installed."""
    for name in ("django.tasks", "django_tasks"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise DeliveryError(NOT_INSTALLED)


def installed() -> bool:
    """Whether a Tasks framework can be imported here."""
    try:
        framework()
    except DeliveryError:
        return False
    return True


def errors() -> tuple[type[Exception], ...]:
    """What the framework raises for a bad backend or task: its ``ImproperlyConfigured``
    subclass for backends, ``TaskException`` for tasks (the names differ between the two)."""
    from django.core.exceptions import ImproperlyConfigured

    exceptions = importlib.import_module(f"{framework().__name__}.exceptions")
    return (ImproperlyConfigured, exceptions.TaskException)
