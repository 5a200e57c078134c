"""``manage.py cronjob import --from SOURCE``: real ``CELERY_BEAT_SCHEDULE`` entries (celery's
own ``crontab``, ``schedule`` and ``solar``), django-crontab's ``CRONJOBS``, and real
django-celery-beat and django-q2 rows written through their models, imported in real
``manage.py`` subprocesses (``tests.settings_import``) into the test database: the dry run
prints the mapping and writes nothing, the import adds the schedules, a second import changes
nothing, and every entry that cannot map is reported."""

from __future__ import annotations

import collections
import subprocess
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import psycopg
import pytest

from tests.conftest import manage_env
from tests.warm_start import run_manage

SETTINGS = "tests.settings_import"
_migrated: set[str] = set()


def _manage(url: str, *args: str, settings: str = SETTINGS) -> subprocess.CompletedProcess[str]:
    return run_manage(args[0], "--settings", settings, *args[1:], env=manage_env(url), timeout=120)


def _has_beat() -> bool:
    import importlib.util

    return importlib.util.find_spec("django_celery_beat") is not None


@pytest.fixture
def import_db(db_url: str) -> str:
    """The test database with django-q2's (and django-celery-beat's) tables."""
    if db_url not in _migrated:
        # One process migrates every app of the import settings (django-q2's, and
        # django-celery-beat's where it is installed): a process start fewer per test worker.
        done = _manage(db_url, "migrate", "--verbosity", "0")
        assert done.returncode == 0, done.stderr
        _migrated.add(db_url)
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("TRUNCATE django_q_schedule RESTART IDENTITY")
        if _has_beat():
            conn.execute("TRUNCATE django_celery_beat_periodictask RESTART IDENTITY CASCADE")
    return db_url


def _rows(url: str) -> dict[str, dict[str, Any]]:
    """The schedules kept in the database, by name."""
    with (
        psycopg.connect(url, autocommit=True) as conn,
        conn.cursor(row_factory=psycopg.rows.dict_row) as cursor,
    ):
        cursor.execute("SELECT * FROM django_advisory_cron_schedule ORDER BY name")
        return {row["name"]: row for row in cursor.fetchall()}


def _lines(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """Each output line, by the entry it is about (the text before the first ':' or ' ->')."""
    found = {}
    for line in done.stdout.splitlines():
        label = line.split(" -> ")[0] if " -> " in line else line.partition(": ")[0]
        found[label] = line
    return collections.defaultdict(lambda: done.stdout + done.stderr, found)


def _round_trip(
    url: str, source: str, expected: dict[str, str], refused: dict[str, str]
) -> dict[str, dict[str, Any]]:
    """Dry run, import, import again: each of ``expected`` (label: what its line says) is
    imported, each of ``refused`` (label: why) is not, and the second import writes nothing.
    Returns the rows written."""
    dry = _manage(url, "cronjob", "import", "--from", source, "--dry-run")
    assert dry.returncode == (2 if refused else 0), dry.stdout + dry.stderr
    said = _lines(dry)
    for label, text in expected.items():
        assert f"would import, calling {text}" in said[label], said[label]
    for label, why in refused.items():
        assert why in said[label], said[label]
    assert "nothing was written (--dry-run)" in dry.stdout
    assert _rows(url) == {}

    done = _manage(url, "cronjob", "import", "--from", source)
    assert done.returncode == dry.returncode, done.stdout + done.stderr
    said = _lines(done)
    for label, text in expected.items():
        assert f"imported, calling {text}" in said[label], said[label]
    for label, why in refused.items():
        assert why in said[label], said[label]
    rows = _rows(url)
    assert len(rows) == len(expected), sorted(rows)

    again = _manage(url, "cronjob", "import", "--from", source)
    assert again.returncode == dry.returncode, again.stdout + again.stderr
    said = _lines(again)
    for label in expected:
        assert ": already there" in said[label], said[label]
        assert "differs" not in said[label], said[label]
    assert _rows(url) == rows  # not even rewritten: the same `changed`
    return rows


def test_celery_beat_schedule_round_trips(import_db: str) -> None:
    rows = _round_trip(
        import_db,
        "celery-beat",
        {
            "CELERY_BEAT_SCHEDULE['weekday-report']": (
                "job send_report(period=hourly), 0,15,30,45 9-17 * * 1-5 in Europe/Paris; "
                "its options {'queue': 'reports'} are left behind"
            ),
            "CELERY_BEAT_SCHEDULE['purge-every-10-minutes']": "job purge(7), every 10m",
            "CELERY_BEAT_SCHEDULE['report-by-name']": "job send_report(), every 30s",
            "CELERY_BEAT_SCHEDULE['report-by-schedule']": "job send_report(), every 1h",
        },
        {
            "CELERY_BEAT_SCHEDULE['at-dawn']": "a solar schedule (dawn_civil at 48.85, 2.35)",
            "CELERY_BEAT_SCHEDULE['first-monday']": "celery runs on days that match both",
            "CELERY_BEAT_SCHEDULE['unknown-task']": "there is no registered job 'proj.tasks.gone'",
            "CELERY_BEAT_SCHEDULE['bad-arguments']": "job 'purge' cannot be called with these",
        },
    )
    weekday = rows["weekday-report"]
    assert (weekday["job"], weekday["kwargs"], weekday["timezone"]) == (
        "send_report",
        {"period": "hourly"},
        "Europe/Paris",
    )
    assert (rows["purge-every-10-minutes"]["job"], rows["purge-every-10-minutes"]["args"]) == (
        "purge",
        [7],
    )
    assert rows["purge-every-10-minutes"]["every"] == 600


def test_the_celery_apps_own_beat_schedule_is_read_when_the_settings_have_none(
    db_url: str,
) -> None:
    done = _manage(
        db_url,
        "cronjob",
        "import",
        "--from",
        "celery-beat",
        "--dry-run",
        settings="tests.settings_import_app",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == (
        "beat_schedule['morning-report'] -> morning-report: would import, calling job "
        "send_report(morning), 30 7 * * * in America/New_York"
    )


def test_crontab_cronjobs_round_trip(import_db: str) -> None:
    rows = _round_trip(
        import_db,
        "crontab",
        {
            "CRONJOBS[0]": "job send_report(daily), 0 6 * * * in UTC",
            "CRONJOBS[1]": "manage.py clearsessions, 30 3 * * * in UTC",
            "CRONJOBS[2]": "job purge(days=1), */5 * * * * in UTC (TIME_ZONE, not the host's "
            "zone); its shell suffix '> purge.log 2>&1' is dropped",
        },
        {"CRONJOBS[3]": "there is no registered job 'proj.cron.gone'"},
    )
    # The job's name and its arguments, as a shell takes them (docs/coming-from.md).
    assert sorted(rows) == ["clearsessions", "purge-days-1", "send_report-daily"]
    # An imported schedule runs by its name, as any other.
    ran = _manage(import_db, "runlocked", "--manual", "send_report-daily")
    assert ran.returncode == 0, ran.stderr
    with psycopg.connect(import_db, autocommit=True) as conn:
        runs = conn.execute(
            "SELECT job, status FROM django_advisory_cron_jobrun WHERE job = %s",
            ("send_report-daily",),
        ).fetchall()
    assert runs == [("send_report-daily", "succeeded")]


def _shell(url: str, code: str) -> None:
    done = _manage(url, "shell", "-c", code)
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(not _has_beat(), reason="django-celery-beat supports Django < 6.1 only")
def test_django_celery_beat_rows_round_trip(import_db: str) -> None:
    _shell(
        import_db,
        """
import datetime as dt, json, zoneinfo
from django_celery_beat.models import (
    ClockedSchedule, CrontabSchedule, IntervalSchedule, PeriodicTask, SolarSchedule)
paris = zoneinfo.ZoneInfo("Europe/Paris")
night = CrontabSchedule.objects.create(minute="30", hour="2", timezone=paris)
both = CrontabSchedule.objects.create(minute="0", hour="8", day_of_month="1-7", day_of_week="1")
ten = IntervalSchedule.objects.create(every=10, period="minutes")
PeriodicTask.objects.create(name="nightly report", task="send_report", crontab=night,
    kwargs=json.dumps({"period": "nightly"}), description="the night's report")
PeriodicTask.objects.create(name="purge", task="send_report", interval=ten)
PeriodicTask.objects.create(name="purge tokens", task="tests.jobsapp.import_tasks.purge_tokens",
    interval=ten, args="[3]", enabled=False,
    start_time=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc),
    expires=dt.datetime(2027, 1, 1, tzinfo=dt.timezone.utc))
PeriodicTask.objects.create(name="once at noon", task="send_report", one_off=True,
    clocked=ClockedSchedule.objects.create(
        clocked_time=dt.datetime(2027, 3, 1, 12, tzinfo=dt.timezone.utc)))
PeriodicTask.objects.create(name="at dusk", task="send_report",
    solar=SolarSchedule.objects.create(event="dusk_civil", latitude=48.85, longitude=2.35))
PeriodicTask.objects.create(name="one off", task="send_report", interval=ten, one_off=True)
PeriodicTask.objects.create(name="first monday", task="send_report", crontab=both)
PeriodicTask.objects.create(name="celery.backend_cleanup", task="celery.backend_cleanup",
    crontab=night)
""",
    )
    rows = _round_trip(
        import_db,
        "django-celery-beat",
        {
            "PeriodicTask 'nightly report'": "job send_report(period=nightly), 30 2 * * * in "
            "Europe/Paris",
            "PeriodicTask 'purge tokens'": "job purge(3), every 10m, disabled",
            "PeriodicTask 'once at noon'": "job send_report(), once at 2027-03-01 12:00 (UTC)",
            "PeriodicTask 'one off'": "job send_report(), every 10m",
        },
        {
            "PeriodicTask 'at dusk'": "a solar schedule (dusk_civil at 48.85",
            "PeriodicTask 'purge'": "the name 'purge' is taken by a job defined in code",
            "PeriodicTask 'first monday'": "celery runs on days that match both",
            "PeriodicTask 'celery.backend_cleanup'": "there is no registered job "
            "'celery.backend_cleanup'",
        },
    )
    assert rows["nightly-report"]["description"] == "the night's report"
    purge = rows["purge-tokens"]
    assert (purge["enabled"], purge["starts"].year, purge["ends"].year) == (False, 2026, 2027)
    assert rows["once-at-noon"]["at"] == datetime(2027, 3, 1, 12, tzinfo=timezone.utc)
    assert rows["one-off"]["max_runs"] == 1


def test_django_q2_rows_round_trip(import_db: str) -> None:
    _shell(
        import_db,
        """
import datetime as dt
from django_q.models import Schedule
Schedule.objects.create(name="sessions", func="django.core.management.call_command",
    args="'clearsessions'", schedule_type="C", cron="30 3 * * *")
Schedule.objects.create(name="report", func="tests.jobsapp.import_tasks.send_report",
    kwargs="period='weekly', copies=2", schedule_type="W",
    next_run=dt.datetime(2026, 12, 7, 7, 15, tzinfo=dt.timezone.utc))
Schedule.objects.create(name="purge often", func="tests.jobsapp.import_tasks.purge_tokens",
    args="5", schedule_type="I", minutes=20)
Schedule.objects.create(name="once", func="tests.jobsapp.import_tasks.send_report",
    schedule_type="O", next_run=dt.datetime(2099, 3, 1, 12, tzinfo=dt.timezone.utc))
Schedule.objects.create(name="once before", func="tests.jobsapp.import_tasks.send_report",
    schedule_type="O", next_run=dt.datetime(2020, 3, 1, 12, tzinfo=dt.timezone.utc))
Schedule.objects.create(name="three times", func="tests.jobsapp.import_tasks.send_report",
    schedule_type="D", repeats=3,
    next_run=dt.datetime(2026, 12, 7, 7, 15, tzinfo=dt.timezone.utc))
Schedule.objects.create(name="no more", func="tests.jobsapp.import_tasks.send_report",
    schedule_type="D", repeats=0)
Schedule.objects.create(name="advisory_cron:nightly", schedule_type="C", cron="0 2 * * *",
    func="django_advisory_cron.contrib.django_q.run_scheduled", args="'nightly'")
""",
    )
    rows = _round_trip(
        import_db,
        "django-q2",
        {
            "django-q2 Schedule 'sessions'": "manage.py clearsessions, 30 3 * * *",
            "django-q2 Schedule 'report'": "job send_report(period=weekly, copies=2), 15 7 * * 1",
            "django-q2 Schedule 'purge often'": "job purge(5), every 20m",
            "django-q2 Schedule 'once'": "job send_report(), once at 2099-03-01 12:00 (UTC)",
            "django-q2 Schedule 'three times'": "job send_report(), 15 7 * * *",
        },
        {
            "django-q2 Schedule 'once before'": "it runs once, at 2020-03-01 12:00 UTC, which "
            "has passed",
            "django-q2 Schedule 'no more'": "it runs no more",
            "django-q2 Schedule 'advisory_cron:nightly'": "sync_schedules wrote it",
        },
    )
    assert rows["sessions"]["command"] == "clearsessions"
    assert rows["report"]["kwargs"] == {"period": "weekly", "copies": 2}
    assert rows["once"]["at"] == datetime(2099, 3, 1, 12, tzinfo=timezone.utc)
    assert rows["three-times"]["max_runs"] == 3


def test_a_source_not_there_is_one_line_and_exit_2(
    manage: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    for source, says in (
        ("django-celery-beat", "django-celery-beat is not installed here"),
        ("django-q2", "django-q2 is not installed here"),
        ("crontab", "the settings have no CRONJOBS"),
        ("celery-beat", "the settings have no CELERY_BEAT_SCHEDULE"),
    ):
        done = manage("cronjob", "import", "--from", source)
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        [line] = done.stderr.strip().splitlines()
        assert line.startswith(f"cronjob: import --from {source}: {says}"), line
