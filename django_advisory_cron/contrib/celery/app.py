"""The Celery app ``deliver="celery"`` sends through: ``ADVISORY_CRON["CELERY_APP"]``, else
the one the project loaded as Celery's Django guide has it (``proj/celery.py`` makes
``app = Celery("proj")``, and ``proj/__init__.py`` imports it, so it exists once Django has
read its settings).

Celery is imported only when a tick is sent or checked, never at start-up, so a project
without Celery loads this app unchanged.
"""

from __future__ import annotations

import importlib
from typing import Any

from ...delivery.targets import DeliveryError
from ...exceptions import first_line
from .conf import app_path

NOT_INSTALLED = (
    "Celery is not installed: pip install celery, with its broker's extra (e.g. 'celery[redis]')"
)

#: What to do when no app is found, for the messages.
SET_THE_APP = (
    "import the project's Celery app where Django starts (proj/__init__.py, as Celery's "
    "Django guide has it), or name it in ADVISORY_CRON['CELERY_APP'] ('proj.celery:app')"
)


def installed() -> bool:
    """Whether Celery can be imported here."""
    try:
        importlib.import_module("celery")
    except ImportError:
        return False
    return True


def celery_app() -> Any:
    """The project's Celery app; raises
    [DeliveryError][django_advisory_cron.delivery.targets.DeliveryError] without Celery, when the
    setting names nothing importable, or when no app (or more than one) is loaded."""
    if not installed():
        raise DeliveryError(NOT_INSTALLED)
    path = app_path()
    if path is not None:
        return _imported(path)
    # Every Celery app made in this process; celery keeps them in its private ``_state``
    # (its current app is thread-local, so a scheduler's threads would not see it), and makes
    # a fallback app named "default", with no configuration, when asked for one before any.
    from celery import _state

    fallback = _state.default_app
    apps = [
        app for app in _state._get_active_apps() if not (app is fallback and app.main == "default")
    ]
    if len(apps) == 1:
        return apps[0]
    current = getattr(_state._tls, "current_app", None)
    if current in apps:
        return current
    if not apps:
        raise DeliveryError(f"no Celery app is loaded: {SET_THE_APP}")
    names = ", ".join(sorted(repr(app.main) for app in apps))
    raise DeliveryError(
        f"several Celery apps are loaded ({names}): name one in ADVISORY_CRON['CELERY_APP']"
    )


def _imported(path: str) -> Any:
    module, colon, attribute = path.partition(":")
    if not colon:
        module, _dot, attribute = path.rpartition(".")
    try:
        app = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as error:
        raise DeliveryError(
            f"ADVISORY_CRON['CELERY_APP'] is {path!r}, which cannot be imported: "
            f"{first_line(error)}"
        ) from None
    if not callable(getattr(app, "send_task", None)):
        raise DeliveryError(f"ADVISORY_CRON['CELERY_APP'] is {path!r}, which is not a Celery app")
    return app
