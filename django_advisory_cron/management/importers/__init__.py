"""``cronjob import --from SOURCE``: the schedules of another scheduler, as schedules kept in
the database.

Each source's module reads its entries (``entries()``) into the dict form of
``ADVISORY_CRON["SCHEDULES"]``, or says why an entry cannot map; from there an entry goes the
way a settings entry goes ([definition_of][django_advisory_cron.run.declared.definition_of],
then the definition's ``problems``), and is written as ``cronjob add`` writes a row. An entry
keeps its source's name, so a second import finds what the first one wrote and changes
nothing; nothing is ever written to the source.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import DataError, IntegrityError

from ...conf import ScheduleEntry
from ...exceptions import first_line
from ...models import Schedule
from ...run import control
from ...run.catalog import Catalog
from ...run.declared import definition_of, derived_name
from ...run.definitions import MAX_DESCRIPTION, Definition, to_job
from ...run.jobs import Job
from ..schedule_options import row

#: Each source ``--from`` names, and the module of this package that reads it.
SOURCES = {
    "celery-beat": "celery_beat",
    "django-celery-beat": "django_celery_beat",
    "crontab": "cronjobs",
    "django-q2": "django_q2",
}


class Unavailable(Exception):
    """The source cannot be read here (its package or setting is missing): why, in one line."""


class NotMappable(Exception):
    """An entry that has no equivalent here: why, and what to do instead, in one line."""


@dataclass(frozen=True)
class Found:
    """One entry of the source: where it is, for people (``label``), and the schedule entry
    it maps to, or ``reason``, why it cannot map. ``notes`` say what of it is left behind."""

    label: str
    entry: ScheduleEntry | None = None
    reason: str = ""
    notes: tuple[str, ...] = ()


def mapped(label: str, read: Callable[[], ScheduleEntry], notes: tuple[str, ...] = ()) -> Found:
    """``label``'s entry as ``read()`` maps it, or the reason it cannot map."""
    try:
        return Found(label, read(), notes=notes)
    except NotMappable as error:
        return Found(label, reason=str(error))


def described(text: str) -> str:
    """A description as a schedule stores it: at most ``MAX_DESCRIPTION`` characters."""
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 1] + "…"


def entries(source: str) -> list[Found]:
    """The entries of ``source`` (a key of ``SOURCES``); raises ``Unavailable``."""
    module = importlib.import_module(f"{__name__}.{SOURCES[source]}")
    found: list[Found] = module.entries()
    return found


def run(found: Catalog, alias: str, source: str, dry_run: bool) -> tuple[list[str], int]:
    """Import every entry of ``source`` that maps (with ``dry_run``, write nothing): a line
    per entry saying what became of it, and how many were not imported."""
    known: list[Job[Any, Any]] = found.all()
    lines, left = [], 0
    for item in entries(source):
        said, definition = _one(item, found, known, alias, dry_run)
        if definition is None:
            left += 1
        elif found.definition(definition.name) is None:
            known.append(to_job(definition))
        lines.append(said + "".join(f"; {note}" for note in item.notes))
    verb = "would import" if dry_run else "imported"
    lines.append(
        f"{source}: {len(lines) - left} of {len(lines)} entries {verb} or already there"
        + (f", {left} not (see above)" if left else "")
        + ("; nothing was written (--dry-run)" if dry_run else "")
    )
    return lines, left


def _one(
    item: Found, found: Catalog, known: list[Job[Any, Any]], alias: str, dry_run: bool
) -> tuple[str, Definition | None]:
    """What becomes of one entry, in a line, and its definition (``None``: not imported)."""
    if item.entry is None:
        return f"{item.label}: cannot import: {item.reason}", None
    try:
        definition = definition_of(item.entry)
    except ValueError as error:
        return f"{item.label}: cannot import: {error}", None
    head = f"{item.label} -> {definition.name}"
    kept = found.definition(definition.name)
    if kept is not None and not kept.override:
        same = dataclasses.replace(kept, changed=None) == definition
        return (
            f"{head}: already there"
            + ("" if same else f" (it differs; change it with 'cronjob edit {definition.name}')"),
            definition,
        )
    problems = definition.problems(known=known)
    if problems:
        return f"{head}: refused: {'; '.join(problems)}", None
    if not dry_run:
        try:
            Schedule.objects.using(alias).create(**row(definition), changed_by=control.operator())
        except (IntegrityError, DataError) as error:
            return f"{head}: refused: the database refused it: {first_line(error)}", None
    verb = "would import" if dry_run else "imported"
    when = definition.schedule_text()
    if definition.timezone:
        when += f" in {definition.timezone}"
    disabled = "" if definition.enabled else ", disabled"
    calls = definition.calls
    if definition.job:
        calls = "job " + derived_name(dataclasses.asdict(definition))
    return f"{head}: {verb}, calling {calls}, {when}{disabled}", definition
