"""``@locked_task``, ``Job`` and the registry of jobs."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, Literal, ParamSpec, TypeVar, overload

from ..conf import CatchUp
from ..core import jitter as offsets
from ..core.keys import KEY_MODES, KeyMode, LockKey, job_key
from ..core.once import Once, read_moment
from ..core.overlap import (
    Overlap,
    combination_problem,
    concurrent_runs,
    overlap_policy,
    slots,
)
from ..core.retries import RetryPolicy, policy_problem
from ..core.schedule import (
    Every,
    NeverFires,
    Schedule,
    as_interval,
    describe_interval,
    zone_problem,
)
from ..core.schedule_rules import (
    ONE_KIND,
    both_problem,
    jitter_seconds,
    never_fires_problem,
    spread_over,
    timezone_problem,
)
from ..core.scopes import Scope, check_scope
from ..delivery.targets import parse as parse_deliver
from ..exceptions import InvalidSchedule, LockNotAcquired, UnknownJob
from .option_values import (
    Tenants,
    catch_up_problem,
    code_calendar,
    max_lateness_problem,
    tenants_problem,
)
from .option_values import max_runs as max_runs_value
from .option_values import per_tenant as per_tenant_value
from .options import code_seconds, code_seconds_problem

if TYPE_CHECKING:
    from ..run.runner import RunResult
    from .overlap import Policy

P = ParamSpec("P")
R = TypeVar("R")

OnLocked = Literal["skip", "raise"]
Source = Literal["code", "settings", "database"]

#: The longest job name the run history stores (``JobRun.job``'s ``max_length``).
MAX_JOB_NAME = 200


class _Skipped:
    """The value a job call returns when it did not run (falsy)."""

    _instance: _Skipped | None = None

    def __new__(cls) -> _Skipped:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "SKIPPED"


#: Returned by calling a job that was skipped (locked elsewhere, or its tick already ran).
SKIPPED = _Skipped()


@dataclass(eq=False)
class Job(Generic[P, R]):
    """A function that runs under its own advisory lock."""

    func: Callable[P, R]
    name: str
    cron: str | None = None
    #: The interval of an interval schedule (``every=``); exclusive with ``cron``.
    every: timedelta | None = None
    scope: Scope = "auto"
    wait: float = 0
    max_runtime: float | None = None
    on_locked: OnLocked = "skip"
    key_mode: KeyMode = "sha256"
    using: str | None = None
    #: Which missed ticks run after a gap (``None``: the ``CATCH_UP`` setting); see
    #: [catchup][django_advisory_cron.jobs.catchup].
    catch_up: CatchUp | None = None
    #: Seconds: a tick more than this late is passed over instead of run (``None``: no limit).
    max_lateness: float | None = None
    #: Seconds after its tick a run may start before the job is *late* in ``cronstatus``,
    #: ``health/`` and the Jobs page (``None``: no target); nothing is skipped for it.
    late_after: float | None = None
    #: Seconds: each tick starts up to this much after it, at an offset every replica computes
    #: alike (see [jitter][django_advisory_cron.core.jitter]); ``None``: at its tick.
    jitter: float | None = None
    #: The IANA time zone the cron expression is evaluated in (``None``: ``TIME_ZONE``).
    timezone: str | None = None
    #: Hard limit in seconds: a run still going after it is stopped, recorded ``timed_out``
    #: and its lock released. Enforced where the job runs in a process of its own
    #: (``runlocked``; ``cronworker`` always runs such a job in a child process).
    timeout: float | None = None
    #: Where a scheduled tick runs: ``None`` in place, ``"tasks"`` or ``"tasks:<alias>"`` through
    #: Django's Tasks framework.
    deliver: str | None = None
    #: A tick whose body started is taken whatever happened to it: an interrupted run (a stop
    #: signal, ``kill -9``, a lost machine) does not give it back to be run again.
    at_most_once: bool = False
    #: Retries of a failed attempt within its tick (``None``: none); see
    #: [retries][django_advisory_cron.core.retries].
    retry: RetryPolicy | None = None
    #: The loggers whose records a run keeps with it (``None``: its output is not captured;
    #: ``()`` for a command: its stdout and stderr only); see
    #: [output][django_advisory_cron.run.output].
    capture: tuple[str, ...] | None = None
    description: str = field(default="")
    #: Where the job is defined: ``"code"`` (``@locked_task``), ``"settings"``
    #: (``ADVISORY_CRON["SCHEDULES"]``) or ``"database"`` (the admin, ``cronjob add``).
    source: Source = "code"
    #: What an operator changed of a job defined in code or settings (``cron``, ``every``,
    #: ``timezone``, ``enabled``); ``()`` when nothing.
    overridden: tuple[str, ...] = ()
    #: When its schedule was last changed in the database, on the database's clock: ticks
    #: before it are not caught up (``None``: never changed there).
    edited: datetime | None = None
    #: A disabled job has no ticks (it still runs when asked to run now).
    enabled: bool = True
    #: Its first and last possible tick (``None``: no bound).
    starts: datetime | None = None
    ends: datetime | None = None
    #: A one-off's moment (``at=``), its single tick; exclusive with ``cron`` and ``every``.
    at: datetime | None = None
    #: Its schedule ends after this many runs of its ticks (``None``: no end).
    max_runs: int | None = None
    #: What a tick that comes while a run is going does (see
    #: [overlap][django_advisory_cron.core.overlap]): ``"skip"``, or ``"allow_all"``, up to
    #: ``max_concurrent`` runs at once (``None``: its default).
    overlap: Overlap = "skip"
    max_concurrent: int | None = None
    #: Run each tick once for every tenant schema (``True``) or for these schemas
    #: (django-tenants; see [tenants][django_advisory_cron.contrib.tenants]), each under
    #: ``name@schema``; ``False``: not per tenant.
    per_tenant: Tenants = False
    #: The tenant schema this job runs a per-tenant job for (``None``: no tenant's).
    tenant: str | None = None
    #: The business calendar its ticks skip or keep (``core.calendars``; ``None``: none).
    calendar: str | None = None

    def __post_init__(self) -> None:
        functools.update_wrapper(self, self.func)
        if not self.description:
            self.description = (self.func.__doc__ or "").strip().split("\n")[0]
        if self.at is not None and (self.cron is not None or self.every is not None):
            raise InvalidSchedule(f"job {self.name!r}: {ONE_KIND}")
        if self.every is not None:
            if self.cron is not None:
                raise InvalidSchedule(f"job {self.name!r}: {both_problem(self.cron, self.every)}")
            try:
                self.every = as_interval(self.every)
            except InvalidSchedule as error:
                raise InvalidSchedule(f"job {self.name!r}: {error}") from None

    @functools.cached_property
    def schedule(self) -> Schedule | None:
        """The parsed ``cron`` expression in the job's ``timezone``, or an ``Every``
        (``schedule.Every``) for ``every``; raises ``InvalidSchedule`` when the expression or
        the zone is bad; a ``Once`` for ``at``."""
        if self.at is not None:
            return Once(self.at, zone=self.timezone)
        if self.every is not None:
            return Every(self.every)
        return None if self.cron is None else Schedule(self.cron, zone=self.timezone)

    @property
    def ticking_schedule(self) -> Schedule | None:
        """``schedule``, or ``None`` when the job has none or it cannot tick (a bad expression
        or zone, which the system checks and ``runlocked`` name): for the readers that only
        act on ticks."""
        try:
            return self.schedule
        except InvalidSchedule:
            return None

    @property
    def schedule_text(self) -> str | None:
        """What to show as the job's schedule: its cron expression as written,
        ``"every 5s"`` for an interval, ``None`` without a schedule. Never raises."""
        if self.at is not None:
            try:
                return Once(self.at, zone=self.timezone).describe()
            except (InvalidSchedule, OverflowError):
                return f"once at {self.at.isoformat(sep=' ')}"
        if self.every is not None:
            return describe_interval(self.every)
        return self.cron

    def in_window(self, tick: datetime) -> bool:
        """Whether ``tick`` lies between the job's ``starts`` and ``ends`` (inclusive)."""
        return (self.starts is None or tick >= self.starts) and (
            self.ends is None or tick <= self.ends
        )

    @property
    def final(self) -> datetime | None:
        """Its last possible tick: its ``ends``, or a one-off's moment (``None``: none)."""
        last = self.ticking_schedule.last if self.ticking_schedule is not None else None
        bounds = [moment for moment in (self.ends, last) if moment is not None]
        return min(bounds) if bounds else None

    def start_of(self, tick: datetime) -> datetime:
        """When its ``tick``'s run starts: the tick plus its jitter offset, for a tenant's run
        in whole ``TENANT_STEP`` seconds (see [jitter][django_advisory_cron.core.jitter]);
        every entry that starts a run or shows its offset asks this."""
        return offsets.start_of(self.name, tick, self.jitter, offsets.step_for(self.tenant))

    def offset_seconds(self, tick: datetime | None) -> float | None:
        """Its ``tick``'s jitter offset in seconds, as ``start_of`` computes it (``None``: no
        tick, or no jitter)."""
        return offsets.offset_seconds(self.name, tick, self.jitter, offsets.step_for(self.tenant))

    @property
    def key(self) -> LockKey:
        """The job's advisory lock key (computed from the configured namespace)."""
        return job_key(self.name, self.key_mode)

    @property
    def keys(self) -> tuple[LockKey, ...]:
        """The keys of its run slots, one per run it may have going at once (the first is
        ``key``): a claim takes the first that is free."""
        return tuple(self.key.slot_key(slot) for slot in range(1, self.slots + 1))

    @property
    def slots(self) -> int:
        """How many runs of it may go at once."""
        return slots(self.overlap, self.max_concurrent)

    @property
    def policy(self) -> Policy:
        """What its overlap policy does around its runs (see
        [overlap][django_advisory_cron.jobs.overlap])."""
        from .overlap import POLICIES  # imported here: it needs the runs, which need the models

        return POLICIES[self.overlap]

    @property
    def origin(self) -> str:
        """``module.qualname`` of the function, to tell registrations apart."""
        return f"{self.func.__module__}.{self.func.__qualname__}"

    def run(
        self,
        *args: Any,
        now: datetime | None = None,
        scope: Scope | None = None,
        wait: float | None = None,
        using: str | None = None,
        **kwargs: Any,
    ) -> RunResult:
        """Run under the lock and return a [RunResult][django_advisory_cron.RunResult]
        (re-raises failures, after recording them).

        Raises [InvalidSchedule][django_advisory_cron.exceptions.InvalidSchedule] for a bad
        ``cron`` expression.
        """
        # Imported here: the runner needs the models, and this module is imported by the
        # package's ``__init__`` before the app registry is ready.
        from ..run.runner import execute

        result = execute(
            self, args=args, kwargs=kwargs, now=now, scope=scope, wait=wait, using=using
        )
        return result.reraise()

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R | _Skipped:
        from ..run.runner import execute

        result = execute(self, args=args, kwargs=kwargs).reraise()
        if result.ran:
            value: R = result.value
            return value
        if self.on_locked == "raise":
            why = result.paused or (
                "its tick already ran" if result.skipped_tick else "locked by another process"
            )
            raise LockNotAcquired(f"job {self.name!r} did not run: {why}")
        return SKIPPED

    def __repr__(self) -> str:
        return f"<Job {self.name}>"


class Registry:
    """All jobs by name, remembering clashes for the system checks."""

    def __init__(self) -> None:
        self._jobs: dict[str, Job[Any, Any]] = {}
        self.clashes: list[tuple[Job[Any, Any], Job[Any, Any]]] = []
        #: Jobs modules whose import stopped at a refused declaration, and why (check E008).
        self.refused: list[tuple[str, str]] = []

    def register(self, job: Job[Any, Any]) -> None:
        existing = self._jobs.get(job.name)
        if existing is not None and existing.origin != job.origin:
            self.clashes.append((existing, job))
            return
        self._jobs[job.name] = job

    def unregister(self, name: str) -> None:
        self._jobs.pop(name, None)
        self.clashes = [pair for pair in self.clashes if pair[0].name != name]

    def get(self, name: str) -> Job[Any, Any]:
        try:
            return self._jobs[name]
        except KeyError:
            raise UnknownJob(name) from None

    def __contains__(self, name: object) -> bool:
        return name in self._jobs

    def all(self) -> list[Job[Any, Any]]:
        return sorted(self._jobs.values(), key=lambda job: job.name)


registry = Registry()


@overload
def locked_task(func: Callable[P, R], /) -> Job[P, R]: ...


@overload
def locked_task(
    *,
    name: str | None = None,
    schedule: str | None = None,
    every: timedelta | float | None = None,
    scope: Scope = "auto",
    wait: float = 0,
    max_runtime: float | None = None,
    on_locked: OnLocked = "skip",
    key: KeyMode = "sha256",
    using: str | None = None,
    catch_up: CatchUp | None = None,
    max_lateness: float | timedelta | None = None,
    late_after: float | timedelta | None = None,
    jitter: float | timedelta | None = None,
    timezone: str | None = None,
    timeout: float | None = None,
    deliver: str | None = None,
    at_most_once: bool = False,
    retries: int = 0,
    retry_backoff: float = 1.0,
    retry_backoff_max: float = 300.0,
    retry_on: type[BaseException] | tuple[type[BaseException], ...] = Exception,
    capture: bool | Sequence[str] = False,
    at: datetime | str | None = None,
    max_runs: int | None = None,
    overlap: str = "skip",
    max_concurrent: int | None = None,
    per_tenant: bool | Sequence[str] = False,
    calendar: str | None = None,
) -> Callable[[Callable[P, R]], Job[P, R]]: ...


def locked_task(
    func: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    schedule: str | None = None,
    every: timedelta | float | None = None,
    scope: Scope = "auto",
    wait: float = 0,
    max_runtime: float | None = None,
    on_locked: OnLocked = "skip",
    key: KeyMode = "sha256",
    using: str | None = None,
    catch_up: CatchUp | None = None,
    max_lateness: float | timedelta | None = None,
    late_after: float | timedelta | None = None,
    jitter: float | timedelta | None = None,
    timezone: str | None = None,
    timeout: float | None = None,
    deliver: str | None = None,
    at_most_once: bool = False,
    retries: int = 0,
    retry_backoff: float = 1.0,
    retry_backoff_max: float = 300.0,
    retry_on: type[BaseException] | tuple[type[BaseException], ...] = Exception,
    capture: bool | Sequence[str] = False,
    at: datetime | str | None = None,
    max_runs: int | None = None,
    overlap: str = "skip",
    max_concurrent: int | None = None,
    per_tenant: bool | Sequence[str] = False,
    calendar: str | None = None,
) -> Job[P, R] | Callable[[Callable[P, R]], Job[P, R]]:
    """Register a function as a job that runs once across all replicas.

    ``name`` defaults to the function's ``__name__``. ``schedule`` is a cron expression; with
    one, a run also records its tick and a tick runs at most once. ``every`` (a ``timedelta``
    or a number of seconds) is an interval schedule instead, ticking at whole multiples of it
    since the Unix epoch; it excludes ``schedule``. ``scope`` is ``"session"``,
    ``"transaction"`` or ``"auto"``; ``wait`` seconds are spent waiting for the lock;
    ``max_runtime`` (seconds) marks a lock held longer as stale; ``on_locked="raise"`` raises
    ``LockNotAcquired`` instead of returning ``SKIPPED``; ``key="hashtext"`` shares
    the lock with SQL that calls ``pg_try_advisory_lock(hashtext(name))``. ``timeout``
    (seconds) stops a run that goes on longer and records it ``timed_out``: ``runlocked``
    enforces it, and ``cronworker`` runs such a job in a process of its own to do so.
    ``deliver="tasks"`` (or ``"tasks:<backend alias>"``) makes the schedulers enqueue each
    tick to Django's Tasks framework instead of running it in place (see the Tasks page of
    the docs). ``at_most_once=True`` keeps a tick taken once its body started, whatever
    happened to the run: an interrupted run (a stop signal, ``kill -9``) does not give its tick
    back to be run again (for jobs that must not run twice, even half); it needs a session
    lock. ``retries=N`` calls the function again, up to N more times, when it raises one of
    ``retry_on`` (default any ``Exception``): in the same run and under the same lock, after
    ``retry_backoff`` seconds doubled for each attempt (with jitter, at most
    ``retry_backoff_max``), never past the job's next tick or its ``max_lateness``.
    ``capture=True`` keeps what the function's module logger emits during a run with the run
    (``capture=["name", ...]``: those loggers too), at most ``CAPTURE_LIMIT`` characters.
    ``per_tenant=True`` (with django-tenants) runs each tick once for every tenant schema,
    inside that schema, recorded as ``name@schema`` (``per_tenant=["acme"]``: for those
    schemas only).

    For ``cronworker`` and django-q2: ``catch_up`` (``"latest"``, ``"all"`` or ``"none"``;
    default the ``CATCH_UP`` setting) decides which ticks missed while nothing was running
    are run, and ``max_lateness`` (seconds or a ``timedelta``) passes over any tick more than
    that late. ``late_after`` (seconds or a ``timedelta``) is a target, not a limit: a job whose
    last run started more than that after its tick (or whose due tick has waited longer) is
    *late* in ``cronstatus``, ``health/`` and the Jobs page, before it is overdue; nothing is
    skipped for it. ``jitter`` (seconds or a ``timedelta``, below the shortest interval
    between two ticks) starts each tick up to that much after it, at an offset every replica
    computes alike from the job's name and the tick. ``timezone`` (an IANA name; default
    ``TIME_ZONE``) is the zone a cron ``schedule`` is evaluated in. ``at`` (an aware
    date-time, or a naive one or ``"2026-12-24 18:00"`` read in ``timezone``) is a one-off
    instead: a single tick, after which the schedule is done. ``max_runs=N`` ends the schedule
    after N runs of its ticks. ``overlap`` says what a tick that comes while a run is going
    does: ``"skip"`` (the default) skips it; ``"buffer_one"`` keeps it waiting and starts it
    as soon as that run ends (one waits, later ones skip); ``"buffer_all"`` keeps every such
    tick waiting and runs them in turn, oldest first (at most 20 wait);
    ``"allow_all"`` runs it beside the others, up to ``max_concurrent`` runs at once (default
    2, at most 32), each tick still once; ``"cancel_other"`` asks the run going to stop (a
    body in its process's main thread gets SIGTERM, one in a thread a ``RunCancelled`` at its
    next query), waits up to 5 s for it to end, then runs; ``"terminate_other"`` stops the run
    going at once, then runs. ``calendar`` (``"business:FR"``, ``"holidays:DE-BY"``,
    ``"last:market:NYSE"``: see the scheduling docs) skips the ticks on a business calendar's
    days, or keeps only those. Bad values raise ``ValueError`` here, naming the job.
    """
    check_scope(scope)
    if on_locked not in ("skip", "raise"):
        raise ValueError(f"on_locked must be 'skip' or 'raise', not {on_locked!r}")
    if key not in KEY_MODES:
        raise ValueError(f"key must be one of {KEY_MODES}, not {key!r}")
    if wait < 0 or (max_runtime is not None and max_runtime <= 0):
        raise ValueError("wait must be >= 0 and max_runtime > 0 seconds")
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not 0 < timeout < math.inf
    ):
        raise ValueError(f"timeout must be a finite number of seconds > 0, not {timeout!r}")
    if not isinstance(capture, bool) and (
        isinstance(capture, str) or not all(isinstance(name, str) for name in capture)
    ):
        raise ValueError(f"capture must be True, False or a list of logger names, not {capture!r}")
    problem = policy_problem(retries, retry_backoff, retry_backoff_max, retry_on)
    if problem:
        raise ValueError(problem)
    if at_most_once and scope == "transaction":
        raise ValueError(
            "at_most_once needs a session lock: in transaction scope a killed run's row rolls "
            "back with its transaction, and nothing would keep its tick taken"
        )
    if deliver is not None:
        if not isinstance(deliver, str):
            raise ValueError(f"deliver must be a string such as 'tasks', not {deliver!r}")
        parse_deliver(deliver)

    def decorate(function: Callable[P, R]) -> Job[P, R]:
        job_name = name or function.__name__
        if len(job_name) > MAX_JOB_NAME:
            raise ValueError(
                f"job name {job_name[:40]!r}... is {len(job_name)} characters long; the run "
                f"history stores at most {MAX_JOB_NAME}"
            )
        if schedule is not None and every is not None:
            # Refused here, as a schedule that never fires is: the traceback points at it.
            raise InvalidSchedule(f"@locked_task {job_name!r}: {both_problem(schedule, every)}")
        if at is not None and (schedule is not None or every is not None):
            raise InvalidSchedule(f"@locked_task {job_name!r}: {ONE_KIND}")
        try:
            moment = None if at is None else read_moment(at, timezone)
            runs = max_runs_value(max_runs)
            days = code_calendar(calendar)
        except ValueError as error:
            raise ValueError(f"@locked_task {job_name!r}: {error}") from None
        try:
            interval = None if every is None else as_interval(every)
        except InvalidSchedule as error:
            raise InvalidSchedule(f"@locked_task {job_name!r}: {error}") from None
        problem = never_fires_problem(schedule)
        if problem:
            raise NeverFires(f"@locked_task {job_name!r}: {problem}")
        for problem in (
            catch_up_problem(catch_up),
            max_lateness_problem(max_lateness),
            code_seconds_problem("late_after", late_after),
            timezone_problem(timezone, cron=schedule, every=every, at=at),
            None if timezone is None else zone_problem(timezone),
        ):
            if problem:
                raise ValueError(f"@locked_task {job_name!r}: {problem}")
        try:
            tenants = per_tenant_value(per_tenant)
            problem = tenants_problem(tenants, deliver, timeout)
            if problem:
                raise ValueError(problem)
            spread = jitter_seconds(jitter, spread_over(schedule, interval, timezone, jitter))
            policy, concurrent = overlap_policy(overlap), concurrent_runs(max_concurrent)
            combination = combination_problem(policy, concurrent)
            if combination:
                raise ValueError(combination)
        except ValueError as error:
            raise ValueError(f"@locked_task {job_name!r}: {error}") from None
        job = Job(
            func=function,
            name=job_name,
            cron=schedule,
            every=interval,
            scope=scope,
            wait=wait,
            max_runtime=max_runtime,
            on_locked=on_locked,
            key_mode=key,
            using=using,
            catch_up=catch_up,
            max_lateness=(
                max_lateness.total_seconds()
                if isinstance(max_lateness, timedelta)
                else max_lateness
            ),
            late_after=code_seconds("late_after", late_after),
            jitter=spread,
            timezone=timezone,
            at=moment,
            max_runs=runs,
            calendar=days,
            timeout=timeout,
            deliver=deliver,
            at_most_once=bool(at_most_once),
            retry=RetryPolicy(
                retries,
                float(retry_backoff),
                float(retry_backoff_max),
                retry_on if isinstance(retry_on, tuple) else (retry_on,),
            )
            if retries
            else None,
            capture=None
            if capture is False
            else (function.__module__, *([] if capture is True else capture)),
            overlap=policy,
            max_concurrent=concurrent,
            per_tenant=tenants,
        )
        registry.register(job)
        return job

    return decorate(func) if func is not None else decorate
