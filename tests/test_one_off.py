"""One-off runs (``at=``) and limited runs (``max_runs=``) through real processes (issue 38,
item 3): two ``cronworker`` replicas run a one-off defined in code, in
``ADVISORY_CRON["SCHEDULES"]`` and in the database once, at its moment, and then say it is
done (``cronjob list``, ``cronstatus``); a one-off missed while every replica was down follows
its catch-up and lateness; ``max_runs=2`` on an every-second schedule runs twice across the
two replicas; a bad or past moment is refused in one line where it is typed (the tick
computation itself: tests/unit/test_once.py)."""

from __future__ import annotations

import json
import signal
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from django.contrib.admin.sites import site
from django.test import Client
from django.urls import reverse

from django_advisory_cron import exitcodes, locked_task
from django_advisory_cron.core.statuses import TICK_TAKING
from django_advisory_cron.models import JobRun, Schedule
from tests.jobsapp.models import Marker
from tests.waiting import wait_for, wait_for_workers

pytestmark = pytest.mark.usefixtures("transactional_db")

BERLIN = "Europe/Berlin"
#: How long after its moment a replica may start a one-off on a loaded machine.
TOLERANCE = timedelta(seconds=3)


def settings_with(*schedules: dict[str, Any], **more: Any) -> str:
    return json.dumps({"JOBS_MODULE": "one_off_tasks", "SCHEDULES": list(schedules), **more})


def database_now(observer: Any) -> datetime:
    (now,) = observer.execute("SELECT now()").fetchone()
    assert isinstance(now, datetime)
    return now


def local(moment: datetime, zone: str = BERLIN) -> str:
    """``moment`` as ``--at`` takes it: a local time of ``zone``, to the second."""
    from zoneinfo import ZoneInfo

    return f"{moment.astimezone(ZoneInfo(zone)):%Y-%m-%d %H:%M:%S}"


def ran(name: str) -> list[JobRun]:
    return list(JobRun.objects.filter(job=name, status__in=TICK_TAKING))


def stop(workers: list[Any]) -> list[str]:
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    errors = [worker.communicate(timeout=30)[1] for worker in workers]
    assert [worker.returncode for worker in workers] == [exitcodes.SIGTERM] * 2, errors
    return errors


def listed(manage: Any) -> dict[str, dict[str, Any]]:
    shown = manage("cronjob", "list", "--json")
    assert shown.returncode == 0, shown.stderr
    return {job["job"]: job for job in json.loads(shown.stdout)["jobs"]}


@pytest.mark.slow
def test_a_one_off_runs_once_at_its_moment_then_is_done(
    monkeypatch: pytest.MonkeyPatch, manage: Any, spawn: Any, raw_connect: Any
) -> None:
    observer = raw_connect()
    moment = database_now(observer).replace(microsecond=0) + timedelta(seconds=12)
    monkeypatch.setenv("ONE_OFF_AT", local(moment))
    settings = {"name": "one_off_settings", "job": "one_off_body", "args": ["one_off_settings"],
                "at": local(moment), "timezone": BERLIN}  # fmt: skip
    monkeypatch.setenv("ADVISORY_CRON_JSON", settings_with(settings))
    added = manage(
        "cronjob", "add", "one_off_db", "--job", "one_off_body", "--args", '["one_off_db"]',
        "--at", local(moment, "America/New_York"), "--timezone", "America/New_York",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert "once at" in added.stdout and "(America/New_York)" in added.stdout, added.stdout
    names = ("one_off_code", "one_off_settings", "one_off_db")
    before = listed(manage)
    for name in names:
        assert before[name]["next_tick"] == moment.isoformat()
        assert before[name]["done"] is None

    workers = [spawn("cronworker", "--grace", "5") for _ in range(2)]
    wait_for_workers(observer, workers)
    wait_for(lambda: all(Marker.objects.filter(job=name).exists() for name in names), timeout=60)
    # Past its moment, a tick of nothing: give the replicas a few seconds to do wrong.
    wait_for(lambda: database_now(observer) > moment + timedelta(seconds=4), timeout=30)
    errors = stop(workers)

    for name in names:
        runs = ran(name)
        assert [run.tick for run in runs] == [moment], runs  # once, its one tick
        assert runs[0].status == "succeeded"
        assert runs[0].started - moment < TOLERANCE, runs[0].started
        assert Marker.objects.filter(job=name).count() == 1
        assert any(f"job {name} has no more ticks" in said for said in errors), errors
    after = listed(manage)
    for name in names:
        assert after[name]["next_tick"] is None and after[name]["overdue"] is False
        assert after[name]["done"] == "done: its one-off moment passed", after[name]
    table = manage("cronjob", "list")
    assert "done: its one-off moment passed" in table.stdout, table.stdout
    status = manage("cronstatus")
    assert status.returncode == 0, status.stdout + status.stderr


@pytest.mark.slow
def test_a_one_off_missed_while_down_follows_its_catch_up(
    monkeypatch: pytest.MonkeyPatch, manage: Any, spawn: Any, raw_connect: Any
) -> None:
    observer = raw_connect()
    # Far enough ahead that the third ``cronjob add`` still types a future moment on a
    # loaded machine (a past one is refused where it is typed).
    moment = database_now(observer).replace(microsecond=0) + timedelta(seconds=10)
    monkeypatch.setenv("ADVISORY_CRON_JSON", settings_with())
    for name, options in (
        ("missed_latest", ["--catch-up", "latest"]),
        ("missed_none", ["--catch-up", "none"]),
        ("missed_too_late", ["--catch-up", "latest", "--max-lateness", "1"]),
    ):
        added = manage(
            "cronjob", "add", name, "--job", "one_off_body", "--args", json.dumps([name]),
            "--at", local(moment, "UTC"), "--timezone", "UTC", *options,
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
    wait_for(lambda: database_now(observer) > moment + timedelta(seconds=3), timeout=30)

    workers = [spawn("cronworker", "--grace", "5") for _ in range(2)]
    wait_for_workers(observer, workers)
    wait_for(lambda: Marker.objects.filter(job="missed_latest").exists(), timeout=60)
    errors = stop(workers)

    assert [run.tick for run in ran("missed_latest")] == [moment]
    assert Marker.objects.filter(job="missed_latest").count() == 1
    assert not ran("missed_none") and not ran("missed_too_late")
    said = "\n".join(errors)
    assert "job missed_none: 1 missed tick(s)" in said and "catch_up='none' runs nothing" in said
    assert "job missed_too_late: 1 missed tick(s)" in said
    assert "more than max_lateness=1s late" in said, said
    after = listed(manage)
    for name in ("missed_latest", "missed_none", "missed_too_late"):
        assert after[name]["overdue"] is False and after[name]["done"], after[name]


@pytest.mark.slow
def test_max_runs_two_on_an_every_second_schedule_runs_twice_across_two_replicas(
    monkeypatch: pytest.MonkeyPatch, manage: Any, spawn: Any, raw_connect: Any
) -> None:
    observer = raw_connect()
    monkeypatch.setenv("ADVISORY_CRON_JSON", settings_with(RECORD_SKIPS=True))
    added = manage(
        "cronjob", "add", "limited_db", "--job", "one_off_body", "--args", '["limited_db"]',
        "--every", "1", "--max-runs", "2",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    workers = [spawn("cronworker", "--grace", "5") for _ in range(2)]
    wait_for_workers(observer, workers)
    names = ("limited_code", "limited_db")
    wait_for(lambda: all(len(ran(name)) >= 2 for name in names), timeout=60)
    # The ticks that would be the third to the sixth come and go.
    last = max(run.tick for name in names for run in ran(name) if run.tick is not None)
    wait_for(lambda: database_now(observer) > last + timedelta(seconds=4), timeout=30)
    errors = stop(workers)

    for name in names:
        runs = ran(name)
        assert len(runs) == 2 and len({run.tick for run in runs}) == 2, runs
        assert Marker.objects.filter(job=name).count() == 2
        assert {run.status for run in runs} == {"succeeded"}
        assert any(
            f"job {name} has no more ticks: its schedule ended after its max_runs=2 runs" in e
            for e in errors
        ), errors
        # A replica that claimed a tick past the limit recorded it as a skip, saying why.
        for skip in JobRun.objects.filter(job=name, status="skipped_tick").exclude(error=""):
            assert "its schedule ended after its max_runs=2 runs" in skip.error
    after = listed(manage)
    for name in names:
        assert after[name]["done"] == "done after its max_runs=2 runs", after[name]
        assert after[name]["next_tick"] is None and after[name]["overdue"] is False


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--at", "2020-01-01 10:00"], "--at 2020-01-01 10:00:00+00:00 has passed"),
        (["--at", "tomorrow"], "--at: at must be a date and time"),
        (["--at", "2099-01-01 10:00", "--timezone", "Mars/Base"], "not a known time zone"),
        (["--at", "2099-01-01 10:00", "--every", "5"], "a schedule has one of a cron expression"),
        (["--every", "5", "--max-runs", "0"], "max_runs must be a whole number from 1"),
        (["--every", "5", "--max-runs", "two"], "--max-runs must be a whole number"),
    ],
)
def test_cronjob_refuses_a_bad_moment_in_one_line(
    monkeypatch: pytest.MonkeyPatch, manage: Any, options: list[str], said: str
) -> None:
    monkeypatch.setenv("ADVISORY_CRON_JSON", settings_with())
    refused = manage("cronjob", "add", "bad_one_off", "--job", "one_off_body", "--args",
                     '["x"]', *options)  # fmt: skip
    assert refused.returncode == exitcodes.USAGE, refused.stdout + refused.stderr
    assert said in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert not Schedule.objects.filter(name="bad_one_off").exists()


def test_the_settings_check_refuses_a_bad_moment(
    monkeypatch: pytest.MonkeyPatch, manage: Any
) -> None:
    entry = {"name": "bad_at", "job": "one_off_body", "args": ["x"], "at": "next week"}
    monkeypatch.setenv("ADVISORY_CRON_JSON", settings_with(entry))
    checked = manage("check")
    assert checked.returncode != 0
    line = next(line for line in checked.stderr.splitlines() if "E171" in line)
    assert "['SCHEDULES'][0]: at must be a date and time" in line, checked.stderr


def test_the_decorator_refuses_a_bad_moment_or_limit(fresh_registry: None) -> None:
    with pytest.raises(ValueError, match=r"^@locked_task 'bad': at must be a date and time"):
        locked_task(name="bad", at="soon")(print)
    with pytest.raises(ValueError, match=r"^@locked_task 'bad': the moment must be from 1970"):
        locked_task(name="bad", at="1900-01-01 00:00")(print)
    with pytest.raises(ValueError, match=r"^@locked_task 'bad': a schedule has one of"):
        locked_task(name="bad", at="2099-01-01 00:00", every=5)(print)
    with pytest.raises(ValueError, match=r"^@locked_task 'bad': max_runs must be a whole"):
        locked_task(name="bad", every=5, max_runs=True)(print)


def test_the_admin_form_refuses_a_past_moment(admin_client: Client, fresh_registry: None) -> None:
    locked_task(name="one_off_body")(print)
    assert Schedule in site._registry
    url = reverse("admin:django_advisory_cron_schedule_add")
    form = {"name": "admin_one_off", "job": "one_off_body", "args": '["x"]', "kwargs": "{}",
            "at_0": "2020-01-01", "at_1": "10:00:00", "enabled": "on"}  # fmt: skip
    response = admin_client.post(url, form)
    assert response.status_code == 200
    assert "has passed; give a moment to come" in response.content.decode()
    assert not Schedule.objects.filter(name="admin_one_off").exists()


def test_the_admin_form_reads_and_shows_a_moment_in_the_schedule_s_zone(
    admin_client: Client, fresh_registry: None
) -> None:
    locked_task(name="one_off_body")(print)
    url = reverse("admin:django_advisory_cron_schedule_add")
    form = {"name": "admin_one_off", "job": "one_off_body", "args": '["x"]', "kwargs": "{}",
            "at_0": "2099-12-24", "at_1": "18:00:00", "timezone": BERLIN,
            "enabled": "on"}  # fmt: skip
    response = admin_client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:3000]
    saved = Schedule.objects.get(name="admin_one_off")
    assert saved.at == datetime(2099, 12, 24, 17, 0, tzinfo=timezone.utc)
    change = reverse("admin:django_advisory_cron_schedule_change", args=[saved.pk])
    page = admin_client.get(change).content.decode()
    assert 'value="18:00:00"' in page and 'value="2099-12-24"' in page


def test_a_tick_past_max_runs_is_a_skip_saying_why(fresh_registry: None) -> None:
    """The runner's own count, under the lock: what holds when a worker's read was behind
    (and for ``runlocked``, which has no timetable)."""
    calls: list[datetime] = []

    @locked_task(name="limited_here", every=60, max_runs=2)
    def limited_here() -> None:
        calls.append(datetime.now(timezone.utc))

    base = datetime(2030, 1, 1, tzinfo=timezone.utc)
    results = [limited_here.run(now=base + timedelta(minutes=n)) for n in range(4)]
    assert [result.ran for result in results] == [True, True, False, False]
    assert len(calls) == 2
    skipped = results[2]
    assert skipped.status == "skipped_tick" and skipped.tick == base + timedelta(minutes=2)
    row = JobRun.objects.get(job="limited_here", tick=base + timedelta(minutes=2))
    assert row.status == "skipped_tick"
    assert row.error == "its schedule ended after its max_runs=2 runs"
    assert len(ran("limited_here")) == 2
