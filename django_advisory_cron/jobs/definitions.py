"""What a schedule kept as data says, checked where it is typed, and the job it makes.

A [Definition][django_advisory_cron.jobs.definitions.Definition] comes from a row of the
database's schedules, from ``ADVISORY_CRON["SCHEDULES"]``, from the admin's form or from
``manage.py cronjob add``; all of them are checked by
[problems][django_advisory_cron.jobs.definitions.Definition.problems], so a bad schedule is
refused where it is typed, in one line, and a worker never meets one. A schedule can only
call a registered job, or a management command or Celery task the settings allow
(``SCHEDULE_COMMANDS``, ``SCHEDULE_CELERY_TASKS``): never a dotted path. An entry of
``SCHEDULES`` is the site's own code, as its settings are, and is not held to those lists.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from django.core.management import get_commands, load_command_class
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ..conf import app_settings
from ..core.jitter import jitter_problem
from ..core.keys import job_key
from ..core.names import did_you_mean
from ..core.once import Once
from ..core.overlap import combination_problem, overlap_policy
from ..core.retries import RetryPolicy, policy_problem
from ..core.schedule import describe_interval, zone_problem
from ..core.schedule_rules import never_fires_problem
from ..delivery.targets import RemoteCall, by_name
from ..exceptions import InvalidSchedule, first_line
from ..run.output import call_command_captured
from . import fanout
from .job import MAX_JOB_NAME, Job, Source, registry
from .option_values import Tenants, kind_of, per_tenant, tenants_problem
from .options import (
    AROUND,
    BUILT,
    CHECKED,
    NOT_OVERRIDABLE,
    OVERRIDABLE,
    TEXT_FIELDS,
    as_seconds,
    duration,
    optional_duration,
)

#: The longest description a schedule stores (``Schedule.description``'s ``max_length``).
MAX_DESCRIPTION = 500
#: What a problem of a definition is about: its name, what it calls, its schedule, the rest.
ProblemKind = Literal["name", "target", "schedule", "options"]
#: The characters a name cannot hold: controls (a newline would forge a log line), unpaired
#: surrogates (not storable), and line and paragraph separators.
UNPRINTABLE = ("Cc", "Cs", "Zl", "Zp")
#: The most retries a schedule sets within one tick.
MAX_RETRIES = 100
#: What PostgreSQL cannot store in text or ``jsonb``: NUL, and a lone surrogate (which
#: cannot be encoded in UTF-8).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


@dataclass(frozen=True)
class Definition:
    """One schedule kept as data: it calls ``job`` (a registered job, with ``args`` and
    ``kwargs``; with a ``deliver`` that sends by name, the queue's task of that name) or
    ``command`` (a
    management command), or, with ``override``, changes the schedule of the job named
    ``name`` defined in code."""

    name: str
    job: str = ""
    command: str = ""
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    cron: str = ""
    #: An interval schedule, in seconds.
    every: float | None = None
    timezone: str = ""
    enabled: bool = True
    override: bool = False
    catch_up: str = ""
    max_lateness: float | None = None
    #: Seconds after its tick a run may start before the job is late (``None``: never late).
    late_after: float | None = None
    #: Seconds each tick may start after it (``None``: at its tick).
    jitter: float | None = None
    timeout: float | None = None
    deliver: str = ""
    description: str = ""
    starts: datetime | None = None
    ends: datetime | None = None
    #: Retries of a failed attempt within its tick, and the first one's back-off in seconds
    #: (its job's ``retry_on``; ``None``: its job's retries, a command's none).
    retries: int | None = None
    retry_backoff: float | None = None
    #: An interrupted run keeps its tick (``None``: as its job; a command gives it back).
    at_most_once: bool | None = None
    #: A run keeps what it logs (``None``: as its job; a command's output is kept).
    capture: bool | None = None
    #: A one-off's moment, instead of a cron expression or an interval (``timezone``: the
    #: zone it was typed in).
    at: datetime | None = None
    #: The schedule ends after this many runs of its ticks (``None``: no end).
    max_runs: int | None = None
    #: What a tick that comes while a run is going does (empty: skip), and ``allow_all``'s
    #: runs at once (``None``: its default).
    overlap: str = ""
    max_concurrent: int | None = None
    #: The business calendar its ticks skip or keep (``""``: none).
    calendar: str = ""
    #: The tenant schemas it runs for: ``"*"`` every one, else names joined by commas
    #: (``""``: as its job does).
    per_tenant: str = ""
    #: When it was last written, on the database's clock (``None``: not kept there).
    changed: datetime | None = None

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> Definition:
        """A definition from a row's (or a form's) values; ``None`` and missing text fields
        read as empty, unknown keys are ignored."""
        known = {f.name: f for f in dataclasses.fields(cls)}
        given: dict[str, Any] = {}
        for key, value in values.items():
            if key not in known:
                continue
            if value is None and known[key].default == "":
                value = ""
            given[key] = value
        if given.get("args") is None:
            given["args"] = []
        if given.get("kwargs") is None:
            given["kwargs"] = {}
        return cls(**given)

    @property
    def calls(self) -> str:
        """What it runs, for people: ``job NAME`` or ``manage.py COMMAND ARGS``."""
        if self.override:
            return "its code"
        if self.command:
            return " ".join(["manage.py", self.command, *map(str, self.args)])
        named = by_name(self.deliver)
        if named:
            return f"{named.task} {self.job}"
        return f"job {self.job}"

    def problems(
        self, known: Iterable[Job[Any, Any]] | None = None, source: Source = "database"
    ) -> list[str]:
        """Why this definition cannot be scheduled, one line each (``[]``: it can).

        ``known`` are the other jobs it must not clash with by name or lock key (default:
        the registered jobs). A definition from ``source="settings"`` may call any command
        or task sent by name; one kept in the database, only those the settings allow."""
        return [line for lines in self.problems_by_kind(known, source).values() for line in lines]

    def problems_by_kind(
        self, known: Iterable[Job[Any, Any]] | None = None, source: Source = "database"
    ) -> dict[ProblemKind, list[str]]:
        """``problems``, by what they are about: the system check of
        ``ADVISORY_CRON["SCHEDULES"]`` gives each kind an id of its own."""
        others = {job.name: job for job in (registry.all() if known is None else known)}
        return {
            "name": self._name_problems(others),
            "target": self._target_problems(allowed_only=source != "settings"),
            "schedule": self._schedule_problems(),
            "options": self._option_problems(),
        }

    def _name_problems(self, others: dict[str, Job[Any, Any]]) -> list[str]:
        name = self.name
        if not name or name != name.strip():
            return ["a schedule needs a name, without spaces around it"]
        if len(name) > MAX_JOB_NAME:
            return [f"the name is {len(name)} characters long; at most {MAX_JOB_NAME}"]
        unprintable = next((c for c in name if unicodedata.category(c) in UNPRINTABLE), None)
        if unprintable is not None:
            return [
                f"the name holds the control character U+{ord(unprintable):04X}; a name is "
                "one line of printable text"
            ]
        if self.override:
            if name not in registry:
                return [f"there is no job {name!r} defined in code to override"]
            return []
        if name in others:
            where = {
                "code": "defined in code",
                "settings": "declared in ADVISORY_CRON['SCHEDULES']",
                "database": "kept in the database",
            }[others[name].source]
            instead = (
                ""
                if others[name].source == "database"
                else ", or override that job's schedule instead"
            )
            return [f"the name {name!r} is taken by a job {where}; pick another name{instead}"]
        key = job_key(name)
        for other in others.values():
            if other.key.same_lock(key):
                return [f"the name {name!r} has the same lock key as job {other.name!r}"]
        return []

    def _target_problems(self, allowed_only: bool) -> list[str]:
        if self.override:
            if self.job or self.command or self.args or self.kwargs:
                return ["an override changes a code job's schedule; it calls nothing else"]
            ignored = [name for name in NOT_OVERRIDABLE if getattr(self, name) not in ("", None)]
            if ignored:  # the catalog would leave them out, unsaid
                return [
                    f"an override changes only a code job's {', '.join(OVERRIDABLE)}; "
                    f"not its {', '.join(ignored)}"
                ]
            return []
        if bool(self.job) == bool(self.command):
            return ["a schedule calls either a job or a management command (one of the two)"]
        if not isinstance(self.args, list):
            return [f"the arguments must be a JSON list, not {kind_of(self.args)}"]
        if not isinstance(self.kwargs, dict):
            return [f"the keyword arguments must be a JSON object, not {kind_of(self.kwargs)}"]
        named = by_name(self.deliver)
        if named:
            if self.command:
                return [
                    f"a schedule sent to {named.queue} names the {named.task} as its job; a "
                    f"management command runs here, not in {named.queue}"
                ]
            # The queue's workers know their tasks, this process need not: only the name is
            # checked.
            if allowed_only and self.job not in named.allowed():
                return [
                    f"{named.task} {self.job} is not a task a schedule may send; add "
                    f"{self.job!r} to {named.allowed_in} to allow it"
                ]
            return []
        if self.job:
            return _job_call_problems(self.job, self.args, self.kwargs)
        return _command_call_problems(self.command, self.args, self.kwargs, allowed_only)

    def _schedule_problems(self) -> list[str]:
        """Each field's own problem, and "not both" beside them when both are given: a bad
        cron expression is said even where an interval is there too."""
        problems = []
        if self.at is not None:
            if self.cron or self.every is not None:
                return [
                    "a schedule has one of a cron expression, an interval or a moment (at), "
                    "not more"
                ]
            problem = zone_problem(self.timezone) if self.timezone else None
            return [problem] if problem else []
        if self.cron and self.every is not None:
            problems.append("a schedule has either a cron expression or an interval, not both")
        elif not self.cron and self.every is None:
            if self.override:
                return [] if not self.timezone else ["a time zone needs a cron expression"]
            return ["a schedule needs a cron expression or an interval (every N seconds)"]
        if self.every is not None:
            try:
                duration("every", self.every)
            except ValueError as error:
                problems.append(str(error))
            if self.timezone and not self.cron:
                problems.append("a time zone applies to a cron expression, not to an interval")
        if self.cron:
            problems += self._cron_problems()
        return problems

    def _cron_problems(self) -> list[str]:
        from ..core.schedule import Schedule

        try:
            Schedule(self.cron)
        except InvalidSchedule as error:
            return [never_fires_problem(self.cron) or f"bad cron expression: {error}"]
        problem = zone_problem(self.timezone) if self.timezone else None
        return [problem] if problem else []

    def _option_problems(self) -> list[str]:
        problems = []
        for name, build in CHECKED.items():
            try:
                build(getattr(self, name))
            except ValueError as error:
                problems.append(str(error))
        if self.starts and self.ends and self.ends <= self.starts:
            problems.append("the schedule ends before it starts")
        if not problems:
            problems += self._jitter_problems()
        if not problems:
            combination = combination_problem(overlap_policy(self.overlap), self.max_concurrent)
            problems += [combination] if combination else []
        return (
            problems + self._storable_problems() + self._around_problems() + self._tenant_problems()
        )

    def tenants(self) -> Tenants:
        """The tenants it runs for: its own ``per_tenant``, else its job's (a command's:
        none). Its ``per_tenant`` is judged before (``problems``)."""
        own = per_tenant(self.per_tenant)
        if own or not self.job or by_name(self.deliver) or self.job not in registry:
            return own
        return registry.get(self.job).per_tenant

    def _tenant_problems(self) -> list[str]:
        """A schedule run per tenant needs django-tenants, and runs in the worker's threads."""
        try:
            tenants = self.tenants()
        except ValueError:  # said by the option's own check
            return []
        if tenants and not fanout.installed():
            return [
                "per_tenant needs django-tenants, set up as the tenants docs say (the tenants "
                "extra), or an empty per_tenant"
            ]
        problem = tenants_problem(tenants, self.deliver, self.timeout)
        return [problem] if problem else []

    def _jitter_problems(self) -> list[str]:
        """A jitter as long as the shortest interval between its ticks, or longer: its own, or
        for an override the code job's, which its new schedule must leave room for (a
        schedule that is itself refused is said so by its own problems)."""
        from ..core.schedule import Every, Schedule

        jitter = self.jitter
        if self.override and self.name in registry:
            jitter = registry.get(self.name).jitter
        if not jitter:
            return []
        try:
            schedule = (
                Every(duration("every", self.every))
                if self.every is not None
                else Schedule(self.cron, zone=self.timezone or None)
                if self.cron
                else None
            )
        except (InvalidSchedule, ValueError):
            return []
        problem = jitter_problem(jitter, schedule)
        return [problem] if problem else []

    def _storable_problems(self) -> list[str]:
        """What the database's schedules table cannot hold: text longer than its column,
        NUL or a lone surrogate in a text or in the arguments, NaN or infinity in the
        arguments (a settings entry's arguments that are no JSON are not stored: not judged)."""
        from ..models import Schedule  # here: this module is imported before the models

        problems = []
        for name, what in TEXT_FIELDS.items():
            value = getattr(self, name)
            longest = getattr(Schedule._meta.get_field(name), "max_length", None)
            if isinstance(value, str) and longest and len(value) > longest:
                problems.append(f"the {what} is {len(value)} characters long; at most {longest}")
            if any(_UNSTORABLE.search(text) for text in _texts(value)):
                problems.append(f"the {what} must not hold NUL or an unpaired surrogate")
        for name in ("args", "kwargs"):
            try:
                json.dumps(getattr(self, name), allow_nan=False)
            except ValueError:
                problems.append(
                    f"the {TEXT_FIELDS[name]} must not hold NaN or infinity (JSON has none)"
                )
            except (TypeError, RecursionError):
                pass
        return problems

    def _around_problems(self) -> list[str]:
        """What it sets around the body: a retry policy, and not for a body run elsewhere."""
        given = any(getattr(self, name) is not None for name in AROUND)
        named = by_name(self.deliver)
        if named and given:
            return [
                f"a schedule sent to {named.queue} runs in {named.workers}, which retry and log "
                f"it as the {named.task} says: it takes no {', '.join(AROUND[:-1])} or "
                f"{AROUND[-1]} of its own"
            ]
        if self.retries is None and self.retry_backoff is None:
            return []
        problem = policy_problem(self.retries or 0, 1.0, 1.0, Exception)
        if problem:
            return [problem]
        if self.retries is not None and self.retries > MAX_RETRIES:
            return [f"retries must be a whole number from 0 to {MAX_RETRIES}, not {self.retries}"]
        try:
            optional_duration("retry_backoff", self.retry_backoff)
        except ValueError as error:
            return [str(error)]
        if self.retry_backoff is not None and not self.retries:
            return [
                "a retry back-off applies to the schedule's own retries: give retries above 0 too"
            ]
        return []

    def schedule_text(self) -> str:
        """Its schedule as people read it: the cron expression, or ``every 30s`` (an
        interval out of bounds as it is written: its schedule cannot run)."""
        if self.at is not None:
            try:
                return Once(self.at, zone=self.timezone or None).describe()
            except (InvalidSchedule, OverflowError):  # as it is written: it cannot run
                return f"once at {self.at.isoformat(sep=' ')}"
        if self.every is not None:
            try:
                return describe_interval(duration("every", self.every))
            except ValueError:
                return f"every {self.every}s"
        return self.cron


def one_line(name: str) -> str:
    """``name`` with each character a name cannot hold (``UNPRINTABLE``) written as its
    escape, ``\\n`` for a newline: a row written past the checks still shows on one line."""
    return "".join(
        c.encode("unicode_escape").decode() if unicodedata.category(c) in UNPRINTABLE else c
        for c in name
    )


def _texts(value: object) -> Iterator[str]:
    """Every string in a JSON-like ``value``: its keys and its values, however nested."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _texts(key)
            yield from _texts(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _texts(item)


def _job_call_problems(name: str, args: list[Any], kwargs: dict[str, Any]) -> list[str]:
    if name not in registry:
        hint = did_you_mean(name, [job.name for job in registry.all()])
        return [f"there is no registered job {name!r}{hint}"]
    try:
        signature = inspect.signature(registry.get(name).func)
    except ValueError:  # a builtin with no signature to read (Python 3.10's print): run it
        return []
    try:
        signature.bind(*args, **kwargs)
    except TypeError as error:
        return [f"job {name!r} cannot be called with these arguments: {error}"]
    return []


@functools.cache
def _command_parser(app: str | BaseCommand, name: str) -> CommandParser | str:
    """The parser of command ``name`` of ``app``, or why it has none. Made once per process:
    building it was most of a command schedule's check, which every change of the schedules
    repeats for each of them."""
    try:
        command = app if not isinstance(app, str) else load_command_class(app, name)
        return command.create_parser("manage.py", name)
    except Exception as error:  # the command's own module is broken
        return f"manage.py {name} cannot be loaded: {first_line(error)}"


def _command_call_problems(
    name: str, args: list[Any], kwargs: dict[str, Any], allowed_only: bool
) -> list[str]:
    commands = get_commands()
    if name not in commands:
        hint = did_you_mean(name, commands, "see manage.py help")
        return [f"there is no management command {name!r}{hint}"]
    if allowed_only and name not in app_settings.SCHEDULE_COMMANDS:
        return [
            f"manage.py {name} is not a command a schedule may call; add {name!r} to "
            "ADVISORY_CRON['SCHEDULE_COMMANDS'] to allow it"
        ]
    parser = _command_parser(commands[name], name)
    if isinstance(parser, str):
        return [parser]
    options = {
        min(action.option_strings).lstrip("-").replace("-", "_"): action.dest
        for action in parser._actions
        if action.option_strings
    }
    dests = {action.dest for action in parser._actions}
    unknown = sorted(key for key in kwargs if key not in options and key not in dests)
    if unknown:
        return [f"manage.py {name} has no option {', '.join(unknown)}"]
    if {"-h", "--help", "--version"} & {str(arg) for arg in args}:
        return [f"manage.py {name}: these arguments ask for its help, not a run"]
    try:
        parser.parse_args([str(arg) for arg in args])
    except CommandError as error:
        message = str(error).removeprefix("Error: ")
        if "required" not in message or not kwargs:
            return [f"manage.py {name} refuses these arguments: {message}"]
    except SystemExit:  # an action of the command's own that exits (as --help does)
        return [f"manage.py {name} refuses these arguments: {' '.join(map(str, args))}"]
    return []


def _calling(
    function: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]
) -> Callable[[], Any]:
    """A function of no arguments that calls ``function`` with these; an ``async def`` one
    makes an ``async def`` one, so that the runner awaits it."""
    if inspect.iscoroutinefunction(function):

        async def run_async() -> Any:
            return await function(*args, **kwargs)

        return run_async

    def run() -> Any:
        return function(*args, **kwargs)

    return run


def to_job(definition: Definition, *, source: Source = "database") -> Job[..., Any]:
    """The job a (valid) definition of a new schedule makes: it calls its job's function, not
    the job itself (whose lock is another), or its command through ``call_command``."""
    args, kwargs = list(definition.args), dict(definition.kwargs)
    run: Callable[[], Any]
    named = by_name(definition.deliver)
    if named:  # the body is the queue's task, in the queue's workers
        run = RemoteCall(definition.job, args, kwargs, named)
        using, once, retry, capture = None, False, None, None
        description = definition.description or f"{named.task} {definition.job}"
    elif definition.job:
        target = registry.get(definition.job)
        run = _calling(target.func, args, kwargs)
        using, once = target.using, target.at_most_once
        if definition.at_most_once is not None:
            once = definition.at_most_once
        retry = _retry(definition, target.retry)
        capture = target.capture
        if definition.capture is not None:
            capture = (target.capture or (target.func.__module__,)) if definition.capture else None
        description = definition.description or target.description
    else:
        run = _calling(call_command_captured, [definition.command, *args], kwargs)
        using, once, retry = None, bool(definition.at_most_once), _retry(definition, None)
        capture = None if definition.capture is False else ()
        description = definition.description or definition.calls
    if not isinstance(run, RemoteCall):
        run.__name__ = run.__qualname__ = definition.name
        run.__module__ = __name__
    return Job(
        func=run,
        name=definition.name,
        using=using,
        at_most_once=once,
        retry=retry,
        capture=capture,
        description=description,
        source=source,
        edited=definition.changed,
        **{
            **{name: build(getattr(definition, name)) for name, build in BUILT.items()},
            "per_tenant": definition.tenants(),
        },
    )


def overridden(job: Job[..., Any], override: Definition) -> Job[..., Any]:
    """``job`` (defined in code or settings) with what ``override`` changes of it."""
    changes: dict[str, Any] = {"enabled": override.enabled}
    if override.cron or override.every is not None:
        changes["cron"] = override.cron or None
        changes["every"] = optional_duration("every", override.every)
        changes["timezone"] = override.timezone or None
    differs = tuple(
        name for name in OVERRIDABLE if changes.get(name, getattr(job, name)) != getattr(job, name)
    )
    return dataclasses.replace(job, **changes, overridden=differs, edited=override.changed)


def _retry(definition: Definition, inherited: RetryPolicy | None) -> RetryPolicy | None:
    """The retries a schedule sets, on its job's policy (its ``retry_on``, its back-off
    unless the schedule sets one), or the job's when it sets none."""
    if definition.retries is None:
        return inherited
    if not definition.retries:
        return None
    base = inherited or RetryPolicy(0)
    backoff = as_seconds("retry_backoff", definition.retry_backoff) or base.backoff
    return dataclasses.replace(base, retries=definition.retries, backoff=backoff)
