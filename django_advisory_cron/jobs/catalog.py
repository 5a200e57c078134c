"""Every job a process knows: those defined in code (``@locked_task``,
``ADVISORY_CRON["SCHEDULES"]``) as the database's overrides change them, and the schedules kept
in the database.

Read in one statement ([read][django_advisory_cron.jobs.catalog.read]); every path that runs or
shows jobs (``cronworker``, ``runlocked``, ``cronjob``, ``cronstatus``, the admin, the
metrics) goes through it, so a schedule added in the admin is a job like the others. A
database schedule that cannot be made into a job any more (the job it calls was removed from
the code) is left out and reported, never run.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.core.signals import setting_changed
from django.db.backends.base.base import BaseDatabaseWrapper
from django.dispatch import receiver

from ..conf import app_settings
from ..db import sql
from ..db.connections import require_postgresql
from ..db.execute import fetch_all
from ..exceptions import UnknownJob, first_line
from .definitions import Definition, overridden, to_job
from .job import Job, registry
from .options import BY_NAME

logger = logging.getLogger("django_advisory_cron")


@dataclass(frozen=True)
class Catalog:
    """The jobs as the database's schedules make them, at one ``version`` of those."""

    #: Changes with every write or delete of the database's schedules.
    version: str
    #: Every job by name: code and settings jobs (overridden where an override says so),
    #: then the database's schedules.
    jobs: dict[str, Job[..., Any]]
    #: The database's schedules, as read.
    definitions: list[Definition] = field(default_factory=list)
    #: Database schedules left out, and why (one line each).
    broken: dict[str, str] = field(default_factory=dict)

    def get(self, name: str) -> Job[..., Any]:
        """The job named ``name``; raises ``UnknownJob``."""
        try:
            return self.jobs[name]
        except KeyError:
            raise UnknownJob(name) from None

    def __contains__(self, name: object) -> bool:
        return name in self.jobs

    def __iter__(self) -> Iterator[Job[..., Any]]:
        return iter(self.all())

    def all(self) -> list[Job[..., Any]]:
        """Every job, by name."""
        return sorted(self.jobs.values(), key=lambda job: job.name)

    def definition(self, name: str) -> Definition | None:
        """The database's schedule named ``name`` (an override included), or ``None``."""
        return next((d for d in self.definitions if d.name == name), None)


def build(
    definitions: list[Definition], version: str = "", unreadable: dict[str, str] | None = None
) -> Catalog:
    """The catalog the code's jobs and these database ``definitions`` make; those named in
    ``unreadable`` (a row that could not be read whole) are left out with its reason.

    Whatever one row holds, the others are made: a row that cannot be made into a job is
    left out and reported, never raised (every command and every worker reads this)."""
    code = {job.name: job for job in registry.all()}
    jobs = dict(code)
    broken: dict[str, str] = dict(unreadable or {})
    made: dict[str, Job[..., Any]] = {}
    for definition in definitions:
        if definition.name in broken:
            continue
        try:
            if definition.override and definition.name not in code:
                broken[definition.name] = (
                    f"it overrides job {definition.name!r}, which is no longer defined in code"
                )
                continue
            problems = definition.problems(known=code.values())
            if problems:
                broken[definition.name] = problems[0]
            elif definition.override:
                jobs[definition.name] = overridden(code[definition.name], definition)
            else:
                made[definition.name] = to_job(definition)
        except Exception as error:  # the rules' own gap: this row is out, the others run
            broken[definition.name] = f"it cannot be made into a job: {first_line(error)}"
    broken.update(_sharing_locks(made.values()))
    jobs.update((name, job) for name, job in made.items() if name not in broken)
    return Catalog(version, jobs, definitions, broken)


def _sharing_locks(jobs: Iterable[Job[..., Any]]) -> dict[str, str]:
    """Why each database schedule whose lock key is another's cannot run. Each was checked
    against the others when it was written, but two written at once (or in SQL) were not:
    both are left out, as neither came first by any measure that outlives a rename."""
    by_key: dict[tuple[int, int], list[str]] = {}
    for job in jobs:
        by_key.setdefault((job.key.namespace, job.key.objid), []).append(job.name)
    return {
        name: f"it has the same lock key as schedule {', '.join(map(repr, others))}; "
        "rename one of them"
        for names in by_key.values()
        if len(names) > 1
        for name in names
        if (others := [other for other in names if other != name])
    }


@dataclass(frozen=True)
class _Made:
    """A catalog with what it was made from: the rows read and the code's jobs."""

    rows: list[tuple[Any, ...]]
    code: list[Job[..., Any]]
    catalog: Catalog

    def made_from(self, rows: list[tuple[Any, ...]], code: list[Job[..., Any]]) -> bool:
        return (
            rows == self.rows
            and len(code) == len(self.code)
            and all(a is b for a, b in zip(code, self.code, strict=True))
        )


#: The catalog this process made last. The same rows and code jobs make the same catalog, so
#: a read that finds nothing changed does not check every schedule again: with 200 command
#: schedules such a read costs what its statement costs, where the checks cost 16 times that
#: (``benchmarks/bench_catalog.py``).
_last: _Made | None = None


@receiver(setting_changed)
def _forget(**kwargs: Any) -> None:
    """Settings decide what a schedule may call (the installed apps' commands, the app's own
    settings): a test that changes them reads the schedules afresh."""
    global _last
    _last = None


def read(connection: BaseDatabaseWrapper) -> Catalog:
    """The catalog, its database schedules read over ``connection`` in one statement."""
    global _last
    rows = [tuple(row) for row in fetch_all(connection, sql.schedule_rows())]
    code = registry.all()
    last = _last
    if last is not None and last.made_from(rows, code):
        return last.catalog
    names = (*BY_NAME, "changed", "unreadable")
    definitions, unreadable = [], {}
    for row in rows:
        if row[0] is None:
            continue
        definition, why = _definition(dict(zip(names, row, strict=False)))
        definitions.append(definition)
        if why:
            unreadable[definition.name] = why
    catalog = build(definitions, rows[0][-1] if rows else "", unreadable)
    _last = _Made(rows, code, catalog)
    return catalog


#: The times of a row, as its reason for not running names them.
_TIMES = {"starts": "start", "ends": "end", "changed": "time of its last change"}


def _definition(values: dict[str, Any]) -> tuple[Definition, str]:
    """What a row says, and why it cannot run when it cannot be read whole (``""``: it can).
    Such a row is still a definition, by its name and what could be read (what could not is
    left empty), which ``cronjob`` changes or removes."""
    why = ""
    if values["unreadable"]:
        times = [_TIMES[name] for name in values["unreadable"].split(" and ")]
        verb = "are" if len(times) > 1 else "is"
        why = (
            f"its {' and '.join(times)} {verb} outside the years 1 to 9999; give times within them"
        )
    for column, empty in (("args", []), ("kwargs", {})):
        # Django reads jsonb as text, and decodes it in the field: so do we.
        if isinstance(values[column], str):
            try:
                values[column] = json.loads(values[column])
            except (ValueError, RecursionError) as error:  # nested deeper than Python reads
                values[column] = empty
                why = why or f"its {column} cannot be read: {first_line(error)}"
    return Definition.from_values(values), why


def current(using: str | None = None) -> Catalog:
    """The catalog, read over Django's connection to ``using`` (default the lock database).

    Raises [LockDatabaseError][django_advisory_cron.exceptions.LockDatabaseError] for an alias
    that is not PostgreSQL, and
    [DatabaseUnavailable][django_advisory_cron.exceptions.DatabaseUnavailable] when the
    database cannot be reached or does not answer in time."""
    return read(require_postgresql(using or app_settings.lock_database))


def find(name: str, using: str | None = None) -> Job[..., Any]:
    """The job named ``name``, as the database's schedules make it; raises ``UnknownJob``."""
    return current(using).get(name)
