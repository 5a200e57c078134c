"""Every job a process knows: those defined in code (``@locked_task``,
``ADVISORY_CRON["SCHEDULES"]``) as the database's overrides change them, and the schedules kept
in the database.

Read in one statement ([read][django_advisory_cron.run.catalog.read]); every path that runs or
shows jobs (``cronworker``, ``runlocked``, ``cronjob``, ``cronstatus``, the admin, the
metrics) goes through it, so a schedule added in the admin is a job like the others. A
database schedule that cannot be made into a job any more (the job it calls was removed from
the code) is left out and reported, never run.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.core.signals import setting_changed
from django.db.backends.base.base import BaseDatabaseWrapper
from django.dispatch import receiver

from ..conf import app_settings
from ..db import sql
from ..db.connections import require_postgresql
from ..db.execute import fetch_all
from ..exceptions import UnknownJob
from .definitions import Definition, overridden, to_job
from .jobs import Job, registry

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


def build(definitions: list[Definition], version: str = "") -> Catalog:
    """The catalog the code's jobs and these database ``definitions`` make."""
    code = {job.name: job for job in registry.all()}
    jobs = dict(code)
    broken: dict[str, str] = {}
    for definition in definitions:
        if definition.override:
            if definition.name in code:
                jobs[definition.name] = overridden(code[definition.name], definition)
            else:
                broken[definition.name] = (
                    f"it overrides job {definition.name!r}, which is no longer defined in code"
                )
            continue
        problems = definition.problems(known=code.values())
        if problems:
            broken[definition.name] = problems[0]
            continue
        jobs[definition.name] = to_job(definition)
    return Catalog(version, jobs, definitions, broken)


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
    names = sql.SCHEDULE_COLUMNS
    definitions = []
    for row in rows:
        if row[0] is None:
            continue
        values = dict(zip(names, row, strict=False))
        for column in ("args", "kwargs"):
            # Django reads jsonb as text, and decodes it in the field: so do we.
            if isinstance(values[column], str):
                values[column] = json.loads(values[column])
        definitions.append(Definition.from_values(values))
    catalog = build(definitions, rows[0][-1] if rows else "")
    _last = _Made(rows, code, catalog)
    return catalog


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
