"""Reporting runs to the monitors people already watch: Sentry Crons, ping URLs, OpenTelemetry,
and the failure notices.

Each integration is a [Reporter][django_advisory_cron.ops.monitoring.Reporter] connected to the
run signals in ``AppConfig.ready`` when its setting enables it. The signals are sent only by
the process that ran the job, so only the replica that ran a tick reports it: a monitor sees
one check-in per tick, never one per replica, and skips send nothing.

A reporter must never fail or delay a job: ``job_started`` is sent inside the run, so every
call is guarded, and a failing integration is logged once (again only after it recovered
and failed anew), not once per run.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from .. import signals
from ..conf import app_settings

logger = logging.getLogger("django_advisory_cron")


class Reporter(Protocol):
    """What an integration does at the start and at the end of a run it ran."""

    #: Shown in log messages: "Sentry Crons", "ping URLs", "OpenTelemetry".
    label: str

    def started(self, job: Any, run: Any) -> None: ...

    def ended(self, job: Any, run: Any) -> None: ...


class Timer:
    """Seconds between a run's start and end, per run object, for the end reports."""

    def __init__(self) -> None:
        self._started: dict[int, float] = {}

    def start(self, run: object) -> None:
        self._started[id(run)] = time.monotonic()

    def stop(self, run: object) -> float | None:
        began = self._started.pop(id(run), None)
        return None if began is None else time.monotonic() - began


def lock_wait(run: Any) -> float | None:
    """Seconds the run spent taking its lock (``None`` when unknown)."""
    lock = getattr(run, "lock", None)
    requested = getattr(lock, "requested_at", None)
    acquired = getattr(lock, "acquired_at", None)
    if requested is None or acquired is None:
        return None
    return max(float(acquired - requested), 0.0)


#: Reporters whose last report failed, by label: their next failure is not logged.
failing: set[str] = set()


def guarded(reporter: Reporter, method: Callable[[Any, Any], None]) -> Callable[..., None]:
    """A signal receiver calling ``method`` that never raises, and logs a failure once."""

    def receive(sender: Any, run: Any = None, **kwargs: Any) -> None:
        if sender is None or run is None:
            return
        try:
            method(sender, run)
        except Exception as error:
            if reporter.label not in failing:
                logger.warning(
                    "%s: reporting job %s failed (%s); the job is not affected, and further "
                    "failures are not logged until a report succeeds",
                    reporter.label,
                    sender.name,
                    error,
                )
            failing.add(reporter.label)
        else:
            failing.discard(reporter.label)

    return receive


#: Each integration: its setting, its module, its class and the package it needs.
INTEGRATIONS = (
    ("SENTRY_CRONS", "sentry", "SentryCrons", "sentry_sdk"),
    ("PING_URL", "pings", "Pings", None),
    ("OPENTELEMETRY", "otel", "Spans", "opentelemetry"),
    ("FAILURE_NOTICES", "notices", "FailureNotices", None),
)


def missing_package(package: str | None) -> bool:
    return package is not None and importlib.util.find_spec(package) is None


def enabled_reporters() -> list[Reporter]:
    """The reporters the settings turn on whose package is installed (system checks
    ``W040``/``W041`` name the others); their modules are imported only then."""
    reporters: list[Reporter] = []
    for setting, module, name, package in INTEGRATIONS:
        if not getattr(app_settings, setting) or missing_package(package):
            continue
        contrib = importlib.import_module(f"django_advisory_cron.contrib.{module}")
        reporters.append(getattr(contrib, name)())
    return reporters


def connect() -> list[Reporter]:
    """Connect the enabled reporters to the run signals (called from ``AppConfig.ready``)."""
    reporters = []
    for reporter in enabled_reporters():
        uid = f"django_advisory_cron.ops.monitoring.{type(reporter).__name__}"
        started = guarded(reporter, reporter.started)
        ended = guarded(reporter, reporter.ended)
        signals.job_started.connect(started, weak=False, dispatch_uid=f"{uid}.started")
        signals.job_finished.connect(ended, weak=False, dispatch_uid=f"{uid}.finished")
        signals.job_failed.connect(ended, weak=False, dispatch_uid=f"{uid}.failed")
        reporters.append(reporter)
    return reporters


def disconnect() -> None:
    """Disconnect every reporter ``connect()`` may have connected (tests, reloads)."""
    for _setting, _module, name, _package in INTEGRATIONS:
        uid = f"django_advisory_cron.ops.monitoring.{name}"
        signals.job_started.disconnect(dispatch_uid=f"{uid}.started")
        signals.job_finished.disconnect(dispatch_uid=f"{uid}.finished")
        signals.job_failed.disconnect(dispatch_uid=f"{uid}.failed")
