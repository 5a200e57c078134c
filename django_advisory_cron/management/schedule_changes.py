"""``cronjob add``, ``edit``, ``reset`` and ``remove``: each checks the schedule it would write
as the [catalog][django_advisory_cron.jobs.catalog] would read it, writes it with the ORM (the
table's trigger tells the workers) in the operator's name, and says in a line what it did.
What cannot be written raises [Refused][django_advisory_cron.management.schedule_options.Refused],
before anything is."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from typing import Any, TypeVar

from django.db import DataError, IntegrityError

from ..exceptions import first_line
from ..jobs.catalog import Catalog
from ..jobs.definitions import Definition, overridden, to_job
from ..jobs.job import Job, registry
from ..models import Schedule
from ..ops import control
from .schedule_options import Refused, edited, fields_given, flags, not_overridable, row

T = TypeVar("T")


def add(found: Catalog, alias: str, name: str, options: dict[str, Any]) -> str:
    """Add the database schedule ``name`` the options say."""
    kept = found.definition(name)
    if kept is not None and not kept.override:
        raise Refused(
            f"a schedule of that name is kept in the database; change it with "
            f"'manage.py cronjob edit {name}'"
        )
    definition = Definition.from_values({"name": name, **_given("add", options)})
    _check(definition, found.all())
    _not_past(definition)
    _saved(
        lambda: Schedule.objects.using(alias).create(
            **row(definition), changed_by=control.operator()
        )
    )
    return (
        f"{name}: added, calling {definition.calls}, {_described(to_job(definition))}. "
        f"Running cronworkers follow at once; cron can call 'manage.py runlocked {name}'."
    )


def edit(found: Catalog, alias: str, kept: Definition, options: dict[str, Any]) -> str:
    """Change what the options given say of the database schedule ``kept``."""
    name = kept.name
    changes = _given("edit", options)
    definition = edited(kept, changes)
    _check(definition, [job for job in found.all() if job.name != name])
    if "at" in changes:
        _not_past(definition)
    updated = _saved(
        lambda: (
            Schedule.objects.using(alias)
            .filter(name=name, override=False)
            .update(**row(definition), changed_by=control.operator())
        )
    )
    if not updated:
        raise Refused("it was removed meanwhile")
    return (
        f"{name}: changed ({', '.join(flags(changes))}); it calls {definition.calls}, "
        f"{_described(to_job(definition))}."
    )


def override(alias: str, name: str, kept: Definition | None, options: dict[str, Any]) -> str:
    """Change the schedule of a job defined in code or settings: its override row."""
    changes = _given("edit", options)
    if name not in registry:
        raise Refused(
            f"it overrides a job no longer defined in code; 'manage.py cronjob reset {name}' "
            "drops the override"
        )
    code = registry.get(name)
    others = not_overridable(changes)
    if others:
        raise Refused(
            f"it is defined in {_where(code)}: change {', '.join(others)} there; edit "
            "changes only its --schedule, --every or --timezone, and --enable/--disable"
        )
    definition = edited(kept or Definition(name=name, override=True), changes, code)
    _check(definition, [])
    _saved(
        lambda: Schedule.objects.using(alias).update_or_create(
            name=name, defaults={**row(definition), "changed_by": control.operator()}
        )
    )
    return (
        f"{name}: overridden in the database: {_described(overridden(code, definition))} "
        f"(in {_where(code)}: {_described(code)}); 'manage.py cronjob reset {name}' goes "
        "back to that."
    )


def reset(alias: str, name: str, kept: Definition | None, job: Job[Any, Any] | None) -> str:
    """Drop the override of the job ``name``."""
    if kept is not None and not kept.override:
        raise Refused(
            "it is a schedule kept in the database, with no code to go back to; change "
            f"it with 'manage.py cronjob edit {name}', or remove it"
        )
    if kept is None:
        assert job is not None
        return (
            f"{name}: has no override; nothing to do (it runs {_described(job)}, as in "
            f"{_where(job)})."
        )
    Schedule.objects.using(alias).filter(name=name, override=True).delete()
    if name not in registry:
        return f"{name}: override removed (no job {name!r} is defined in code)."
    code = registry.get(name)
    return f"{name}: override removed; back to its schedule in {_where(code)}: {_described(code)}."


def remove(alias: str, name: str, kept: Definition | None, job: Job[Any, Any] | None) -> str:
    """Delete the database schedule ``name``."""
    if kept is None or kept.override:
        where = "code" if job is None else _where(job)
        hint = (
            f"'manage.py cronjob reset {name}' drops its override"
            if kept is not None
            else f"'manage.py cronjob edit {name} --disable' takes its ticks away"
        )
        raise Refused(f"it is defined in {where}, and removed there; {hint}")
    Schedule.objects.using(alias).filter(name=name, override=False).delete()
    return f"{name}: removed (it called {kept.calls}); its run history is kept."


def _given(action: str, options: dict[str, Any]) -> dict[str, Any]:
    """The fields the options set; at least one."""
    found = fields_given(options)
    if not found:
        raise Refused(f"nothing to change; see manage.py cronjob {action} -h")
    return found


def _check(definition: Definition, known: Iterable[Job[Any, Any]]) -> None:
    """Refuse the definition for its problems (all of them, on one line), if any."""
    problems = definition.problems(known=known)
    if problems:
        raise Refused("; ".join(problems))


def _not_past(definition: Definition) -> None:
    """Refuse a one-off whose moment has passed: typed now, it would never run (a schedule in
    the settings or already kept is not refused for it: it ran, or its catch-up decides)."""
    at = definition.at
    if at is not None and at <= datetime.now(timezone.utc):
        raise Refused(
            f"--at {at.isoformat(sep=' ')} has passed; give a moment to come (to run it now: "
            f"manage.py cronjob trigger {definition.name})"
        )


def _saved(write: Callable[[], T]) -> T:
    """``write()``; a row the database refuses (a schedule of the same name added
    meanwhile) is refused too."""
    try:
        return write()
    except (IntegrityError, DataError) as error:
        raise Refused(f"the database refused it: {first_line(error)}") from None


def _where(job: Job[Any, Any]) -> str:
    """Where a job that is not a database schedule is defined, for people."""
    return "ADVISORY_CRON['SCHEDULES']" if job.source == "settings" else "code"


def _described(job: Job[Any, Any]) -> str:
    """A job's schedule in a few words: ``0 2 * * * in Europe/Paris, disabled``."""
    text = job.schedule_text or "no schedule"
    if job.timezone and job.at is None:  # a one-off names its zone itself
        text += f" in {job.timezone}"
    return text if job.enabled else f"{text}, disabled"
