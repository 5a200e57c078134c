"""How each of a schedule's options is read and judged: the one conversion that checks a
value and builds what the job holds, and why a job defined in code is refused (its system
check). The options' table ([options][django_advisory_cron.jobs.options]) names them."""

from __future__ import annotations

import re
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol, TypeAlias

from ..conf import CATCH_UP_CHOICES, CatchUp
from ..core import calendars
from ..core.jitter import jitter_problem
from ..core.moments import UTC
from ..core.once import read_moment
from ..core.overlap import (
    combination_problem,
    concurrent_runs,
    overlap_policy,
)
from ..core.schedule import EPOCH
from ..core.schedule_rules import seconds_of
from ..delivery import targets
from ..exceptions import InvalidSchedule

if TYPE_CHECKING:
    from ..core.retries import RetryPolicy
    from ..core.schedule import Schedule


#: The longest of a schedule's durations (interval, timeout, max lateness, lateness target,
#: retry back-off): a year's, so that every tick, deadline and timer the job computes from it
#: is in range.
MAX_DURATION = timedelta(days=366)
#: The first and last times a schedule may start or end at (its ticks are counted from them,
#: and a time near the years 1 or 9999 leaves no room to count); every reader holds them: a
#: date-time in any zone, ``timestamptz``, ISO 8601 text.
EARLIEST = EPOCH
LATEST = datetime(9999, 1, 1, tzinfo=UTC)
#: The most runs a schedule limited by ``max_runs`` has (the column is a PostgreSQL integer).
MAX_RUNS = 2**31 - 1
#: Which tenants a job runs for: not per tenant (``False``), every tenant schema (``True``),
#: or those schemas.
Tenants: TypeAlias = "bool | tuple[str, ...]"
#: What a schedule's ``per_tenant`` stores for every tenant schema (else the schemas, joined
#: by commas; empty: as its job does).
EVERY_TENANT = "*"
#: The bytes of the longest schema name PostgreSQL keeps whole (``NAMEDATALEN`` - 1).
MAX_SCHEMA = 63
#: What a schema named in ``per_tenant`` cannot hold: what django-tenants refuses in a schema
#: name, and the comma that separates the names.
_NOT_IN_SCHEMA = re.compile("[\"'\\\\;,\x00\r\n]")


class Shown(Protocol):
    """What ``cronjob list --json`` shows of a job, read by the options' ``shown`` (a job has
    it: this module is imported by the job's, not the other way round)."""

    @property
    def enabled(self) -> bool: ...
    @property
    def deliver(self) -> str | None: ...
    @property
    def capture(self) -> tuple[str, ...] | None: ...
    @property
    def retry(self) -> RetryPolicy | None: ...
    @property
    def jitter(self) -> float | None: ...
    @property
    def overlap(self) -> str: ...
    @property
    def slots(self) -> int: ...
    @property
    def calendar(self) -> str | None: ...
    @property
    def per_tenant(self) -> Tenants: ...
    @property
    def tenant(self) -> str | None: ...


class Checked(Shown, Protocol):
    """What the system checks read of a job defined in code, by the options' ``check``."""

    @property
    def catch_up(self) -> object: ...
    @property
    def max_lateness(self) -> object: ...
    @property
    def late_after(self) -> object: ...
    @property
    def schedule(self) -> Schedule | None: ...
    @property
    def max_runs(self) -> object: ...
    @property
    def max_concurrent(self) -> object: ...


def catch_up_problem(catch_up: object) -> str | None:
    """Why ``catch_up`` is not a catch-up policy, or ``None``."""
    if catch_up is None or (isinstance(catch_up, str) and catch_up in CATCH_UP_CHOICES):
        return None
    choices = ", ".join(map(repr, CATCH_UP_CHOICES))
    return f"catch_up must be one of {choices} (or None for the CATCH_UP setting), not {catch_up!r}"


def max_lateness_problem(max_lateness: object) -> str | None:
    """Why ``max_lateness`` is not a positive number of seconds or ``timedelta``, or ``None``."""
    if max_lateness is None:
        return None
    seconds = seconds_of(max_lateness)
    if seconds is None:
        return f"max_lateness must be seconds or a timedelta, not {max_lateness!r}"
    if not seconds > 0:  # also refuses NaN
        return f"max_lateness must be positive, not {max_lateness!r}"
    return None


def overlap_problem(job: Checked) -> str | None:
    """Why ``job``'s overlap policy or its ``max_concurrent`` is refused, or ``None``."""
    try:
        policy = overlap_policy(job.overlap)
        concurrent = concurrent_runs(job.max_concurrent)
    except ValueError as error:
        return str(error)
    return combination_problem(policy, concurrent)


def spread_problem(job: Checked) -> str | None:
    """Why ``job``'s jitter cannot spread its ticks (a bad schedule is E005's business)."""
    try:
        return jitter_problem(job.jitter, job.schedule)
    except InvalidSchedule:
        return None


def catch_up_policy(value: str) -> CatchUp | None:
    """The catch-up policy ``value`` names (``""``: the ``CATCH_UP`` setting's). Raises
    ``ValueError`` for another."""
    if not value:
        return None
    for choice in CATCH_UP_CHOICES:
        if value == choice:
            return choice
    raise ValueError(f"catch-up must be one of {', '.join(CATCH_UP_CHOICES)}, not {value!r}")


def kind_of(value: object) -> str:
    """``value`` as a refusal names it: a text as itself, anything else by its type."""
    return type(value).__name__ if not isinstance(value, str) else repr(value)


def delivery(value: str) -> str | None:
    """Where its ticks are delivered (``""``: run in place). Raises ``ValueError`` for a
    target no delivery registered."""
    if value:
        targets.parse(value)
    return value or None


def one_off(value: object) -> datetime | None:
    """A one-off's moment (``None``: none): an aware date-time, or a naive one or its text in
    ``TIME_ZONE`` (a schedule read in another zone was read in it where it was typed). Raises
    ``ValueError`` in one line for what is no moment, or one out of range."""
    return None if value is None else read_moment(value)


def max_runs(value: object) -> int | None:
    """How many runs a schedule has before it ends (``None``: no end). Raises ``ValueError``
    for what is no whole number from 1."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_RUNS:
        raise ValueError(f"max_runs must be a whole number from 1 to {MAX_RUNS}, not {value!r}")
    return value


def max_runs_problem(job: Checked) -> str | None:
    """Why ``job``'s ``max_runs`` is refused, or ``None``."""
    try:
        max_runs(job.max_runs)
    except ValueError as error:
        return str(error)
    return None


def calendar(value: object) -> str | None:
    """A business calendar (``None``: none), spelled as ``core.calendars`` says, normalised.
    Raises ``ValueError`` in one line for a bad one, and for one that needs the ``holidays``
    package where it is not installed."""
    if value is None or value == "":
        return None
    return calendars.parse(value).text


def code_calendar(value: object) -> str | None:
    """``calendar`` for a value code gives: one that needs the missing ``holidays`` package is
    kept as spelled (its grammar checked), for the system check to say so (E032) instead of
    the import failing."""
    try:
        return calendar(value)
    except calendars.MissingPackage:
        return calendars.parse(value, known=False).text


def calendar_problem(job: Checked) -> str | None:
    """Why ``job``'s calendar is refused (E031), or ``None``; a missing package is E032's."""
    if job.calendar is None:
        return None
    try:
        calendars.parse(job.calendar)
    except calendars.MissingPackage:
        return None
    except ValueError as error:
        return str(error)
    return None


def calendar_package_problem(job: Checked) -> str | None:
    """Why ``job``'s calendar cannot be read here: the ``holidays`` package is missing (E032)."""
    if job.calendar is None:
        return None
    try:
        calendars.parse(job.calendar)
    except calendars.MissingPackage as error:
        return str(error)
    except ValueError:
        return None
    return None


def per_tenant(value: object) -> Tenants:
    """Which tenants a job runs for, from what code gives (``True``, ``False``, schema names)
    or a schedule stores (``""``, ``"*"``, ``"acme,globex"``): ``False``, ``True`` (every
    tenant schema) or the schemas, sorted. Raises ``ValueError``, in one line, for a name no
    tenant schema can have."""
    if value is None or value is False or value == "":
        return False
    if value is True or value == EVERY_TENANT:
        return True
    names = value.split(",") if isinstance(value, str) else value
    if not isinstance(names, Collection) or isinstance(names, (bytes, dict)) or not names:
        raise ValueError(
            f"per_tenant must be True ('{EVERY_TENANT}': every tenant) or tenant schema names, "
            f"not {kind_of(value)}"
        )
    schemas = set()
    for name in names:
        if not isinstance(name, str):
            raise ValueError(f"per_tenant names tenant schemas, not {kind_of(name)}")
        schema = name.strip()
        if not schema or schema == EVERY_TENANT:
            raise ValueError(
                f"per_tenant is '{EVERY_TENANT}' (every tenant) or schema names separated by "
                f"commas, not {value!r}"
            )
        if (
            len(schema.encode(errors="surrogatepass")) > MAX_SCHEMA
            or schema.lower().startswith("pg_")
            or _NOT_IN_SCHEMA.search(schema)
        ):
            raise ValueError(
                f"per_tenant: {schema[:MAX_SCHEMA]!r} is no tenant schema's name (1 to "
                f"{MAX_SCHEMA} bytes, not starting with pg_, without quotes, backslashes, "
                "semicolons or commas)"
            )
        schemas.add(schema)
    return tuple(sorted(schemas))


def tenants_problem(tenants: Tenants, deliver: object, timeout: object) -> str | None:
    """Why a job cannot run for ``tenants`` with this delivery and timeout, or ``None``: its
    tenants' runs go to the worker's threads, one run per tenant schema."""
    if tenants and (deliver or timeout is not None):
        return (
            "per_tenant runs in the worker's threads, one run per tenant schema: remove the "
            "delivery (deliver) and the timeout"
        )
    return None


def shown_tenants(job: Shown) -> bool | list[str]:
    """How ``cronjob list --json`` shows which tenants a job runs for: a per-tenant job is
    listed tenant by tenant (``name@schema``), each showing its own."""
    if job.tenant is not None:
        return [job.tenant]
    return job.per_tenant if isinstance(job.per_tenant, bool) else list(job.per_tenant)
