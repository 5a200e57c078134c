"""``cronjob import --from SOURCE``: the schedules of another scheduler, as schedules kept in
the database.

Each source's module reads its entries (``entries()``) into the dict form of
``ADVISORY_CRON["SCHEDULES"]``, or says why an entry cannot map; from there an entry goes the
way a settings entry goes ([definition_of][django_advisory_cron.jobs.declared.definition_of],
then the definition's ``problems``), and is written as ``cronjob add`` writes a row. An entry
is named after its source's name, as a shell takes it and apart from the code jobs' names
(``names``), so a second import finds what the
first one wrote and changes nothing; nothing is ever written to the source.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import DataError, IntegrityError

from ...conf import ScheduleEntry
from ...delivery.targets import by_name
from ...exceptions import first_line
from ...jobs.catalog import Catalog
from ...jobs.declared import definition_of, derived_name
from ...jobs.definitions import MAX_DESCRIPTION, Definition, to_job
from ...jobs.job import Job
from ...jobs.versions import changing
from ...models import Schedule
from ...ops import control
from ..schedule_options import row
from .names import WHERE, Named, named

#: Each source ``--from`` names, and the module of this package that reads it.
SOURCES = {
    "celery-beat": "celery_beat",
    "django-celery-beat": "django_celery_beat",
    "crontab": "cronjobs",
    "django-q2": "django_q2",
}
#: What to do about two entries of a source whose schedules would have the same name: the
#: sources where that can happen (names derived from what an entry calls, names not unique).
RENAME = {
    "crontab": "name each in ADVISORY_CRON['SCHEDULES'] instead (django-crontab's entries "
    "have no names), or add one with 'cronjob add NAME'",
    "django-q2": "rename one of them in django-q2",
}
#: The sources whose entries name Celery tasks: what ``--deliver celery`` applies to.
CELERY_SOURCES = ("celery-beat", "django-celery-beat")


class Unavailable(Exception):
    """The source cannot be read here (its package or setting is missing): why, in one line."""


class NotMappable(Exception):
    """An entry that has no equivalent here: why, and what to do instead, in one line."""


@dataclass(frozen=True)
class Found:
    """One entry of the source: where it is, for people (``label``), and the schedule entry
    it maps to, or ``reason``, why it cannot map. ``notes`` say what of it is left behind;
    ``routing``, a Celery entry's message options (its queue goes with ``--deliver celery``,
    the others are left behind)."""

    label: str
    entry: ScheduleEntry | None = None
    reason: str = ""
    notes: tuple[str, ...] = ()
    routing: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Noted:
    """An entry that maps, with what a person should know about how (``notes``)."""

    entry: ScheduleEntry
    notes: tuple[str, ...]


def mapped(
    label: str, read: Callable[[], ScheduleEntry | Noted], routing: dict[str, Any] | None = None
) -> Found:
    """``label``'s entry as ``read()`` maps it, or the reason it cannot map."""
    try:
        entry = read()
    except NotMappable as error:
        return Found(label, reason=str(error))
    if isinstance(entry, Noted):
        return Found(label, entry.entry, notes=entry.notes, routing=dict(routing or {}))
    return Found(label, entry, routing=dict(routing or {}))


def routed(item: Found, deliver: str) -> Found:
    """``item`` sent to Celery (``deliver``, with its queue) or not, with a note for the
    routing options left behind."""
    routing = dict(item.routing)
    queue = routing.pop("queue", None) if deliver else None
    notes = item.notes
    if routing:
        notes = (f"its options {routing!r} are left behind (they route a message)", *notes)
    if not deliver or not isinstance(item.entry, dict):
        return dataclasses.replace(item, notes=notes)
    name = getattr(queue, "name", queue)  # a kombu Queue, or its name
    target = f"{deliver}:{name}" if name else deliver
    return dataclasses.replace(item, entry={**item.entry, "deliver": target}, notes=notes)


def described(text: str) -> str:
    """A description as a schedule stores it: at most ``MAX_DESCRIPTION`` characters."""
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 1] + "…"


def entries(source: str) -> list[Found]:
    """The entries of ``source`` (a key of ``SOURCES``); raises ``Unavailable``."""
    module = importlib.import_module(f"{__name__}.{SOURCES[source]}")
    found: list[Found] = module.entries()
    return found


def run(
    found: Catalog, alias: str, source: str, dry_run: bool, deliver: str = "", note: str = ""
) -> tuple[list[str], int]:
    """Import every entry of ``source`` that maps (with ``dry_run``, write nothing): a line
    per entry saying what became of it, and how many were not imported. With
    ``deliver="celery"``, each schedule sends its entry's Celery task to Celery (on the entry's
    queue) instead of calling a job of this process. Each schedule's first version says where it
    came from, and ``note``."""
    if deliver and source not in CELERY_SOURCES:
        raise Unavailable(
            f"--deliver {deliver} sends Celery tasks: it applies to --from "
            f"{' or '.join(CELERY_SOURCES)}, whose entries name them"
        )
    known: list[Job[Any, Any]] = found.all()
    items = [routed(item, deliver) for item in entries(source)]
    read = [_definition(item, known) for item in items]
    clashes = _clashes(items, read, RENAME.get(source, "rename one of them in the source"))
    lines, left = [], 0
    for index, (item, named_or_why) in enumerate(zip(items, read, strict=True)):
        said, definition = (
            (clashes[index], None)
            if index in clashes
            else _one(item, named_or_why, found, known, alias, dry_run, source, note)
        )
        if definition is None:
            left += 1
        elif found.definition(definition.name) is None and not definition.override:
            known.append(to_job(definition))
        notes = item.notes if isinstance(named_or_why, str) else (named_or_why.note, *item.notes)
        lines.append(said + "".join(f"; {note}" for note in notes if note))
    verb = "would import" if dry_run else "imported"
    lines.append(
        f"{source}: {len(lines) - left} of {len(lines)} entries {verb} or already there"
        + (f", {left} not (see above)" if left else "")
        + ("; nothing was written (--dry-run)" if dry_run else "")
    )
    return lines, left


def _definition(item: Found, known: list[Job[Any, Any]]) -> Named | str:
    """The definition ``item`` maps to, under the name it is imported as, or why it cannot
    map."""
    if item.entry is None:
        return item.reason
    try:
        return named(definition_of(item.entry), known)
    except ValueError as error:
        return str(error)


def _clashes(items: list[Found], read: list[Named | str], rename: str) -> dict[int, str]:
    """The line of each entry whose schedule would have the name of another entry's, by its
    index, saying to ``rename``. Neither is imported: which one would keep the name would
    depend on the source's order, and a name is what the schedule's lock key, run history and
    commands go by."""
    named: dict[str, list[int]] = {}
    for index, read_one in enumerate(read):
        if isinstance(read_one, Named):
            named.setdefault(read_one.definition.name, []).append(index)
    return {
        index: f"{items[index].label} -> {name}: not imported: "
        f"{', '.join(items[other].label for other in same if other != index)} would have "
        f"the same name; {rename}"
        for name, same in named.items()
        if len(same) > 1
        for index in same
    }


def _one(
    item: Found,
    read: Named | str,
    found: Catalog,
    known: list[Job[Any, Any]],
    alias: str,
    dry_run: bool,
    source: str,
    note: str,
) -> tuple[str, Definition | None]:
    """What becomes of one entry, in a line, and its definition (``None``: not imported)."""
    if isinstance(read, str):
        return f"{item.label}: cannot import: {read}", None
    definition = read.definition
    head = f"{item.label} -> {definition.name}"
    kept = found.definition(definition.name)
    if kept is not None and kept.override == definition.override:
        same = dataclasses.replace(kept, changed=None) == definition
        return (
            f"{head}: already there"
            + ("" if same else f" (it differs; change it with 'cronjob edit {definition.name}')"),
            definition,
        )
    what = _what(definition, found, source)
    problems = [read.refused] if read.refused else definition.problems(known=known)
    if problems:
        return f"{head}: refused: {'; '.join(problems)}; it would be {what}", None
    if not dry_run:
        who, why = control.operator(), f"imported from {source}" + (f": {note}" if note else "")
        try:
            with changing(alias, who, why):
                Schedule.objects.using(alias).create(**row(definition), changed_by=who)
        except (IntegrityError, DataError) as error:
            return f"{head}: refused: the database refused it: {first_line(error)}", None
    verb = "would import" if dry_run else "imported"
    return f"{head}: {verb}, {what}", definition


def _what(definition: Definition, found: Catalog, source: str) -> str:
    """What the schedule calls and when, for people: ``calling job send_report(daily), 0 6 *
    * * in UTC``, or ``the schedule of job send_report (defined in code), ...``."""
    when = definition.schedule_text()
    if definition.timezone:
        when += f" in {definition.timezone}"
    elif definition.cron and source == "crontab":  # cron read them in the host's zone
        when += f" in {settings.TIME_ZONE or 'UTC'} (TIME_ZONE, not the host's zone)"
    if not definition.enabled:
        when += ", disabled"
    if definition.override:
        job = found.jobs.get(definition.name)
        where = WHERE.get(job.source, "") if job else ""
        if job and job.schedule_text:
            where += f", in place of its {job.schedule_text}"
        return f"the schedule of job {definition.name} ({where}), {when}"
    calls = definition.calls
    if definition.job:
        call = derived_name(dataclasses.asdict(definition))
        named_by = by_name(definition.deliver)
        calls = (
            f"{named_by.task} {call} (deliver={definition.deliver})" if named_by else f"job {call}"
        )
    return f"calling {calls}, {when}"
