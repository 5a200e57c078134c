"""The versions of the database's schedules, which the table's trigger keeps (migration 0026):
writing a schedule in someone's name and with a note, a schedule's versions with what each
changed, the version a run ran under, and going back to a version."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import DataError, IntegrityError, transaction

from ..core.schedule_diff import Change, State, diff, one_line
from ..db import sql
from ..db.execute import fetch_one
from ..exceptions import first_line
from ..models import Schedule, ScheduleVersion
from . import catalog
from .definitions import Definition
from .job import registry


class VersionRefused(Exception):
    """A version that cannot be read or gone back to: why, in one line."""


@contextmanager
def changing(alias: str, who: str, note: str = "") -> Iterator[None]:
    """A transaction on ``alias`` whose writes to the schedules are versions by ``who``, for
    the reason ``note``."""
    with transaction.atomic(using=alias):
        fetch_one(alias, sql.change_said(who=who, note=note))
        yield


@dataclass(frozen=True)
class Version:
    """One version of a schedule, and the state it followed (``None``: none, or removed)."""

    name: str
    number: int
    recorded: datetime
    changed_by: str
    note: str
    state: State | None
    before: State | None

    @property
    def changes(self) -> list[Change]:
        return diff(self.before, self.state)

    @property
    def summary(self) -> str:
        """What it changed, in a line."""
        return one_line(self.before, self.state)

    def as_json(self) -> dict[str, Any]:
        return {
            "version": self.number,
            "recorded": self.recorded.isoformat(),
            "changed_by": self.changed_by,
            "note": self.note,
            "diff": self.summary,
            "changes": [
                {"field": c.field, "old": _plain(c.old), "new": _plain(c.new)} for c in self.changes
            ],
            "state": self.state,
        }


def _plain(value: Any) -> Any:
    """A field's value for JSON: a field a version does not have is ``null``."""
    return value if isinstance(value, (str, int, float, bool, list, dict)) else None


def versions(alias: str, name: str) -> list[Version]:
    """The versions of the schedule ``name``, newest first."""
    rows = ScheduleVersion.objects.using(alias).filter(name=name).order_by("number")
    found: list[Version] = []
    before: State | None = None
    for row in rows:
        found.append(
            Version(name, row.number, row.recorded, row.changed_by, row.note, row.state, before)
        )
        before = row.state
    return found[::-1]


def version(alias: str, name: str, number: int) -> Version:
    """Version ``number`` of ``name``; ``VersionRefused`` says what there is instead."""
    kept = versions(alias, name)
    if not kept:
        raise VersionRefused(
            f"no schedule named {name!r} has versions (only the database's schedules and "
            "overrides have them; see cronjob list)"
        )
    for found in kept:
        if found.number == number:
            return found
    raise VersionRefused(
        f"schedule {name!r} has no version {number}: its versions are 1 to {kept[0].number} "
        f"(see cronjob versions {name})"
    )


def ran_under(alias: str, runs: Iterable[tuple[str, datetime]]) -> dict[tuple[str, datetime], int]:
    """The version each ``(job, started)`` ran under: the last one recorded at or before its
    start (a job with no version then has none in the answer). One query for them all."""
    wanted = list(runs)
    recorded: dict[str, tuple[list[datetime], list[int]]] = {}
    rows = (
        ScheduleVersion.objects.using(alias)
        .filter(name__in={job for job, _started in wanted})
        .order_by("name", "recorded", "number")
        .values_list("name", "recorded", "number")
    )
    for name, when, number in rows:
        times, numbers = recorded.setdefault(name, ([], []))
        times.append(when)
        numbers.append(number)
    found: dict[tuple[str, datetime], int] = {}
    for job, started in wanted:
        times, numbers = recorded.get(job, ([], []))
        place = bisect.bisect_right(times, started)
        if place:
            found[(job, started)] = numbers[place - 1]
    return found


def revert(alias: str, name: str, number: int, who: str, note: str = "") -> str:
    """Make the schedule ``name`` what version ``number`` says (the row gone, for a version
    that removed it), itself a new version by ``who``; a line saying what was done."""
    target = version(alias, name, number)
    latest = versions(alias, name)[0]
    if latest.state == target.state:
        return f"{name}: already as version {number} says; nothing to do."
    said = f"revert to version {number}" + (f": {note}" if note else "")
    rows = Schedule.objects.using(alias)
    try:
        with changing(alias, who, said):
            if target.state is None:
                rows.filter(name=name).delete()
            else:
                values = _values(target.state)
                _check(alias, name, values)
                rows.update_or_create(name=name, defaults={**values, "changed_by": who})
    except (IntegrityError, DataError) as error:
        raise VersionRefused(f"the database refused it: {first_line(error)}") from None
    now = versions(alias, name)[0]
    return f"{name}: reverted to version {number} as version {now.number} ({now.summary})."


def _values(state: State) -> dict[str, Any]:
    """A version's state as the model's fields (its times read back as times)."""
    return {
        field.attname: field.to_python(state[field.attname])
        for field in Schedule._meta.concrete_fields
        if field.attname in state and field.attname not in ("id", "name")
    }


def _check(alias: str, name: str, values: dict[str, Any]) -> None:
    """Refuse a version that could not run now (a job it calls left the code, ...)."""
    definition = Definition.from_values({"name": name, **values})
    if definition.override and name not in registry:
        raise VersionRefused(
            "that version overrides a job no longer defined in code; 'manage.py cronjob "
            f"reset {name}' drops an override"
        )
    known = [] if definition.override else catalog.current(alias).all()
    problems = definition.problems(known=[job for job in known if job.name != name])
    if problems:
        raise VersionRefused(f"that version cannot run now: {'; '.join(problems)}")
