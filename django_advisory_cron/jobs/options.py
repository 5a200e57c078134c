"""A schedule's options, defined once: each one's name (the
[Definition][django_advisory_cron.jobs.definitions.Definition]'s field and the schedule row's
column), what people call it, its key in ``ADVISORY_CRON["SCHEDULES"]``, its flag of
``cronjob add``/``edit``, its place and help on the admin's form, whether an override may set
it, how ``cronjob list --json`` shows it, and the one conversion that both checks a value and
builds what the job holds. The settings' reader, the command's flags, the admin's form, the
definition's rules and the JSON listing are made from this table, so that a new option is
added here, to the model and in a migration (and where it acts), nowhere else."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from django.utils.translation import gettext_lazy as _

from ..core.overlap import (
    MAX_BUFFERED,
    MAX_CONCURRENT,
    concurrent_runs,
    overlap_policy,
)
from ..core.schedule import seconds_text
from ..delivery import targets
from .option_values import (
    EARLIEST,
    LATEST,
    MAX_DURATION,
    Checked,
    Shown,
    calendar,
    calendar_problem,
    catch_up_policy,
    catch_up_problem,
    delivery,
    kind_of,
    max_lateness_problem,
    max_runs,
    max_runs_problem,
    one_off,
    overlap_problem,
    per_tenant,
    shown_tenants,
    spread_problem,
)

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise


#: Where an option shows on the admin's form: the heading it is under (the admin names them).
Group = Literal["", "calls", "when", "options", "around"]
#: How the admin's form shows it besides the model field's own widget: a text area, or yes,
#: no or empty for "as its job does".
Widget = Literal["", "area", "inherit"]


@dataclass(frozen=True)
class Check:
    """The system check of an option of a job defined in code: ``@locked_task`` refuses a
    bad value, a job registered without it (or changed since) is checked at start-up."""

    #: Its id, without the app's prefix (``E021``), one for each kind of problem.
    id: str
    #: Why the job's value is refused, in one line, or ``None``.
    problem: Callable[[Checked], str | None]
    #: What to do about it.
    hint: str


@dataclass(frozen=True)
class Option:
    """One option of a schedule."""

    #: The definition's field and the schedule row's column.
    name: str
    #: What people call it, in a refusal ("the max lateness must ...").
    what: str
    #: Its key in ``ADVISORY_CRON["SCHEDULES"]`` (``None``: not one of its keys).
    key: str | None
    #: Its flag of ``cronjob add`` and ``edit``, the flag's metavar and help; or, without a
    #: flag, how the command sets it instead.
    flag: str | None
    metavar: str
    help: str | Callable[[], str]
    #: Where it shows on the admin's form, its help there (``None``: the form's own), and
    #: its widget there.
    group: Group
    form_help: StrOrPromise | None = None
    widget: Widget = ""
    #: Whether an override of a job defined in code may change it.
    overridable: bool = False
    #: Whether it sets what happens around the body (``None``: as its job does).
    around: bool = False
    #: A duration's least value (``None``: no duration): what ``build`` checks it against.
    least: timedelta | None = None
    #: Text the database must store: a column whose length the model bounds, or JSON; a NUL
    #: or a lone surrogate in it is refused.
    text: bool = False
    #: How ``cronjob list --json`` shows it, of the job as it runs (``None``: not there, or
    #: among the status's facts).
    shown: Callable[[Shown], Any] | None = None
    #: What the job's field of its name holds for the definition's value, the one conversion
    #: that checks it too: it raises ``ValueError``, in one line, for what the rules refuse
    #: (``None``: the job is built from it otherwise).
    build: Callable[[Any], Any] | None = None
    #: The start of the problems the admin's form shows at this field, as a pattern.
    problems: str = ""
    #: Its ``@locked_task`` keyword (``None``: a job defined in code has none); a test holds
    #: the decorator's signature to these.
    keyword: str | None = None
    #: The system check of its value on a job defined in code (``None``: none of its own).
    check: Check | None = None

    def help_text(self) -> str:
        """The flag's help (the delivery targets' is made from them as they registered)."""
        return self.help if isinstance(self.help, str) else self.help()


def duration(name: str, seconds: object) -> timedelta:
    """The duration option ``name`` says, ``seconds``, as the job is built with it. Raises
    ``ValueError``, in one line with the bounds, for what is no number of seconds or, once a
    ``timedelta`` (whole microseconds), out of them."""
    option = BY_NAME[name]
    least = option.least
    assert least is not None, f"{name} is no duration"
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise ValueError(f"the {option.what} must be a number of seconds, not {kind_of(seconds)}")
    try:
        made: timedelta | None = timedelta(seconds=seconds)
    except (OverflowError, ValueError):  # too many days, or NaN
        made = None
    if made is None or not least <= made <= MAX_DURATION:
        raise ValueError(
            f"the {option.what} must be a number of seconds from "
            f"{seconds_text(least.total_seconds())} to "
            f"{seconds_text(MAX_DURATION.total_seconds())} ({MAX_DURATION.days} days), "
            f"not {seconds:g}"
        )
    return made


def optional_duration(name: str, seconds: object) -> timedelta | None:
    """``duration``, or ``None`` when the option is not set."""
    return None if seconds is None else duration(name, seconds)


def within_span(name: str, value: datetime | None) -> datetime | None:
    """The start or end ``value`` (``None``: none). Raises ``ValueError`` outside
    ``EARLIEST`` to ``LATEST``."""
    if value is not None and not EARLIEST <= value < LATEST:
        raise ValueError(
            f"the {BY_NAME[name].what} must be from {EARLIEST:%Y-%m-%d} to {LATEST:%Y-%m-%d} "
            f"(UTC), not {value.isoformat()}"
        )
    return value


def as_seconds(name: str, value: object) -> float | None:
    """``duration``, as the float seconds a job holds (``None``: not set)."""
    made = optional_duration(name, value)
    return None if made is None else made.total_seconds()


def code_seconds(name: str, value: object) -> float | None:
    """``as_seconds``, for a value code gives: a number of seconds or a ``timedelta``."""
    return as_seconds(name, value.total_seconds() if isinstance(value, timedelta) else value)


def code_seconds_problem(name: str, value: object) -> str | None:
    """Why ``code_seconds`` refuses ``value``, or ``None``: what the system checks say of a
    job registered without ``@locked_task``."""
    try:
        code_seconds(name, value)
    except ValueError as error:
        return str(error)
    return None


def _or_none(value: str) -> str | None:
    return value or None


def _deliver_help() -> str:
    """``--deliver``'s help: the targets as they registered themselves."""
    known = targets.registered()
    schemes = ", or ".join(f"{target.scheme}[:<{target.where}>]" for target in known)
    named = "".join(f" (--job then names the {t.by_name.task})" for t in known if t.by_name)
    return f"hand its ticks to a queue (deliver=): {schemes}{named}"


def _retries(job: Shown) -> int:
    return 0 if job.retry is None else job.retry.retries


def _backoff(job: Shown) -> float | None:
    return None if job.retry is None else job.retry.backoff


#: Every option, in the order of the settings' keys and of the admin's form within each of
#: its headings.
OPTIONS = (
    Option(
        "name", "name", "name", None, "NAME", "the command's NAME", "",
        _(
            "The job name its runs, lock and ticks go by. For an override, the name of the job "
            "defined in code."
        ),
        problems=(
            r"a schedule needs a name|the name |there is no job .* defined in code to override$"
        ),
        keyword="name",
    ),
    Option(
        "job", "job", "job", "--job", "JOB", "the registered job it calls", "calls", text=True,
        problems=r"there is no registered job |.* is not a task a schedule may send",
    ),
    Option(
        "command", "command", "command", "--command", "COMMAND",
        "the management command it calls", "calls", text=True,
        problems=r"there is no management command |manage\.py \S+ is not a command a schedule ",
    ),
    Option(
        "args", "arguments", "args", "--args", "JSON",
        "the arguments, a JSON list: '[\"daily\", 2]' (for a command: its command-line "
        'arguments, \'["--days", "30"]\')',
        "calls", _('A JSON list, such as ["nightly", 3].'), "area", text=True,
        problems=(
            r"job .* cannot be called with these arguments: "
            r"|manage\.py \S+(:| refuses) these arguments|the arguments must "
        ),
    ),
    Option(
        "kwargs", "keyword arguments", "kwargs", "--kwargs", "JSON",
        "the keyword arguments (a command's options), a JSON object", "calls",
        _(
            'A JSON object, such as {"note": "from the admin"}; for a command, its options by '
            "name."
        ),
        "area", text=True,
        problems=r"manage\.py \S+ has no option |the keyword arguments must ",
    ),
    Option(
        "cron", "cron expression", "schedule", "--schedule", "CRON",
        "a five- or six-field cron expression: '0 2 * * *'", "when",
        _(
            "Five fields (minute hour day month weekday), or six with the seconds last; or "
            "leave it empty and give an interval."
        ),
        overridable=True, text=True,
        build=_or_none, problems=r"bad cron expression: |'.*' never fires: ", keyword="schedule",
    ),
    Option(
        "every", "interval", "every", "--every", "SECONDS",
        "an interval instead of a cron expression, in seconds", "when",
        _("An interval in seconds, instead of a cron expression."),
        overridable=True, least=timedelta(seconds=1),
        build=lambda value: optional_duration("every", value), problems=r"the interval must ",
        keyword="every",
    ),
    Option(
        "timezone", "time zone", "timezone", "--timezone", "ZONE",
        "the zone the cron expression is read in (else TIME_ZONE)", "when",
        _("The IANA time zone of the cron expression, such as Europe/Berlin (empty: TIME_ZONE)."),
        overridable=True, text=True,
        build=_or_none, problems=r"a time zone |timezone ", keyword="timezone",
    ),
    Option(
        "enabled", "enabled", "enabled", None, "", "--enable or --disable (add: --disabled)",
        "when", _("A disabled schedule has no ticks; Run now still runs it."),
        overridable=True, shown=lambda job: job.enabled,
        build=bool,
    ),
    Option(
        "override", "override", None, None, "",
        "edit NAME of a job defined in code or settings", "",
        _(
            "Change the schedule (cron, interval, time zone, enabled) of the job of this name "
            "defined in code, instead of adding a job. It calls nothing else."
        ),
    ),
    Option(
        "catch_up", "catch-up", "catch_up", "--catch-up", "POLICY",
        "which missed ticks run: latest, all or none", "options",
        _("Which missed ticks run after a gap (empty: the CATCH_UP setting)."),
        build=catch_up_policy, problems="catch-up ", keyword="catch_up",
        check=Check(
            "E021", lambda job: catch_up_problem(job.catch_up), "Use 'latest', 'all' or 'none'."
        ),
    ),
    Option(
        "max_lateness", "max lateness", "max_lateness", "--max-lateness", "SECONDS",
        "a tick later than this is skipped", "options", least=timedelta(microseconds=1),
        build=lambda value: as_seconds("max_lateness", value), problems="the max lateness ",
        keyword="max_lateness",
        check=Check(
            "E022", lambda job: max_lateness_problem(job.max_lateness),
            "Give a positive number of seconds, or remove max_lateness=.",
        ),
    ),
    Option(
        "late_after", "lateness target (late_after)", "late_after", "--late-after", "SECONDS",
        "the job is late (cronstatus, health/) once a run starts more than this after its tick; "
        "nothing is skipped (unlike --max-lateness)",
        "options",
        _(
            "Seconds: a run that starts more than this after its tick makes the job late in "
            "cronstatus, health/ and the Jobs page, before it is overdue. Nothing is skipped "
            "(max lateness skips a tick instead)."
        ),
        least=timedelta(microseconds=1),
        build=lambda value: as_seconds("late_after", value), problems="the lateness target ",
        keyword="late_after",
        check=Check(
            "E024", lambda job: code_seconds_problem("late_after", job.late_after),
            "Give a number of seconds or a timedelta, or remove late_after=.",
        ),
    ),
    Option(
        "jitter", "jitter", "jitter", "--jitter", "SECONDS",
        "start each tick up to this much after it, at an offset every replica computes alike "
        "(below the shortest interval between its ticks)",
        "options",
        _(
            "Start each tick up to this many seconds after it, at an offset computed from the "
            "name and the tick (the same on every replica); shorter than the shortest interval "
            "between its ticks. Empty: at its tick."
        ),
        least=timedelta(0), shown=lambda job: job.jitter,
        build=lambda value: as_seconds("jitter", value) or None, problems="the jitter ",
        keyword="jitter",
        check=Check(
            "E025", spread_problem,
            "Give a jitter shorter than the shortest interval between its ticks, or remove "
            "jitter=.",
        ),
    ),
    Option(
        "timeout", "timeout", "timeout", "--timeout", "SECONDS", "stop a run that takes longer",
        "options", least=timedelta(microseconds=1),
        build=lambda value: as_seconds("timeout", value), problems="the timeout ",
        keyword="timeout",
    ),
    Option(
        "deliver", "delivery", "deliver", "--deliver", "TARGET", _deliver_help, "options",
        _(
            'Empty: the worker runs it; "tasks" or "tasks:<backend alias>": through Django\'s '
            "Tasks framework."
        ),
        text=True, shown=lambda job: job.deliver,
        build=delivery, problems="deliver |unknown delivery |a schedule sent to [^;]* runs in ",
        keyword="deliver",
    ),
    Option(
        "description", "description", "description", "--description", "TEXT",
        "what it is for, for the others", "", text=True,
    ),
    Option(
        "starts", "start", "starts", "--starts", "WHEN",
        "its first possible tick, ISO 8601 (in TIME_ZONE without offset)", "when",
        _("Its first possible tick (empty: no start)."),
        build=lambda value: within_span("starts", value),
    ),
    Option(
        "ends", "end", "ends", "--ends", "WHEN", "its last possible tick, ISO 8601", "when",
        _("Its last possible tick (empty: no end)."),
        build=lambda value: within_span("ends", value),
        problems="the schedule ends before it starts",
    ),
    Option(
        "retries", "retries", "retries", "--retries", "N",
        "call it again up to N times after a failure, within its tick (empty: as its job "
        "does; a command: none)",
        "around",
        _(
            "Call it again up to this many times after a failure, within its tick and under "
            "its lock. Empty: as its job does (a command: none). Which errors are retried is "
            "the job's retry_on, in code."
        ),
        around=True, shown=_retries,
        problems="retries must ", keyword="retries",
    ),
    Option(
        "retry_backoff", "retry back-off", "retry_backoff", "--retry-backoff", "SECONDS",
        "the wait before the first retry, doubled for each next one (with --retries; empty: "
        "as its job does, else 1)",
        "around",
        _(
            "Seconds before the first retry, doubled for each next one, with jitter. Empty: as "
            "its job does (else 1). With retries set here."
        ),
        around=True, least=timedelta(microseconds=1), shown=_backoff,
        problems="retry_backoff must |a retry back-off |the retry back-off ",
        keyword="retry_backoff",
    ),
    Option(
        "at_most_once", "at most once", "at_most_once", "--at-most-once", "yes|no",
        "yes: a tick whose run was interrupted stays taken; no: it is given back to run again "
        "(empty: as its job does; a command: no)",
        "around",
        _(
            "Yes: a tick whose run was interrupted (a stop signal, kill -9) stays taken. No: it "
            "is given back, and may run again. Empty: as its job does (a command: no)."
        ),
        "inherit", around=True, keyword="at_most_once",
    ),
    Option(
        "capture", "captured output", "capture", "--capture", "yes|no",
        "keep what a run logs (a command: its output) with the run (empty: as its job does; "
        "a command: yes)",
        "around",
        _(
            "Keep what a run logs (its job's module logger; a command's output) with the run. "
            "Empty: as its job does (a command: yes)."
        ),
        "inherit", around=True, shown=lambda job: job.capture is not None, keyword="capture",
    ),
    Option(
        "at", "one-off moment", "at", "--at", "WHEN",
        "run once, at this date and time: 'YYYY-MM-DD HH:MM[:SS]' in --timezone (else "
        "TIME_ZONE), instead of a cron expression or an interval",
        "when",
        _(
            "A one-off: the date and time of its single run, in its time zone (empty: "
            "TIME_ZONE), instead of a cron expression or an interval. Afterwards it is done."
        ),
        build=one_off, problems=r"at must |the moment |a schedule has one of ",
        keyword="at",
    ),
    Option(
        "max_runs", "max runs", "max_runs", "--max-runs", "N",
        "end the schedule after N runs of its ticks (empty: no end)", "options",
        _("The schedule ends after this many runs of its ticks (empty: no end)."),
        build=max_runs, problems="max_runs must ", keyword="max_runs",
        check=Check(
            "E026", max_runs_problem, "Give a whole number from 1, or remove max_runs=."
        ),
    ),
    Option(
        "overlap", "overlap policy", "overlap", "--overlap", "POLICY",
        "what a tick that comes while a run is going does: skip (the default), buffer_one "
        "(waits, starts when that run ends; one waits, later ones skip), buffer_all (every "
        f"such tick waits, run in turn oldest first, at most {MAX_BUFFERED}), allow_all (runs "
        "beside it, up to --max-concurrent at once), cancel_other (asks it to stop, then runs) "
        "or terminate_other (stops it at once, then runs)",
        "options",
        _(
            "What a tick that comes while a run of the job is going does. Empty or skip: it is "
            "skipped. buffer_one: it waits and starts as soon as that run ends; one tick "
            "waits, later ones are skipped. buffer_all: every such tick waits and they run in "
            "turn, oldest first; at most 20 wait, later ones are skipped. allow_all: it runs "
            "beside it, up to the max concurrent runs at once; each tick still runs once. "
            "cancel_other: the run going is asked to stop and given 5 seconds (its row says "
            "it was cancelled), then the tick runs. terminate_other: the run going is stopped "
            "at once (its row says it was replaced), then the tick runs."
        ),
        text=True, shown=lambda job: job.overlap,
        build=overlap_policy, problems="overlap ", keyword="overlap",
        check=Check(
            "E027", overlap_problem,
            "Use overlap='skip', 'buffer_one', 'buffer_all', 'allow_all' (with "
            f"max_concurrent from 1 to {MAX_CONCURRENT}), 'cancel_other' or 'terminate_other'.",
        ),
    ),
    Option(
        "max_concurrent", "max concurrent runs", "max_concurrent", "--max-concurrent", "N",
        f"with --overlap allow_all: how many runs may go at once, 1 to {MAX_CONCURRENT} "
        "(empty: 2)",
        "options",
        _("With allow_all: how many runs may go at once (empty: 2)."),
        shown=lambda job: job.slots,
        build=concurrent_runs, problems="max_concurrent ", keyword="max_concurrent",
    ),
    Option(
        "calendar", "calendar", "calendar", "--calendar", "CALENDAR",
        "skip (or keep) days of a business calendar: [skip|keep|first|last:]SOURCE[+SOURCE], "
        "a SOURCE being holidays:US, holidays:DE-BY, business:FR, market:NYSE, weekends or "
        "dates:NAME (empty: none)",
        "when",
        _(
            "A business calendar, such as holidays:US, business:FR, market:NYSE, weekends or "
            "dates:NAME (several joined by +); first:business:FR runs on the month's first "
            "business day only, last: on its last, keep: on the calendar's days only. Empty: "
            "every day."
        ),
        text=True, shown=lambda job: job.calendar,
        build=calendar, problems="calendar |the calendar ", keyword="calendar",
        check=Check(
            "E031", calendar_problem,
            "Spell it [skip|keep|first|last:]SOURCE[+SOURCE] (docs: scheduling, calendars).",
        ),
    ),
    Option(
        "per_tenant", "tenants", "per_tenant", "--per-tenant", "'*'|SCHEMA[,SCHEMA]",
        "with django-tenants: run each tick once for every tenant schema ('*') or for these "
        "schemas, each tenant's run as NAME@SCHEMA in its schema (empty: as its job does)",
        "calls",
        _(
            "With django-tenants: * runs each tick once for every tenant schema, in that "
            "schema; schema names separated by commas, for those tenants only. Each tenant's "
            "runs go by NAME@SCHEMA. Empty: as its job does."
        ),
        text=True, shown=shown_tenants,
        build=per_tenant, problems="per_tenant[ :]", keyword="per_tenant",
    ),
)  # fmt: skip
BY_NAME = {option.name: option for option in OPTIONS}
#: What an override of a job defined in code or settings changes.
OVERRIDABLE = tuple(option.name for option in OPTIONS if option.overridable)
#: What happens around the body that a schedule may set (``None``: as its job does).
AROUND = tuple(option.name for option in OPTIONS if option.around)
#: The options a job is built from as they are, each by the conversion that checks it.
BUILT = {option.name: option.build for option in OPTIONS if option.build is not None}
#: Those a definition's options are judged by alone: not its schedule (cron, interval, zone),
#: which is judged as a whole.
CHECKED = {name: build for name, build in BUILT.items() if not BY_NAME[name].overridable}
#: What an override must leave empty (its description is a note, and what it calls is judged
#: apart).
NOT_OVERRIDABLE = (*CHECKED, *AROUND)
#: The checks of a job defined in code that its options have of their own.
CHECKS = tuple(option.check for option in OPTIONS if option.check is not None)
#: The durations, in seconds.
DURATIONS = tuple(option.name for option in OPTIONS if option.least is not None)
#: The text columns (their lengths are the model's) and the JSON ones, by what people call them.
TEXT_FIELDS = {option.name: option.what for option in OPTIONS if option.text}
