"""Schedules declared in settings: ``ADVISORY_CRON["SCHEDULES"]``, in the shape of
django-crontab's ``CRONJOBS``.

Each entry becomes a [Definition][django_advisory_cron.jobs.definitions.Definition], is
checked by its ``problems``, and is registered at start-up as a job of its own
(``source="settings"``), which an operator can override like a job defined in code. Settings
are the site's code: an entry may call any management command or Celery task, where a
schedule kept in the database calls only those ``SCHEDULE_COMMANDS`` and
``SCHEDULE_CELERY_TASKS`` allow. An entry
that is refused is not registered; the system check reports it (E171-E175), so a typo in
settings is one line at ``manage.py check``, never a traceback at import.
"""

from __future__ import annotations

import json
import typing
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from .. import conf
from ..conf import ScheduleEntry, app_settings
from ..core.once import read_moment
from ..delivery.targets import by_name
from .definitions import Definition, to_job
from .job import Job, registry
from .options import DURATIONS, OPTIONS

#: django-crontab's way to call a management command: this target, the command's name first
#: among the arguments.
CALL_COMMAND = "django.core.management.call_command"

#: The keys of a dict entry, and the field of the definition each one sets.
KEYS = {option.key: option.name for option in OPTIONS if option.key}
#: The definition's fields of text, and of yes, no or ``None``: an entry's value must be one.
_TYPES = typing.get_type_hints(Definition)
_TEXT = tuple(name for name, kind in _TYPES.items() if kind is str)
_YES_NO = tuple(name for name, kind in _TYPES.items() if kind == bool | None)


@dataclass(frozen=True)
class Declared:
    """One entry of ``SCHEDULES``: its place in the list, the definition it makes (``None``
    when it is not understood) and what is wrong with it, by kind (``shape``, or the kinds
    of the definition's ``problems_by_kind``)."""

    index: int
    definition: Definition | None
    problems: dict[str, list[str]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """Where it is, for people: ``ADVISORY_CRON['SCHEDULES'][2] ('mark(daily)')``."""
        named = "" if self.definition is None else f" ({self.definition.name!r})"
        return f"ADVISORY_CRON['SCHEDULES'][{self.index}]{named}"


#: The entries refused at start-up, for the system check.
refused: list[Declared] = []


def register() -> None:
    """Register each entry that can be scheduled as a job (called from ``AppConfig.ready``,
    after the jobs modules, whose jobs the entries call); keep the others for the check.
    Nothing is registered while a setting is invalid (its own check reports it): the entries
    are checked with those settings (a job's lock key is computed in ``NAMESPACE``)."""
    refused.clear()
    if not app_settings.SCHEDULES or conf.problems():
        return
    for entry in read():
        if entry.problems or entry.definition is None:
            refused.append(entry)
            continue
        registry.register(to_job(entry.definition, source="settings"))


def read() -> list[Declared]:
    """Every entry, checked against the jobs defined in code and the entries before it."""
    known: list[Job[..., Any]] = [job for job in registry.all() if job.source != "settings"]
    taken: dict[str, int] = {}
    found = []
    for index, entry in enumerate(app_settings.SCHEDULES):
        try:
            definition = definition_of(entry)
        except ValueError as error:
            found.append(Declared(index, None, {"shape": [str(error)]}))
            continue
        problems: dict[str, list[str]] = {
            kind: lines
            for kind, lines in definition.problems_by_kind(known, "settings").items()
            if lines
        }
        if definition.name in taken:
            problems["name"] = [
                f"entry {taken[definition.name]} has the same name; give one of them a name "
                "of its own (the dict form's 'name')"
            ]
        found.append(Declared(index, definition, problems))
        if not problems:
            taken[definition.name] = index
            known.append(to_job(definition, source="settings"))
    return found


def definition_of(entry: ScheduleEntry) -> Definition:
    """The definition an entry says; raises ``ValueError`` (one line) for an entry whose
    shape is not understood. What it says is checked by the definition's ``problems``."""
    if isinstance(entry, dict):
        unknown = sorted(str(key) for key in entry if key not in KEYS)
        if unknown:
            raise ValueError(
                f"has no key {', '.join(map(repr, unknown))} (the keys: {', '.join(KEYS)})"
            )
        values = {KEYS[key]: value for key, value in entry.items()}
    elif isinstance(entry, (tuple, list)) and 2 <= len(entry) <= 4:
        cron, target, *rest = entry
        values = {
            "cron": cron,
            "args": rest[0] if rest else [],
            "kwargs": rest[1] if len(rest) > 1 else {},
        }
        if target == CALL_COMMAND:
            args = values["args"]
            if not isinstance(args, (list, tuple)) or not args or not isinstance(args[0], str):
                raise ValueError(
                    f"calls {CALL_COMMAND} without the command's name as its first argument"
                )
            values["command"], values["args"] = args[0], list(args[1:])
        else:
            values["job"] = target
    else:
        raise ValueError(
            "is neither a (cron, job, args, kwargs) tuple (2 to 4 items) nor a dict, but "
            f"{type(entry).__name__} {_word(entry)}"
        )
    return Definition.from_values(_typed(values))


def _typed(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` in the types of a definition's fields: a job as the name it is registered
    under, tuples as lists, durations as seconds, date-times aware."""
    for key in _TEXT:
        if values.get(key) is not None and not isinstance(values[key], str):
            raise ValueError(f"its {key!r} must be a string, not {_word(values[key])}")
    if "enabled" in values and not isinstance(values["enabled"], bool):
        raise ValueError(f"its 'enabled' must be True or False, not {_word(values['enabled'])}")
    for key in _YES_NO:
        if values.get(key) is not None and not isinstance(values[key], bool):
            raise ValueError(f"its {key!r} must be True, False or None, not {_word(values[key])}")
    if isinstance(values.get("args"), tuple):
        values["args"] = list(values["args"])
    for key in DURATIONS:
        if isinstance(values.get(key), timedelta):
            values[key] = values[key].total_seconds()
    for key in ("starts", "ends"):
        if values.get(key) is not None:
            values[key] = aware(values[key], f"its {key!r}")
    if values.get("at") is not None:  # read in the entry's own zone, as cronjob add --at is
        values["at"] = read_moment(values["at"], values.get("timezone") or None)
    if values.get("job") and not by_name(values.get("deliver")):
        values["job"] = registered_name(values["job"])  # a task sent by name keeps its name
    if values.get("name") is None:
        values["name"] = derived_name(values)
    return values


def registered_name(target: str) -> str:
    """The registered job ``target`` names: itself, or the job whose function is at the
    dotted path ``target`` (django-crontab's way of naming it); else ``target`` as it is,
    for the definition's check to refuse."""
    if target in registry:
        return target
    return next((job.name for job in registry.all() if job.origin == target), target)


def derived_name(values: dict[str, Any]) -> str:
    """The name of an entry that gives none: ``COMMAND ARG ... KEY=VALUE`` for a management
    command, ``JOB(ARG, ..., KEY=VALUE)`` for a job (``JOB()`` without arguments, which is
    never the job's own name)."""
    args = values.get("args") or []
    kwargs = values.get("kwargs") or {}
    words = [*map(_word, args if isinstance(args, list) else [args])]
    if isinstance(kwargs, dict):
        words += [f"{key}={_word(value)}" for key, value in kwargs.items()]
    if values.get("command"):
        return " ".join([values["command"], *words])
    return f"{values.get('job') or ''}({', '.join(words)})"


def _word(value: object) -> str:
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)
    return repr(value)


def aware(value: object, what: str) -> datetime:
    """``value`` (a date-time, or its ISO 8601 text) as an aware date-time: without an offset
    it is in ``TIME_ZONE``. Raises ``ValueError`` saying what ``what`` must be. Whether it is
    within a start's or an end's span is the options' table's to say, in one span."""
    moment = value
    if isinstance(value, str):
        try:
            moment = parse_datetime(value.strip())
        except ValueError:
            moment = None
    if not isinstance(moment, datetime):
        raise ValueError(
            f"{what} must be an ISO 8601 date-time such as 2026-12-24T08:00 (or "
            f"2026-12-24T08:00+01:00), not {value!r}"
        )
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment)
