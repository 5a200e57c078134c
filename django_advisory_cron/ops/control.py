"""Pause, resume and "run now": what an operator says about a job, kept in the ``JobState``
table (a row only for a job someone paused or triggered).

The run path reads a pause inside its acquiring statement (no extra round trip), and a
``cronworker`` claims "run now" requests. This module is what ``manage.py cronjob`` and the
admin's Jobs page call to change that state.
"""

from __future__ import annotations

import getpass
import re
from datetime import datetime, timedelta

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from ..core import moments
from ..db import sql
from ..db.aliases import lock_database
from ..db.execute import fetch_one
from ..models import JobState
from ..run.history import HOST

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(w|d|h|m|min|s)", re.IGNORECASE)
_UNIT_SECONDS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "min": 60, "s": 1}


def parse_until(text: str, now: datetime) -> datetime:
    """When a pause given as ``text`` ends: an ISO 8601 date-time (without an offset it is in
    ``TIME_ZONE``) or a duration from ``now`` such as ``90s``, ``30m``, ``2h``, ``1d`` or
    ``1h30m``. Raises ``ValueError`` with a one-line message; a time not after ``now``, or
    not within the span of date-times accepted (``core/moments``), too."""
    until = parse_moment(text, now)
    if until <= now:
        raise ValueError(f"{text!r} is not in the future (the database's clock says {now:%c})")
    return until


def parse_moment(text: str, now: datetime, *, back: bool = False) -> datetime:
    """The moment ``text`` names, read as ``parse_until`` reads it, a duration counted from
    ``now`` (``back``: before it, as ``cronjob backfill --start 2d`` is two days ago). Raises
    ``ValueError`` with a one-line message, also for a moment outside the span accepted."""
    cleaned = text.strip()
    parts = _DURATION.findall(cleaned)
    if parts and _DURATION.sub("", cleaned).strip() == "":
        seconds = sum(float(number) * _UNIT_SECONDS[unit.lower()] for number, unit in parts)
        try:
            moment = now + timedelta(seconds=-seconds if back else seconds)
        except OverflowError:  # past what a date-time holds: outside the span, said below
            moment = moments.EARLIEST if back else moments.LATEST
            moment += timedelta(days=-1 if back else 1)
    else:
        try:
            parsed = parse_datetime(cleaned)
        except ValueError:
            parsed = None
        if parsed is None:
            raise ValueError(
                f"{text!r} is neither a duration (90s, 30m, 2h, 1d, 1h30m) nor an ISO 8601 "
                "date-time (2026-12-24T08:00, 2026-12-24T08:00+01:00)"
            )
        moment = parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed)
    if not moments.within(moment):
        shown = text if len(text) <= 40 else f"{text[:37]}..."
        raise ValueError(f"{shown!r} is outside {moments.SPAN}")
    return moment


def operator() -> str:
    """Who is acting, from a shell: ``user@host``."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):
        user = "unknown"
    return f"{user}@{HOST}"[:150]


def _one(alias: str, statement: sql.Statement) -> tuple[object, ...]:
    row = fetch_one(alias, statement)
    assert row is not None
    return row


def state(name: str, using: str | None = None) -> JobState | None:
    return JobState.objects.using(lock_database(using)).filter(job=name).first()


def states(using: str | None = None) -> dict[str, JobState]:
    """Every job's state row, by name (jobs nobody paused or triggered have none)."""
    return {row.job: row for row in JobState.objects.using(lock_database(using))}


def is_paused(row: JobState | None, now: datetime) -> bool:
    """Whether ``row`` pauses its job at ``now`` (a pause past its ``paused_until`` does not)."""
    return row is not None and row.paused and (row.paused_until is None or row.paused_until > now)


def describe_pause(row: JobState) -> str:
    """``paused by alice until 2026-12-24 08:00 UTC: disk full`` (the "until" and the reason
    only when set)."""
    text = "paused"
    if row.paused_by:
        text += f" by {row.paused_by}"
    if row.paused_until is not None:
        until = timezone.localtime(row.paused_until)
        text += f" until {until:%Y-%m-%d %H:%M:%S} {until.tzname()}"
    if row.reason:
        text += f": {row.reason}"
    return text


def pause(
    name: str,
    *,
    until: datetime | None = None,
    by: str = "",
    reason: str = "",
    using: str | None = None,
) -> JobState:
    """Pause ``name``: its ticks are skipped instead of run, by ``runlocked`` and
    ``cronworker`` alike, until resumed or until ``until`` (recorded as ``skipped_paused``
    rows only with ``RECORD_SKIPS``)."""
    row, _created = JobState.objects.using(lock_database(using)).update_or_create(
        job=name,
        defaults={
            "paused": True,
            "paused_at": timezone.now(),
            "paused_until": until,
            "paused_by": by[:150],
            "reason": reason,
        },
    )
    return row


def resume(name: str, *, using: str | None = None) -> JobState | None:
    """Resume ``name``; returns its state as it was, or ``None`` when it had none.

    The pause's start and end stay on the state: the ticks between them were decided (see
    [recorded_ticks][django_advisory_cron.jobs.catchup.recorded_ticks]), not missed."""
    alias = lock_database(using)
    before = state(name, alias)
    if before is not None:
        now = timezone.now()
        ended = before.paused_until if not is_paused(before, now) else now
        JobState.objects.using(alias).filter(job=name).update(
            paused=False, paused_until=ended, paused_by="", reason="", changed=now
        )
    return before


def request_run(name: str, *, by: str, using: str | None = None) -> datetime:
    """Ask the running workers to run ``name`` now (once, whichever worker claims it) and wake
    them; a request still pending is kept, not doubled. Returns when it was requested."""
    requested = _one(lock_database(using), sql.request_run(job=name, by=by[:150]))[0]
    assert isinstance(requested, datetime)
    return requested
