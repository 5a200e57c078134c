"""The Celery target's keys of ``ADVISORY_CRON``: declared with the app's own when this package
is imported (checked, listed and defaulted as theirs), and read here."""

from __future__ import annotations

from ...conf import Setting, _allowed, _names, _seconds, app_settings, declare


def _object_path(value: object) -> str | None:
    if value is None or (
        isinstance(value, str)
        and all(part.isidentifier() for part in value.replace(":", ".").split("."))
    ):
        return None
    return "must be None or the path of an object, such as 'proj.celery:app'"


declare(
    {
        # The Celery app ``deliver="celery"`` sends through ("proj.celery:app"); None: the one
        # the project loaded (its proj/__init__.py imports it, as Celery's Django guide has it).
        "CELERY_APP": Setting(None, "E150", _object_path),
        # Seconds one attempt to reach Celery's broker may take (connect, each read and
        # write); a tick's send makes at most 3 of them, then records the tick failed.
        "CELERY_SEND_TIMEOUT": Setting(5, "E151", _seconds),
        # The Celery tasks a schedule kept in the database may send (deliver="celery"), by the
        # name Celery registers them under; none by default.
        "SCHEDULE_CELERY_TASKS": Setting([], "E177", _names),
    }
)


def app_path() -> str | None:
    """``CELERY_APP``."""
    value = app_settings.value("CELERY_APP")
    return None if value is None else str(value)


def send_timeout() -> float:
    """``CELERY_SEND_TIMEOUT``."""
    return float(app_settings.value("CELERY_SEND_TIMEOUT"))


def schedule_tasks() -> frozenset[str]:
    """``SCHEDULE_CELERY_TASKS``: an invalid one allows nothing (its check says why)."""
    return _allowed(app_settings.value("SCHEDULE_CELERY_TASKS"))
