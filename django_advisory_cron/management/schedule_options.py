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

from ..delivery import targets
from ..jobs.declared import aware
from ..jobs.definitions import OVERRIDABLE, Definition
from ..jobs.job import Job
from .arguments import number
from .arguments import text as utf8_text


def _deliver_help() -> str:
    """``--deliver``'s help: the targets as they registered themselves."""
    known = targets.registered()
    schemes = ", or ".join(f"{target.scheme}[:<{target.where}>]" for target in known)
    named = "".join(f" (--job then names the {t.by_name.task})" for t in known if t.by_name)
    return f"hand its ticks to a queue (deliver=): {schemes}{named}"


#: Each option: its flag, the definition field it sets (its ``dest`` is ``set_FIELD``: Django
#: takes ``args`` for itself), and its metavar and help.
SCHEDULE_OPTIONS = (
    ("--job", "job", "JOB", "the registered job it calls"),
    ("--command", "command", "COMMAND", "the management command it calls"),
    (
        "--args",
        "args",
        "JSON",
        "the arguments, a JSON list: '[\"daily\", 2]' (for a command: its command-line "
        'arguments, \'["--days", "30"]\')',
    ),
    ("--kwargs", "kwargs", "JSON", "the keyword arguments (a command's options), a JSON object"),
    ("--schedule", "cron", "CRON", "a five- or six-field cron expression: '0 2 * * *'"),
    ("--timezone", "timezone", "ZONE", "the zone the cron expression is read in (else TIME_ZONE)"),
    ("--every", "every", "SECONDS", "an interval instead of a cron expression, in seconds"),
    ("--catch-up", "catch_up", "POLICY", "which missed ticks run: latest, all or none"),
    ("--max-lateness", "max_lateness", "SECONDS", "a tick later than this is skipped"),
    ("--timeout", "timeout", "SECONDS", "stop a run that takes longer"),
    (
        "--deliver",
        "deliver",
        "TARGET",
        _deliver_help(),
    ),
    ("--description", "description", "TEXT", "what it is for, for the others"),
    (
        "--starts",
        "starts",
        "WHEN",
        "its first possible tick, ISO 8601 (in TIME_ZONE without offset)",
    ),
    ("--ends", "ends", "WHEN", "its last possible tick, ISO 8601"),
    (
        "--retries",
        "retries",
        "N",
        "call it again up to N times after a failure, within its tick (empty: as its job "
        "does; a command: none)",
    ),
    (
        "--retry-backoff",
        "retry_backoff",
        "SECONDS",
        "the wait before the first retry, doubled for each next one (with --retries; empty: "
        "as its job does, else 1)",
    ),
    (
        "--at-most-once",
        "at_most_once",
        "yes|no",
        "yes: a tick whose run was interrupted stays taken; no: it is given back to run again "
        "(empty: as its job does; a command: no)",
    ),
    (
        "--capture",
        "capture",
        "yes|no",
        "keep what a run logs (a command: its output) with the run (empty: as its job does; "
        "a command: yes)",
    ),
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
