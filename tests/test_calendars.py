"""Business calendars (issue 38, item 5) through real processes: two ``cronworker`` replicas
run nothing on a day an operator added to a job's calendar (a job defined in code, a schedule
in ``ADVISORY_CRON["SCHEDULES"]`` and one kept in the database), each skipped tick recorded
once (``RECORD_SKIPS``) with its reason, while a job whose calendar keeps the day runs each
tick once; ``cronjob next`` names the day's reason; ``runlocked`` in a skipped tick exits 0
saying why in one line; bad calendars are refused in one line by ``cronjob``, the settings'
check and the admin's form (the calendars themselves: tests/unit/test_calendars.py)."""

from __future__ import annotations

import json
import signal
from collections import Counter
from datetime import date, datetime, timedelta
from typing import Any, Literal

import pytest
from django.test import Client
from django.urls import reverse

from django_advisory_cron import exitcodes, locked_task
from django_advisory_cron.core.calendars import parse
from django_advisory_cron.core.statuses import TICK_TAKING
from django_advisory_cron.models import CalendarDate, JobRun, RunStatus, Schedule
from tests.jobsapp.models import Marker
from tests.waiting import wait_for, wait_for_workers

pytestmark = pytest.mark.usefixtures("transactional_db")

SETTINGS = {
    "JOBS_MODULE": "calendar_tasks",
    "RECORD_SKIPS": True,
    "SCHEDULES": [
        {"name": "calendar_settings", "job": "calendar_body", "args": ["calendar_settings"],
         "every": 2, "calendar": "dates:e2e-off"},
    ],
}  # fmt: skip
#: The jobs whose every tick today is skipped (an operator's date), and those that run.
OFF = ("calendar_off", "calendar_settings", "calendar_db")


@pytest.fixture
def calendared(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(SETTINGS))


def today(observer: Any) -> date:
    """The database's date in the jobs' zone (``TIME_ZONE``, UTC in the tests)."""
    (now,) = observer.execute("SELECT now() AT TIME ZONE 'UTC'").fetchone()
    assert isinstance(now, datetime)
    return now.date()


def days_off(around: date) -> None:
    """``around`` and the days beside it (a test that crosses midnight) added by an operator
    to ``dates:e2e-off``."""
    for shift in (-1, 0, 1):
        CalendarDate.objects.create(
            calendar="dates:e2e-off", day=around + timedelta(days=shift), reason="stocktaking"
        )


def stop(workers: list[Any]) -> list[str]:
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    errors = [worker.communicate(timeout=30)[1] for worker in workers]
    assert [worker.returncode for worker in workers] == [exitcodes.SIGTERM] * 2, errors
    return errors


def skipped(name: str) -> list[JobRun]:
    return list(JobRun.objects.filter(job=name, status=RunStatus.SKIPPED_CALENDAR))


def ran(name: str) -> list[JobRun]:
    return list(JobRun.objects.filter(job=name, status__in=TICK_TAKING))


@pytest.mark.slow
def test_a_day_off_runs_nothing_on_either_replica_and_a_day_on_runs_each_tick_once(
    calendared: None, manage: Any, spawn: Any, raw_connect: Any, fresh_registry: None
) -> None:
    observer = raw_connect()
    days_off(today(observer))
    added = manage(
        "cronjob", "add", "calendar_db", "--job", "calendar_body", "--args", '["calendar_db"]',
        "--every", "2", "--calendar", "dates:e2e-off",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    us_holiday = parse("holidays:US").skip_reason(today(observer))
    workers = [spawn("cronworker", "--grace", "5") for _ in range(2)]
    wait_for_workers(observer, workers)
    wait_for(
        lambda: min(len(skipped(name)) for name in OFF) >= 3 and len(ran("calendar_on")) >= 3,
        timeout=60,
        interval=0.2,
    )
    stop(workers)

    for name in OFF:
        assert not Marker.objects.filter(job=name).exists(), name  # nothing ran
        assert ran(name) == [], name
        rows = skipped(name)
        ticks = Counter(row.tick for row in rows)
        assert max(ticks.values()) == 1, ticks  # each skipped tick recorded once
        assert {row.error for row in rows} == {
            "calendar dates:e2e-off: stocktaking (dates:e2e-off)"
        }
    runs = ran("calendar_on")
    assert len({run.tick for run in runs}) == len(runs)  # each tick once
    assert {run.status for run in runs} == {RunStatus.SUCCEEDED}
    assert Marker.objects.filter(job="calendar_on").count() == len(runs)
    assert len({run.pid for run in runs}) >= 1
    assert skipped("calendar_on") == []
    if us_holiday is None:
        assert ran("calendar_us"), "holidays:US keeps today: its job ran"
    else:
        assert ran("calendar_us") == [] and skipped("calendar_us")


def test_cronjob_next_names_the_reason_and_runlocked_exits_skipped_saying_why(
    calendared: None, manage: Any, raw_connect: Any
) -> None:
    days_off(today(raw_connect()))
    shown = manage("cronjob", "next", "calendar_off", "-n", "3")
    assert shown.returncode == 0, shown.stderr
    assert "calendar_off: every 2s (calendar dates:e2e-off)" in shown.stdout, shown.stdout
    assert shown.stdout.count("skipped: stocktaking (dates:e2e-off)") == 3, shown.stdout
    as_json = json.loads(manage("cronjob", "next", "calendar_on", "--json").stdout)
    assert all(tick["skipped"] is None for tick in as_json["ticks"])

    off = manage("runlocked", "calendar_off")
    assert off.returncode == exitcodes.OK, off.stderr
    (line,) = off.stdout.strip().splitlines()
    assert line.startswith("calendar_off: skipped, tick "), line
    assert line.endswith("is off its calendar dates:e2e-off: stocktaking (dates:e2e-off)"), line
    assert not Marker.objects.filter(job="calendar_off").exists()
    assert len(skipped("calendar_off")) == 1  # RECORD_SKIPS: recorded, with its reason

    on = manage("runlocked", "calendar_on")
    assert on.returncode == exitcodes.OK, on.stderr
    assert "calendar_on: ran" in on.stdout, on.stdout
    manual = manage("runlocked", "--manual", "calendar_off")  # by hand: no tick, no calendar
    assert manual.returncode == exitcodes.OK, manual.stderr
    assert Marker.objects.filter(job="calendar_off").count() == 1


@pytest.mark.parametrize(
    ("calendar", "said"),
    [
        ("holidays:ZZ", "unknown country 'ZZ'"),
        ("business:DE-QQ", "unknown subdivision 'QQ' of DE"),
        ("market:NOWHERE", "unknown market 'NOWHERE'"),
        ("sometimes:US", "unknown rule or kind 'sometimes'"),
    ],
)
def test_cronjob_refuses_a_bad_calendar_in_one_line(
    calendared: None, manage: Any, calendar: str, said: str
) -> None:
    refused = manage("cronjob", "add", "bad_calendar", "--job", "calendar_body", "--args",
                     '["x"]', "--every", "60", "--calendar", calendar)  # fmt: skip
    assert refused.returncode == exitcodes.USAGE, refused.stdout + refused.stderr
    assert said in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert not Schedule.objects.filter(name="bad_calendar").exists()


def test_cronjob_edit_sets_and_clears_a_calendar(calendared: None, manage: Any) -> None:
    added = manage("cronjob", "add", "cal_edit", "--job", "calendar_body", "--args", '["x"]',
                   "--schedule", "0 9 * * *", "--calendar", "last:business:fr")  # fmt: skip
    assert added.returncode == 0, added.stderr
    saved = Schedule.objects.get(name="cal_edit").calendar  # as typed; read alike
    assert parse(saved).text == "last:business:FR"
    edited = manage("cronjob", "edit", "cal_edit", "--calendar", "")
    assert edited.returncode == 0, edited.stderr
    assert Schedule.objects.get(name="cal_edit").calendar == ""


def test_the_settings_check_refuses_a_bad_calendar(
    monkeypatch: pytest.MonkeyPatch, manage: Any
) -> None:
    entry = {"name": "bad_cal", "job": "calendar_body", "args": ["x"], "every": 60,
             "calendar": "holidays:ZZ"}  # fmt: skip
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({**SETTINGS, "SCHEDULES": [entry]}))
    checked = manage("check")
    assert checked.returncode != 0
    line = next(line for line in checked.stderr.splitlines() if "bad_cal" in line)
    assert "unknown country 'ZZ'" in line, checked.stderr


def test_the_admin_form_refuses_a_bad_calendar_and_keeps_a_good_one(
    admin_client: Client, fresh_registry: None
) -> None:
    locked_task(name="calendar_body")(print)
    url = reverse("admin:django_advisory_cron_schedule_add")
    form = {"name": "admin_cal", "job": "calendar_body", "args": '["x"]', "kwargs": "{}",
            "cron": "0 9 * * *", "enabled": "on", "calendar": "holidays:DE-XX"}  # fmt: skip
    response = admin_client.post(url, form)
    assert response.status_code == 200
    assert "unknown subdivision" in response.content.decode()
    assert not Schedule.objects.filter(name="admin_cal").exists()
    response = admin_client.post(url, {**form, "calendar": "first:business:de-by"})
    assert response.status_code == 302, response.content.decode()[:3000]
    assert parse(Schedule.objects.get(name="admin_cal").calendar).text == "first:business:DE-BY"
    preview = admin_client.get(
        reverse("admin:django_advisory_cron_schedule_preview"),
        {"cron": "0 9 * * *", "timezone": "Europe/Berlin", "calendar": "market:NOPE"},
    ).json()
    assert any("unknown market 'NOPE'" in problem for problem in preview["problems"])


def test_the_admin_adds_a_date_to_a_calendar_and_refuses_a_bad_source(
    admin_client: Client,
) -> None:
    url = reverse("admin:django_advisory_cron_calendardate_add")
    bad = admin_client.post(url, {"calendar": "first:business:FR", "day": "2026-12-24"})
    assert bad.status_code == 200
    assert "Name one source" in bad.content.decode()
    good = admin_client.post(
        url, {"calendar": "business:fr", "day": "2026-12-24", "reason": "office closed"}
    )
    assert good.status_code == 302, good.content.decode()[:3000]
    row = CalendarDate.objects.get()
    assert (row.calendar, row.day, row.reason) == (
        "business:FR",
        date(2026, 12, 24),
        "office closed",
    )


def test_a_django_q2_delivery_on_a_day_off_runs_nothing(
    raw_connect: Any, fresh_registry: None
) -> None:
    from django_advisory_cron.contrib import django_q as q2

    observer = raw_connect()
    days_off(today(observer))
    marks: list[str] = []
    locked_task(name="q2_cal_off", schedule="* * * * *", calendar="dates:e2e-off")(
        lambda: marks.append("off")
    )
    locked_task(name="q2_cal_on", schedule="* * * * *", calendar="dates:e2e-on")(
        lambda: marks.append("on")
    )
    (now,) = observer.execute("SELECT now()").fetchone()
    intended = now.replace(second=0, microsecond=0)
    off = q2.run_scheduled("q2_cal_off", intended=intended.isoformat())
    assert off["runs"] == [] and off["off_calendar"] == [intended.isoformat()], off
    on = q2.run_scheduled("q2_cal_on", intended=intended.isoformat())
    assert [run["status"] for run in on["runs"]] == ["succeeded"], on
    assert on["off_calendar"] == []
    assert marks == ["on"]


def test_a_backfill_runs_no_tick_its_calendar_skips(
    calendared: None, manage: Any, raw_connect: Any
) -> None:
    days_off(today(raw_connect()))
    listed = manage("cronjob", "backfill", "calendar_off", "--start", "1m", "--dry-run")
    assert listed.returncode == 0, listed.stderr
    assert "0 without a run" in listed.stdout and "off its calendar" in listed.stdout, listed
    assert "would run" not in listed.stdout
    assert "skips tick " in listed.stdout and "stocktaking (dates:e2e-off)" in listed.stdout
    ran_none = manage("cronjob", "backfill", "calendar_off", "--start", "1m")
    assert ran_none.returncode == 0, ran_none.stderr
    assert not Marker.objects.filter(job="calendar_off").exists()


@pytest.mark.usefixtures("fresh_registry")
@pytest.mark.parametrize("policy", ["latest", "all"])
def test_a_worker_restarting_after_downtime_catches_up_no_skipped_day(
    policy: Literal["latest", "all"], raw_connect: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Every replica was down for three hourly ticks, on days an operator took off: whatever
    the catch-up policy, none of them runs (a real worker, one pass, in this process)."""
    import logging

    from django_advisory_cron.db.execute import database_now
    from tests.test_catchup import OnePass, hour_of
    from tests.unit.test_catchup import HOUR

    days_off(today(raw_connect()))
    name = f"calendar_restart_{policy}"

    def body() -> None:
        Marker.objects.create(job=name, pid=0)

    job: Any = locked_task(name=name, every=HOUR, catch_up=policy, calendar="dates:e2e-off")(body)
    latest = hour_of(database_now("default"))
    last_recorded = latest - 3 * HOUR
    assert job.run(now=last_recorded).tick == last_recorded  # run by hand: no calendar asked
    with caplog.at_level(logging.INFO, logger="django_advisory_cron"):
        OnePass([job]).run()
    if hour_of(database_now("default")) != latest:
        pytest.skip("an hour boundary passed during the test")
    assert [run.tick for run in ran(name)] == [last_recorded]
    assert Marker.objects.filter(job=name).count() == 1
    assert f"job {name}: 3 missed tick(s)" in caplog.text
    assert "skips 3 its calendar skips" in caplog.text
