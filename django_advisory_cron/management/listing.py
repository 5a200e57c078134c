"""What ``cronjob list`` and ``cronjob history`` print: the jobs and a job's last runs, as a
table for people (times to the second in ``TIME_ZONE``) or as one JSON document for scripts.
The jobs' states come from the query the Jobs page and ``cronstatus`` make."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.core.management.base import CommandError
from django.utils import timezone

from ..db.execute import database_now
from ..exceptions import InvalidSchedule, first_line
from ..exitcodes import USAGE
from ..jobs import calendars
from ..jobs.catalog import Catalog
from ..jobs.definitions import one_line
from ..jobs.job import Job
from ..jobs.options import OPTIONS
from ..jobs.versions import ran_under, version
from ..jobs.versions import versions as schedule_versions
from ..models import JobRun, JobState
from ..ops import upcoming
from ..ops.charts import human_duration
from ..ops.status import JobStatus, job_statuses
from ..worker.fleet import live_workers

#: The options ``--json`` shows of a job as it runs (a database schedule's own, or its job's;
#: ``at_most_once`` is among the status's facts).
_SHOWN = {option.name: option.shown for option in OPTIONS if option.shown is not None}
#: What an override can change, as ``cronjob list`` says it.
_OVERRIDE_WORDS = {"cron": "schedule", "every": "schedule", "timezone": "schedule"}


def job_list(found: Catalog, alias: str, as_json: bool) -> list[str]:
    """The jobs' states, next ticks and last runs; then the database schedules that cannot
    run."""
    statuses = job_statuses(now=database_now(alias), using=alias)
    workers = len(live_workers(alias))
    if as_json:
        jobs = [
            {
                **status.as_dict(),
                "source": status.job.source,
                "overridden": list(status.job.overridden),
                **{name: shown(status.job) for name, shown in _SHOWN.items()},
            }
            for status in statuses
        ]
        document = {"jobs": jobs, "cronworkers": workers, "cannot_run": found.broken}
        return [json.dumps(document, indent=2)]
    lines = []
    if statuses:
        zone = timezone.get_current_timezone_name()
        header = [
            "JOB",
            "SOURCE",
            "SCHEDULE",
            f"NEXT TICK ({zone})",
            "LAST RUN",
            "DELIVER",
            "STATE",
        ]
        lines += table([header, *(_listed(status, found) for status in statuses)])
    else:
        lines.append("No jobs are registered.")
    lines += [
        f"{one_line(name)}: a database schedule that cannot run: {why} (manage.py cronjob "
        f"edit {one_line(name)}, or remove it)"
        for name, why in sorted(found.broken.items())
    ]
    if statuses:
        lines.append(f"{workers} cronworker(s) connected")
    return lines


def history(
    job: Job[Any, Any], alias: str, limit: int, as_json: bool, with_output: bool = False
) -> list[str]:
    """``job``'s last ``limit`` runs, newest first (skips included); ``with_output``: each
    run's captured output under it, indented."""
    runs = list(JobRun.objects.using(alias).filter(job=job.name)[:limit])
    if as_json:
        under = ran_under(alias, [(run.job, run.started) for run in runs])
        facts = [
            {**_run_facts(run, job), "schedule_version": under.get((run.job, run.started))}
            for run in runs
        ]
        return [json.dumps(facts, indent=2)]
    if not runs:
        return [f"{job.name}: no runs recorded"]
    header, *rows = _history_table(runs, job)
    if not with_output:
        return [header, *rows]
    lines = [header]
    for row, run in zip(rows, runs, strict=True):
        lines.append(row)
        lines.extend(f"    {line}" for line in (run.output or "(no output)").splitlines())
    return lines


def versions(alias: str, name: str, as_json: bool) -> list[str]:
    """The versions of the schedule ``name``, newest first, a line each (see
    [versions][django_advisory_cron.jobs.versions])."""
    kept = schedule_versions(alias, name)
    if not kept:
        version(alias, name, 1)  # says there are none, and what to do
    if as_json:
        return [json.dumps({"name": name, "versions": [v.as_json() for v in kept]}, indent=2)]
    zone = timezone.get_current_timezone_name()
    rows = [["VERSION", f"RECORDED ({zone})", "BY", "NOTE", "CHANGES"]]
    rows += [
        [str(v.number), _time(v.recorded), v.changed_by, " ".join(v.note.split()) or "-", v.summary]
        for v in kept
    ]
    return table(rows)


def next_ticks(job: Job[Any, Any], alias: str, count: int, as_json: bool) -> list[str]:
    """``job``'s next ``count`` ticks from the database's clock (see
    [upcoming][django_advisory_cron.ops.upcoming]); a job with no schedule is a usage error."""
    try:
        schedule = job.schedule
    except InvalidSchedule as error:
        raise CommandError(f"job {job.name!r}: {first_line(error)}", returncode=USAGE) from error
    if schedule is None:
        raise CommandError(
            f"job {job.name!r} has no schedule: it runs when called (runlocked, cronjob trigger)",
            returncode=USAGE,
        )
    state = JobState.objects.using(alias).filter(job=job.name).first()
    ticks = upcoming.next_ticks(
        schedule, database_now(alias), count, state, calendar=calendar_of(job, alias)
    )
    zone = upcoming.zone_of(schedule)
    if as_json:
        document = {
            "job": job.name,
            "schedule": job.schedule_text,
            "zone": zone,
            "ticks": [tick.as_dict() for tick in ticks],
        }
        return [json.dumps(document, indent=2)]
    rows = [[f"TICK ({zone})", "UTC OFFSET", "NOTE"]]
    rows += [[tick.when, tick.offset, tick.note] for tick in ticks]
    on = f" (calendar {job.calendar})" if job.calendar else ""
    return [f"{job.name}: {job.schedule_text}{on}", *table(rows)]


def calendar_of(job: Job[Any, Any], alias: str) -> upcoming.OffCalendar | None:
    """Which of some ticks ``job``'s business calendar skips, and why (``None``: none)."""
    if not job.calendar:
        return None
    return lambda ticks: calendars.reasons(job, ticks, alias)


def _history_table(runs: list[JobRun], job: Job[Any, Any]) -> list[str]:
    """The runs of ``job``, a row each; for a job with a jitter, each tick's offset after
    STARTED."""
    jitter = job.jitter
    zone = timezone.get_current_timezone_name()
    offsets = ["OFFSET"] if jitter else []
    header = ["RUN", f"STARTED ({zone})", *offsets, "DURATION", "STATUS", "HOST", "PID", "ERROR"]
    return table(
        [
            header,
            *(
                [
                    str(run.pk),
                    _time(run.started),
                    *([_offset_text(run, job)] if jitter else []),
                    "-" if run.duration is None else human_duration(run.duration),
                    " ".join(filter(None, [run.status, run.attempts_note]))
                    + (" (manual)" if run.manual else "")
                    + (" (backfill)" if run.backfill else ""),
                    run.host,
                    str(run.pid),
                    _error_line(run.run_error),
                ]
                for run in runs
            ),
        ]
    )


def table(rows: list[list[str]]) -> list[str]:
    """``rows`` as columns two spaces apart, the last one as it is."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)]
    return [
        "  ".join(
            [*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[-1]]
        ).rstrip()
        for row in rows
    ]


def _listed(status: JobStatus, found: Catalog) -> list[str]:
    """One row of ``cronjob list``."""
    job = status.job
    said = [] if job.enabled else ["disabled"]
    if status.paused:
        said.append(status.paused)
    requested = status.run_requested
    if requested is not None:
        by = status.state.run_requested_by if status.state is not None else ""
        said.append(f"run requested{f' by {by}' if by else ''} at {_time(requested)}")
    if status.late:
        said.append(f"LATE: {status.lateness_note}")
    if status.done:
        said.append(status.done)
    last = status.last_run
    return [
        status.name,
        _source(job, found),
        job.schedule_text or "(no schedule)",
        "-" if status.next_tick is None else _time(status.next_tick),
        "never ran" if last is None else f"{last.status} {_time(last.started)}",
        job.deliver or "-",
        "; ".join(said) or "active",
    ]


def _source(job: Job[Any, Any], found: Catalog) -> str:
    """Where a job is defined, and what an override in the database changes of it."""
    override = found.definition(job.name)
    if job.source == "database" or override is None:
        return job.source
    words = dict.fromkeys(
        _OVERRIDE_WORDS.get(field, "enabled" if job.enabled else "disabled")
        for field in job.overridden
    )
    return f"{job.source}, overridden: {', '.join(words) or 'nothing'}"


def _time(value: datetime) -> str:
    """A time as the tables show it: to the second, in ``TIME_ZONE`` (named in the header)."""
    return f"{timezone.localtime(value):%Y-%m-%d %H:%M:%S}"


def _error_line(error: str) -> str:
    """The first line of a run's recorded error: of a traceback, the exception's own line
    (the first line not indented after the last ``Traceback`` header)."""
    lines = error.strip().splitlines()
    headers = [n for n, line in enumerate(lines) if line.startswith("Traceback (most recent")]
    start = headers[-1] + 1 if headers else 0
    return next((line for line in lines[start:] if not line[:1].isspace()), "")


def _offset_text(run: JobRun, job: Job[Any, Any]) -> str:
    seconds = job.offset_seconds(run.tick)
    return "-" if seconds is None else f"+{human_duration(seconds)}"


def _run_facts(run: JobRun, job: Job[Any, Any]) -> dict[str, Any]:
    """One run of ``cronjob history --json``."""
    return {
        "id": run.pk,
        "status": run.status,
        "manual": run.manual,
        "backfill": run.backfill,
        "tick": None if run.tick is None else run.tick.isoformat(),
        "jitter_offset": job.offset_seconds(run.tick),
        "host": run.host,
        "pid": run.pid,
        "started": run.started.isoformat(),
        "finished": None if run.finished is None else run.finished.isoformat(),
        "duration": run.duration,
        "attempts": run.attempts,
        "error": _error_line(run.run_error),
        "output": run.output,
    }
