"""Schedules kept in the database, run by real ``cronworker`` processes (3) against a real
PostgreSQL: added, edited mid-run, paused and resumed, disabled, removed while running, and
picked up behind a real PgBouncer without LISTEN. Each tick runs once, none is invented."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest

from django_advisory_cron.models import JobRun, RunStatus, Schedule
from django_advisory_cron.ops import control
from django_advisory_cron.testing import PgBouncer
from django_advisory_cron.worker.fleet import PRESENCE_NAME
from tests.jobsapp.models import Marker
from tests.waiting import wait_for, wait_for_workers, workers_present

from .pooling import bouncer_url

pytestmark = [pytest.mark.usefixtures("transactional_db"), pytest.mark.slow]

WORKERS = 3


@pytest.fixture
def schedule_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "schedule_tasks", "MAX_SKEW": 0.5})
    )


@pytest.fixture
def fleet(schedule_jobs: None, spawn: Any, raw_connect: Any) -> list[Any]:
    """Three workers running every job, the database's schedules included."""
    workers = [spawn("cronworker", "--grace", "10") for _ in range(WORKERS)]
    wait_for_workers(raw_connect(), workers)
    return workers


def stop(workers: list[Any]) -> list[str]:
    for worker in workers:
        worker.terminate()
    return [worker.communicate(timeout=30)[1] for worker in workers]


def runs(name: str) -> list[JobRun]:
    return list(JobRun.objects.filter(job=name).order_by("tick"))


def ran(name: str, count: int) -> bool:
    return JobRun.objects.filter(job=name, status=RunStatus.SUCCEEDED).count() >= count


def assert_once_per_tick(name: str, label: str | None = None) -> list[JobRun]:
    """Every run row has its own tick, and the body ran once per run that ran."""
    rows = runs(name)
    ticks = Counter(run.tick for run in rows)
    assert all(count == 1 for count in ticks.values()), ticks
    ran_rows = [run for run in rows if run.status != RunStatus.SKIPPED_LOCKED]
    assert Marker.objects.filter(job=label or name).count() == len(ran_rows)
    return rows


def assert_followed(errors: list[str], change: str, then: str) -> None:
    """Every worker that logged ``change`` logged ``then`` after it, and one at least did (a
    worker still starting on a loaded machine reads the schedules as they are by then, and
    logs neither)."""
    changed = [err for err in errors if change in err]
    assert changed, errors
    assert all(then in err.split(change, 1)[1] for err in changed), changed


def tick(run: JobRun) -> datetime:
    assert run.tick is not None
    return run.tick


def on_grid(at: datetime, seconds: float) -> bool:
    return at.timestamp() % seconds == 0


def test_an_added_schedule_runs_once_per_tick_from_its_next_tick(
    fleet: list[Any], manage: Any
) -> None:
    """Added with ``cronjob add``. Two schedules call one job with other arguments: each has
    its own ticks and lock."""
    command = ["cronjob", "add", "added", "--job", "mark", "--every", "2"]
    done = manage(*command, "--kwargs", json.dumps({"label": "added"}))
    assert done.returncode == 0, done.stderr
    added = Schedule.objects.get(name="added")
    Schedule.objects.create(name="added-too", job="mark", args=["added-too", "second"], every=2)
    wait_for(lambda: ran("added", 4) and ran("added-too", 4), timeout=30)
    errors = stop(fleet)
    too = assert_once_per_tick("added-too")
    assert {marker.note for marker in Marker.objects.filter(job="added-too")} == {"second"}
    rows = assert_once_per_tick("added")
    # Due together, neither held the other back.
    assert {tick(run) for run in rows} & {tick(run) for run in too}
    assert tick(rows[0]) > added.changed
    assert tick(rows[0]) - added.changed <= timedelta(seconds=2)
    assert all(on_grid(tick(run), 2) for run in rows)
    # Consecutive ticks, none missed, none twice.
    assert all(tick(b) - tick(a) == timedelta(seconds=2) for a, b in itertools.pairwise(rows))
    latency = (rows[0].started - added.changed).total_seconds()
    print(f"\nadded -> first run started: {latency:.3f} s (first tick {tick(rows[0])})")
    # Each worker took it up as a change (or, starting while it was added, at its start).
    assert all(
        "job added scheduled: every 2s" in err or "2 scheduled job(s)" in err for err in errors
    )


def test_an_edit_mid_run_runs_no_tick_twice_and_invents_none(fleet: list[Any]) -> None:
    """From every 6 s to every 2 s while a run is going, with ``catch_up="all"``: the
    old schedule's ticks before the edit, then only the new one's ticks after it; none of the
    new schedule's ticks between the last old tick and the edit is made up as missed. (6 s:
    the edit, early in the first 3-second run, comes well before the old schedule's next
    tick.)"""
    edited_one = Schedule.objects.create(
        name="edited",
        job="mark",
        kwargs={"label": "edited", "seconds": 3},
        every=6,
        catch_up="all",
    )
    first = wait_for(lambda: JobRun.objects.filter(job="edited").first(), timeout=30)
    wait_for(lambda: Marker.objects.filter(job="edited").exists(), timeout=10)  # mid-run
    edited_one.every = 2
    edited_one.save()
    edited_one.refresh_from_db()
    edit: datetime = edited_one.changed
    assert first.status == RunStatus.RUNNING or (first.finished or edit) >= edit - timedelta(
        seconds=3
    )
    wait_for(lambda: ran("edited", 4), timeout=40)
    stop(fleet)
    rows = assert_once_per_tick("edited")
    # The edit came while the first run was going.
    first.refresh_from_db()
    assert first.finished is not None and first.started < edit < first.finished
    before = [run for run in rows if tick(run) <= edit]
    after = [run for run in rows if tick(run) > edit]
    assert [tick(run) for run in before] == [tick(first)]
    assert all(on_grid(tick(run), 2) for run in after)
    # The new schedule's first tick after the edit is the first one run: nothing from
    # between the old tick and the edit.
    assert tick(after[0]) - edit <= timedelta(seconds=2), (tick(after[0]), edit)
    ran_after = [run for run in after if run.status == RunStatus.SUCCEEDED]
    assert len(ran_after) >= 3
    # A 3-second body every 2 s: a tick that comes while it runs is skipped, not overlapped.
    for a, b in itertools.pairwise(ran_after):
        assert a.finished is not None and a.finished <= b.started


def test_pause_resume_disable_enable(fleet: list[Any]) -> None:
    Schedule.objects.create(name="toggled", job="mark", kwargs={"label": "toggled"}, every=2)
    wait_for(lambda: ran("toggled", 1), timeout=30)

    control.pause("toggled", by="test", reason="maintenance")
    paused_at = control_now()
    wait_for(lambda: control_now() > paused_at + timedelta(seconds=5), timeout=10)
    assert not JobRun.objects.filter(job="toggled", tick__gt=paused_at + timedelta(seconds=1))
    control.resume("toggled")
    resumed = JobRun.objects.filter(job="toggled").count()
    wait_for(lambda: JobRun.objects.filter(job="toggled").count() >= resumed + 2, timeout=15)

    Schedule.objects.filter(name="toggled").update(enabled=False)
    disabled = Schedule.objects.get(name="toggled").changed
    wait_for(lambda: control_now() > disabled + timedelta(seconds=5), timeout=10)
    assert not JobRun.objects.filter(job="toggled", tick__gt=disabled)
    Schedule.objects.filter(name="toggled").update(enabled=True)
    enabled = Schedule.objects.get(name="toggled").changed
    wait_for(
        lambda: JobRun.objects.filter(job="toggled", tick__gt=enabled).count() >= 2, timeout=15
    )
    errors = stop(fleet)
    assert_once_per_tick("toggled")
    # Disabled, then enabled again: the ticks above say every worker followed; the logs, that
    # one did at least (a worker still starting read the schedule as it was by then).
    assert any("job toggled is no longer scheduled" in err for err in errors), errors


def test_removed_while_running_finishes_and_has_no_next_tick(fleet: list[Any]) -> None:
    Schedule.objects.create(
        name="removed", job="mark", kwargs={"label": "removed", "seconds": 4}, every=2
    )
    running = wait_for(
        lambda: JobRun.objects.filter(job="removed", status=RunStatus.RUNNING).first(),
        timeout=30,
    )
    Schedule.objects.filter(name="removed").delete()
    removed_at = control_now()
    wait_for(lambda: JobRun.objects.get(pk=running.pk).status != RunStatus.RUNNING, timeout=15)
    wait_for(lambda: control_now() > removed_at + timedelta(seconds=4), timeout=10)
    errors = stop(fleet)
    assert JobRun.objects.get(pk=running.pk).status == RunStatus.SUCCEEDED
    assert not JobRun.objects.filter(job="removed", started__gt=removed_at)
    assert Marker.objects.filter(job="removed").count() == 1
    assert_followed(errors, "job removed scheduled", "job removed is no longer scheduled")


def test_an_override_of_a_code_job_and_its_reset(fleet: list[Any]) -> None:
    """``code_yearly`` ticks once a year in code; overridden to every 2 s it runs every 2 s,
    and reset to its code it stops."""
    Schedule.objects.create(name="code_yearly", override=True, every=2)
    wait_for(lambda: ran("code_yearly", 2), timeout=30)
    Schedule.objects.filter(name="code_yearly").delete()
    reset = control_now()
    wait_for(lambda: control_now() > reset + timedelta(seconds=4), timeout=10)
    errors = stop(fleet)
    assert not JobRun.objects.filter(job="code_yearly", tick__gt=reset)
    assert_once_per_tick("code_yearly")
    # A worker still starting when the override came read it at its start instead.
    assert_followed(
        errors, "job code_yearly rescheduled: every 2s", "job code_yearly rescheduled: 0 0 1 1 *"
    )


@pytest.mark.pgbouncer
def test_behind_a_transaction_pooler_a_change_is_seen_within_the_poll(
    schedule_jobs: None, spawn: Any, raw_connect: Any, pgbouncer_transaction: PgBouncer
) -> None:
    observer = raw_connect()
    worker = spawn("cronworker", url=bouncer_url(pgbouncer_transaction))
    wait_for_workers(observer, [worker])
    added = Schedule.objects.create(name="pooled", job="mark", kwargs={"label": "pooled"}, every=2)
    added.refresh_from_db()
    first = wait_for(lambda: JobRun.objects.filter(job="pooled").first(), timeout=20)
    wait_for(lambda: ran("pooled", 2), timeout=10)
    worker.terminate()
    worker.communicate(timeout=30)
    observer.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE %s",
        (f"{PRESENCE_NAME}%",),
    )
    wait_for(lambda: workers_present(observer) == 0, timeout=5)
    latency = (first.started - added.changed).total_seconds()
    print(f"\nbehind PgBouncer: added -> first run started {latency:.3f} s")
    # Seen within SCHEDULE_POLL (5 s), run at the next 2-second tick after that.
    assert latency < 5 + 2 + 1, latency
    assert_once_per_tick("pooled")


def control_now() -> datetime:
    """The database's clock."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        value: datetime = cursor.fetchone()[0]
    return value


def test_a_worker_started_before_the_first_schedule_waits_for_it(
    monkeypatch: pytest.MonkeyPatch, spawn: Any, manage: Any, raw_connect: Any
) -> None:
    """A fleet deployed before anyone added a schedule stays up (a restart policy would
    otherwise crash-loop it), says so once, and runs the first schedule added."""
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "import_tasks"}))
    worker = spawn("cronworker", "--grace", "5")
    wait_for(lambda: workers_present(raw_connect()) == 1 or worker.poll() is not None)
    assert worker.poll() is None, worker.communicate()
    added = manage("cronjob", "add", "first", "--command", "check", "--every", "1")
    assert added.returncode == 0, added.stderr
    wait_for(lambda: ran("first", 1), timeout=30)
    worker.terminate()
    out, err = worker.communicate(timeout=30)
    assert worker.returncode == 143, err
    assert out.count("no scheduled job yet") == 1, out
