"""The options of ``cronjob add`` and ``cronjob edit``, read into a
[Definition][django_advisory_cron.jobs.definitions.Definition]: each option's text in its
field's type, and what an edit changes besides the options given (a cron expression replaces
an interval, a command a job, ...), so that the command only wires them and the definition's
``problems`` judge the result."""

from __future__ import annotations

import argparse
import dataclasses
import json
import typing
from datetime import datetime
from typing import Any

from ..core.once import read_moment
from ..jobs.declared import aware
from ..jobs.definitions import Definition
from ..jobs.job import Job
from ..jobs.options import OPTIONS, OVERRIDABLE
from .arguments import number
from .arguments import text as utf8_text

#: Each option's flag, the definition field it sets (its ``dest`` is ``set_FIELD``: Django
#: takes ``args`` for itself), and its metavar and help, from the options' table.
SCHEDULE_OPTIONS = tuple(
    (option.flag, option.name, option.metavar, option.help_text())
    for option in OPTIONS
    if option.flag
)
#: The flag of each field, for messages.
FLAGS = {field: flag for flag, field, _metavar, _help in SCHEDULE_OPTIONS}
#: What a JSON option must be, by field.
_JSON = {
    "args": "a JSON list such as '[\"daily\", 2]'",
    "kwargs": 'a JSON object such as \'{"note": "x"}\'',
}
#: How ``--at-most-once`` and ``--capture`` are said.
_YES_NO = {"yes": True, "no": False}
#: The type of each field of a definition: an option's text is read as that.
_TYPES = typing.get_type_hints(Definition)
#: A field given and the other it replaces, when that one is not given, by its empty value.
_REPLACES = {
    "cron": ("every", None),
    "every": ("cron", ""),
    "job": ("command", ""),
    "command": ("job", ""),
}


class Refused(Exception):
    """A schedule ``cronjob`` will not write: why, in one line."""


def fields_given(options: dict[str, Any]) -> dict[str, Any]:
    """The fields the options given set (``--enable``/``--disable`` included), in the
    definition's types: an empty number, time or yes/no clears it (for what happens around
    the body: back to its job's). Raises ``Refused`` for a value
    that cannot be read."""
    found: dict[str, Any] = {}
    for field, flag in FLAGS.items():
        text = options[f"set_{field}"]
        if text is None:
            continue
        kind = _TYPES[field]
        if field in _JSON:
            try:
                found[field] = json.loads(text)
                # An escaped lone surrogate ("\\ud800") is JSON, not storable text.
                utf8_text(json.dumps(found[field], ensure_ascii=False))
            except ValueError as error:
                raise Refused(f"{flag} is not JSON ({error}); give {_JSON[field]}") from None
            except argparse.ArgumentTypeError as error:
                raise Refused(f"{flag} {error}") from None
        elif kind == float | None:
            try:
                found[field] = number(text) if text.strip() else None
            except ValueError:
                raise Refused(f"{flag} must be a number of seconds, not {text!r}") from None
        elif kind == int | None:
            try:
                found[field] = int(text) if text.strip() else None
            except ValueError:
                raise Refused(f"{flag} must be a whole number, not {text!r}") from None
        elif kind == bool | None:
            if text.strip() and text.strip() not in _YES_NO:
                raise Refused(f"{flag} must be yes or no (empty: as its job does), not {text!r}")
            found[field] = _YES_NO.get(text.strip())
        elif field == "at":  # read in the zone given with it, as a cron expression is
            try:
                found[field] = read_moment(text, options["set_timezone"] or None)
            except ValueError as error:
                raise Refused(f"{flag}: {error}") from None
        elif kind == datetime | None:
            try:
                found[field] = aware(text, flag) if text.strip() else None
            except ValueError as error:
                raise Refused(str(error)) from None
        else:
            found[field] = text
    if options["enabled"] is not None:
        found["enabled"] = options["enabled"]
    return found


def flags(given: dict[str, Any]) -> list[str]:
    """The options given, as typed."""
    enabled = {True: "--enable", False: "--disable"}
    return [
        enabled[value] if field == "enabled" else FLAGS[field] for field, value in given.items()
    ]


def not_overridable(given: dict[str, Any]) -> list[str]:
    """The options given that an override of a job defined in code cannot change."""
    return [FLAGS[field] for field in given if field not in OVERRIDABLE]


def edited(
    base: Definition, given: dict[str, Any], code: Job[Any, Any] | None = None
) -> Definition:
    """``base`` with the fields ``given``, and what they replace: a cron expression or an
    interval the other (an interval its zone too), a job or a command the other. For an
    override of ``code`` (the job as code or settings define it) that has no cron expression
    of its own, a new one is read in the code's zone, and a zone alone applies to the code's
    cron expression."""
    changes = dict(given)
    for field, (other, empty) in _REPLACES.items():
        if field in given and other not in given:
            changes[other] = empty
    if "at" in given:  # a one-off replaces a cron expression or an interval, and back
        changes.update({kind: empty for kind, empty in (("cron", ""), ("every", None))
                        if kind not in given})  # fmt: skip
    elif {"cron", "every"} & set(given):
        changes.setdefault("at", None)
    if "every" in given and "cron" not in given:
        changes.setdefault("timezone", "")
    if code is not None and not base.cron:
        if "cron" in given and not {"every", "timezone"} & set(given) and code.cron:
            changes["timezone"] = code.timezone or ""
        if "timezone" in given and not {"cron", "every"} & set(given) and base.every is None:
            changes["cron"] = code.cron or ""
    return dataclasses.replace(base, **changes)


def row(definition: Definition) -> dict[str, Any]:
    """The columns of a schedule's row (``changed`` is the database's to set)."""
    values = dataclasses.asdict(definition)
    del values["changed"]
    return values
