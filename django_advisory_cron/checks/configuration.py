"""System checks: settings, the lock database, job names, keys and schedules."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from django.apps import apps as django_apps
from django.conf import settings
from django.core import checks
from django.db import DatabaseError

from .. import conf
from ..conf import CHECK_TAG, app_settings, check_id
from ..core import calendars
from ..core.schedule import validate, zone_problem
from ..core.schedule_rules import never_fires_problem, timezone_problem
from ..db import sql
from ..db.connections import WARM_POOL_SIZE, unpooled_connection
from ..db.execute import fetch_one
from ..exceptions import AdvisoryCronError, InvalidSchedule
from ..jobs import declared
from ..jobs.job import MAX_JOB_NAME, registry
from ..jobs.option_values import calendar_package_problem
from ..jobs.options import CHECKS
from ..ops import monitoring
from . import pooling as pooler_checks
from .capture import check_captured_loggers


def register() -> None:
    """Register the checks (called from ``AppConfig.ready``)."""
    checks.register(check_settings, CHECK_TAG)
    # Reads settings only: untagged, so Django 6.1 (which runs 'database'-tagged checks
    # only with --database) still warns on a plain 'check'.
    checks.register(check_lock_database, CHECK_TAG)
    checks.register(check_jobs, CHECK_TAG)
    checks.register(check_schedules, CHECK_TAG)
    checks.register(check_monitoring, CHECK_TAG)
    checks.register(check_captured_loggers, CHECK_TAG)
    checks.register(check_connection_footprint, CHECK_TAG, checks.Tags.database)
    pooler_checks.register()
    if django_apps.is_installed("django_q"):
        from ..contrib.django_q import register_checks

        register_checks()


def check_settings(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    return [
        checks.Error(
            f"ADVISORY_CRON[{problem.key!r}] {problem.message}"
            if problem.key != "ADVISORY_CRON"
            else f"ADVISORY_CRON {problem.message}",
            hint="See the settings reference in the django-advisory-cron docs.",
            id=check_id(problem.check_id),
        )
        for problem in conf.problems()
    ]


def check_lock_database(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    alias = app_settings.lock_database
    if alias not in settings.DATABASES:
        return []  # reported by check_settings
    engine = settings.DATABASES[alias].get("ENGINE", "")
    if "postgresql" in engine or "postgis" in engine:
        return []
    # A warning, not an error: a project that tests or develops on SQLite keeps its migrate,
    # runserver and test; the app's own commands refuse to run there in one line.
    return [
        checks.Warning(
            f"The lock database {alias!r} uses {engine!r}; advisory locks need PostgreSQL: "
            "the jobs and this app's commands refuse to run on it.",
            hint="Point ADVISORY_CRON['LOCK_DATABASE'] at a PostgreSQL alias where jobs run; "
            "settings that use SQLite on purpose (tests, development) may list "
            "'django_advisory_cron.W002' in SILENCED_SYSTEM_CHECKS.",
            id=check_id("W002"),
        )
    ]


def check_jobs(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = [
        checks.Error(
            f"The jobs module {module} was not fully loaded: {reason}.",
            hint="Fix that declaration; the jobs declared after it in that module are not "
            "registered until then.",
            id=check_id("E008"),
        )
        for module, reason in registry.refused
    ]
    for first, second in registry.clashes:
        errors.append(
            checks.Error(
                f"Two jobs are named {first.name!r}: {first.origin} and {second.origin}.",
                hint="Give one of them another name=... in @locked_task.",
                id=check_id("E003"),
            )
        )
    by_key: defaultdict[object, list[str]] = defaultdict(list)
    for job in registry.all():
        # hashtext keys are only known to the server; distinct names are assumed distinct.
        by_key[job.key.lock_ids or ("hashtext", job.name)].append(job.name)
    for names in by_key.values():
        if len(names) > 1:
            errors.append(
                checks.Error(
                    f"Jobs {', '.join(map(repr, names))} hash to the same advisory lock key.",
                    hint="Rename one of them; the key is derived from the job name.",
                    id=check_id("E004"),
                )
            )
    for job in registry.all():
        if len(job.name) > MAX_JOB_NAME:
            errors.append(
                checks.Error(
                    f"Job name {job.name[:40]!r}... is {len(job.name)} characters long; the run "
                    f"history stores at most {MAX_JOB_NAME}.",
                    hint="Give the job a shorter name=... in @locked_task.",
                    id=check_id("E006"),
                )
            )
    for job in registry.all():
        never = never_fires_problem(job.cron)
        if never:
            # @locked_task refuses these; a job registered without it (or changed since) is
            # found here rather than by a worker that cannot compute its next tick.
            errors.append(
                checks.Error(
                    f"Job {job.name!r}: {never}.",
                    hint=None
                    if job.cron == "@reboot"
                    else "Day 31 exists in January, March, May, July, August, October and "
                    "December, 30 in every month but February, 29 February in leap years.",
                    id=check_id("E007"),
                )
            )
            continue
        problem = validate(job.cron) if job.cron is not None else None
        if problem:
            errors.append(
                checks.Error(
                    f"Job {job.name!r} has an invalid schedule: {problem}",
                    hint="Use a five-field cron expression such as '0 2 * * *' (or six, "
                    "with the second last: '0 2 * * * 30').",
                    id=check_id("E005"),
                )
            )
    errors.extend(_option_errors())
    return errors


#: The check id of each kind of problem an entry of ``ADVISORY_CRON["SCHEDULES"]`` can have,
#: and its hint.
SCHEDULE_CHECKS = {
    "shape": (
        "E171",
        "Write django-crontab's (cron, job, args, kwargs) tuple, or a dict with the keys of the "
        "SCHEDULES settings reference.",
    ),
    "name": ("E172", "Give the entry a name of its own (the dict form's 'name')."),
    "target": (
        "E173",
        "Name a job registered with @locked_task (or the dotted path of its function), or a "
        "management command as ('CRON', 'django.core.management.call_command', ['COMMAND', "
        "...]), with arguments it takes.",
    ),
    "schedule": (
        "E174",
        "Use a five-field cron expression such as '0 2 * * *' (or six, with the second last) "
        "or 'every' N seconds, and an IANA time zone name for a cron expression.",
    ),
    "options": ("E175", "See ADVISORY_CRON['SCHEDULES'] in the settings reference."),
}


def check_schedules(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """E171-E175: an entry of ``ADVISORY_CRON["SCHEDULES"]`` refused at start-up, by kind of
    problem; it is not registered."""
    errors: list[checks.CheckMessage] = []
    for entry in declared.refused:
        for kind, lines in entry.problems.items():
            code, hint = SCHEDULE_CHECKS[kind]
            errors.extend(
                checks.Error(f"{entry.label}: {line}.", hint=hint, id=check_id(code))
                for line in lines
            )
    return errors


def _option_errors() -> list[checks.CheckMessage]:
    """E020-E027, E031: job options that ``@locked_task`` refuses, on jobs registered without
    it (or changed since); E032: a calendar that needs the missing ``holidays`` package."""
    errors: list[checks.CheckMessage] = []
    for job in registry.all():
        found = [
            (
                "E020",
                None if job.timezone is None else zone_problem(job.timezone),
                "Use an IANA name such as 'Europe/Berlin', or remove timezone= to use TIME_ZONE.",
            ),
            *((check.id, check.problem(job), check.hint) for check in CHECKS),
            ("E032", calendar_package_problem(job), f"Install it: {calendars.INSTALL}."),
            (
                "E023",
                timezone_problem(job.timezone, cron=job.cron, every=job.every, at=job.at),
                "Remove timezone=, or give the job a cron schedule=.",
            ),
        ]
        errors.extend(
            checks.Error(f"Job {job.name!r}: {problem}.", hint=hint, id=check_id(code))
            for code, problem, hint in found
            if problem
        )
    return errors


def check_monitoring(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """W040/W041: an integration is enabled but its package is missing; W042: a job Sentry
    Crons cannot monitor; W043: ``PING_URL`` names a job that is not registered; W044:
    failure notices mail an empty ``ADMINS``."""
    found: list[checks.CheckMessage] = []
    extras = {"sentry_sdk": ("W040", "sentry"), "opentelemetry": ("W041", "otel")}
    for setting, _module, _name, package in monitoring.INTEGRATIONS:
        if package is None or not monitoring.missing_package(package):
            continue
        if getattr(app_settings, setting):
            code, extra = extras[package]
            found.append(
                checks.Warning(
                    f"ADVISORY_CRON['{setting}'] is on, but the {package} package is not "
                    "installed: nothing is reported.",
                    hint=f"pip install 'django-advisory-cron[{extra}]', or turn {setting} off.",
                    id=check_id(code),
                )
            )
    if app_settings.SENTRY_CRONS and not monitoring.missing_package("sentry_sdk"):
        from ..contrib.sentry import sentry_schedule

        for job in registry.all():
            try:
                scheduled = job.schedule is not None
            except InvalidSchedule:
                continue  # E005
            if scheduled and sentry_schedule(job) is None:
                found.append(
                    checks.Warning(
                        f"Job {job.name!r} ({job.schedule_text}) has a schedule Sentry Crons "
                        "cannot express: its runs send no check-ins.",
                        hint="Sentry monitors need a five-field cron expression or an interval "
                        "of whole minutes.",
                        id=check_id("W042"),
                    )
                )
    pings = app_settings.PING_URL
    if isinstance(pings, dict):
        for name in sorted(set(pings) - {job.name for job in registry.all()}):
            found.append(
                checks.Warning(
                    f"ADVISORY_CRON['PING_URL'] has a URL for {name!r}, which no job defined "
                    "in code or in ADVISORY_CRON['SCHEDULES'] has: it is pinged only if a "
                    "schedule of that name is kept in the database.",
                    hint="Use the job's name as manage.py cronjob list shows it; for a schedule "
                    "kept in the database, add this check's id to SILENCED_SYSTEM_CHECKS.",
                    id=check_id("W043"),
                )
            )
    notices = app_settings.FAILURE_NOTICES
    if notices is not None and notices.mail_admins and not settings.ADMINS:
        found.append(
            checks.Warning(
                "ADVISORY_CRON['FAILURE_NOTICES'] mails the ADMINS, but ADMINS is empty: "
                "failure notices go nowhere by mail.",
                hint="Set ADMINS (and the EMAIL_* settings), or use a webhook.",
                id=check_id("W044"),
            )
        )
    return found


#: psycopg_pool's default size when ``OPTIONS["pool"]`` is ``True``.
DJANGO_POOL_DEFAULT = 4


def lock_pool_size() -> int:
    """The idle lock connections a scheduler process keeps per alias."""
    size = app_settings.LOCK_POOL_SIZE
    return WARM_POOL_SIZE if size is None else size


def kept_connections(alias: str) -> int:
    """Server connections one idle scheduler process keeps open to ``alias``: its idle lock
    connections, plus Django's pool (its ``max_size``) or Django's own connection."""
    pool = settings.DATABASES[alias].get("OPTIONS", {}).get("pool")
    if isinstance(pool, dict):
        django_side = int(pool.get("max_size") or pool.get("min_size") or DJANGO_POOL_DEFAULT)
    else:
        django_side = DJANGO_POOL_DEFAULT if pool else 1
    return lock_pool_size() + django_side


def check_connection_footprint(
    app_configs: Sequence[Any] | None = None,
    databases: Sequence[str] | None = None,
    **kwargs: Any,
) -> list[checks.CheckMessage]:
    """W035 (live, ``--database``): one process's kept connections would use up the server's
    ``max_connections`` on their own, so a second replica cannot connect at all."""
    alias = app_settings.lock_database
    if not databases or alias not in databases or conf.problems():
        return []
    if "postgres" not in str(settings.DATABASES[alias].get("ENGINE", "")):
        return []  # W002
    connection = unpooled_connection(alias)
    try:
        row = fetch_one(connection, sql.usable_connections())
    except (DatabaseError, AdvisoryCronError):
        return []  # unreachable: W011 and the database checks say so
    finally:
        connection.close()
    usable = int(row[0]) if row else 0
    kept = kept_connections(alias)
    if kept < usable:
        return []
    return [
        checks.Warning(
            f"One process keeps up to {kept} connections to database {alias!r} "
            f"({lock_pool_size()} idle lock connections, LOCK_POOL_SIZE, plus "
            f"Django's), but the server allows ordinary roles only {usable}: a single replica "
            "could exhaust it.",
            hint="Lower ADVISORY_CRON['LOCK_POOL_SIZE'] (or Django's pool size), or raise "
            "max_connections; see the connection footprint in the performance docs.",
            id=check_id("W035"),
        )
    ]
