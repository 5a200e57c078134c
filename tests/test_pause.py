"""Pause, resume and "run now", through ``manage.py cronjob``, ``runlocked`` and real
``cronworker`` processes against a real PostgreSQL (and a real PgBouncer for the polling
fallback)."""

from __future__ import annotations

import json
import statistics
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from django_advisory_cron import exitcodes, locked_task
from django_advisory_cron.db.execute import database_now
from django_advisory_cron.models import JobRun, JobState, RunStatus
from django_advisory_cron.ops import control
from django_advisory_cron.run.runner import execute
from django_advisory_cron.testing import PgBouncer
from django_advisory_cron.worker.fleet import PRESENCE_NAME
from tests.jobsapp.models import Marker
from tests.waiting import wait_for, wait_for_workers, workers_present

from .pooling import bouncer_url

pytestmark = pytest.mark.usefixtures("transactional_db")

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def worker_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "worker_tasks"}))


def manual_run_since(at: datetime) -> JobRun | None:
    return JobRun.objects.filter(job="yearly_manual", started__gte=at).first()


def test_until_is_a_duration_or_an_iso_time_in_the_future() -> None:
    assert control.parse_until("90s", NOW) == NOW + timedelta(seconds=90)
    assert control.parse_until("1h30m", NOW) == NOW + timedelta(minutes=90)
    assert control.parse_until("2d", NOW) == NOW + timedelta(days=2)
    assert control.parse_until("2026-12-24T08:00+01:00", NOW) == datetime(
        2026, 12, 24, 7, 0, tzinfo=timezone.utc
    )
    assert control.parse_until("2026-12-24 08:00", NOW) == datetime(  # TIME_ZONE is UTC
        2026, 12, 24, 8, 0, tzinfo=timezone.utc
    )
    for bad in ("soon", "2h and a bit", "2026-13-40T00:00"):
        with pytest.raises(ValueError, match="neither a duration"):
            control.parse_until(bad, NOW)
    with pytest.raises(ValueError, match="not in the future"):
        control.parse_until("2026-12-01T00:00", NOW)


def test_pause_skips_with_exit_0_and_no_row_resume_runs_again(manage: Any) -> None:
    paused = manage("cronjob", "pause", "quick_scheduled", "--reason", "disk full")
    assert paused.returncode == 0, paused.stderr
    assert "quick_scheduled: paused by " in paused.stdout and ": disk full" in paused.stdout

    skipped = manage("runlocked", "quick_scheduled")
    assert skipped.returncode == exitcodes.OK, skipped.stderr
    assert "skipped, paused by" in skipped.stdout and "disk full" in skipped.stdout
    assert not JobRun.objects.filter(job="quick_scheduled").exists()  # a loser writes nothing
    assert not Marker.objects.filter(job="quick_scheduled").exists()

    listed = manage("cronjob", "list")
    assert listed.returncode == 0, listed.stderr
    line = next(line for line in listed.stdout.splitlines() if line.startswith("quick_scheduled"))
    assert "paused by" in line and "disk full" in line
    assert "0 cronworker(s) connected" in listed.stdout

    resumed = manage("cronjob", "resume", "quick_scheduled")
    assert resumed.returncode == 0 and "resumed (it was paused by" in resumed.stdout
    assert (
        manage("cronjob", "resume", "quick_scheduled")
        .stdout.strip()
        .endswith("was not paused; nothing to do.")
    )
    ran = manage("runlocked", "quick_scheduled")
    assert ran.returncode == exitcodes.OK and "ran (run" in ran.stdout
    assert Marker.objects.filter(job="quick_scheduled").count() == 1


def test_a_pause_ends_by_itself_at_its_until(fresh_registry: None) -> None:
    @locked_task(name="pause.expiring", schedule="*/5 * * * *")
    def expiring() -> None:
        return None

    now = database_now()
    control.pause("pause.expiring", until=now + timedelta(seconds=60), by="ops", reason="db move")
    tick = expiring.schedule.next_tick(now)  # type: ignore[union-attr]
    result = execute(expiring, now=tick)
    assert result.status == RunStatus.SKIPPED_PAUSED
    assert result.tick == tick and result.paused is not None and "until" in result.paused
    assert not expiring()  # the decorator's call returns SKIPPED while paused, too
    # Another tick of the same job is free: a paused tick is not taken.
    JobState.objects.filter(job="pause.expiring").update(paused_until=now - timedelta(seconds=1))
    result = execute(expiring, now=tick)
    assert result.status == RunStatus.SUCCEEDED and result.tick == tick
    statuses = list(
        JobRun.objects.filter(job="pause.expiring", tick=tick)
        .order_by("id")
        .values_list("status", flat=True)
    )
    assert statuses == [RunStatus.SUCCEEDED]


def test_a_manual_run_has_no_tick_and_ignores_a_pause(fresh_registry: None) -> None:
    @locked_task(name="pause.manual", schedule="*/5 * * * *")
    def manual() -> str:
        return "done"

    control.pause("pause.manual", by="ops")
    now = database_now()
    tick = manual.schedule.previous_tick(now)  # type: ignore[union-attr]
    result = execute(manual, now=tick, manual=True)
    assert result.status == RunStatus.SUCCEEDED and result.tick is None and result.manual
    assert result.run_id is not None
    run = JobRun.objects.get(pk=result.run_id)
    assert run.manual and run.tick is None
    # The tick it was asked "near" is still free for the schedule.
    control.resume("pause.manual")
    assert execute(manual, now=tick).status == RunStatus.SUCCEEDED


def test_unknown_job_and_bad_until_are_one_line_exit_2(manage: Any) -> None:
    unknown = manage("cronjob", "pause", "quick_schedule")
    assert unknown.returncode == exitcodes.USAGE
    assert unknown.stderr.strip() == (
        "cronjob: no job named 'quick_schedule'; did you mean quick_scheduled?"
    )
    far = manage("cronjob", "trigger", "zzzz")
    assert far.returncode == exitcodes.USAGE
    assert far.stderr.strip() == "cronjob: no job named 'zzzz'; see cronjob list"
    bad = manage("cronjob", "pause", "quick_scheduled", "--until", "soonish")
    assert bad.returncode == exitcodes.USAGE and "Traceback" not in bad.stderr
    assert bad.stderr.count("\n") <= 1 and "--until: 'soonish' is neither" in bad.stderr
    assert not JobState.objects.exists()
    helped = manage("cronjob", "--help")
    assert "exit codes:" in helped.stdout and "no cronworker is connected" in helped.stdout


def test_trigger_without_a_worker_records_nothing_and_here_runs_it(manage: Any) -> None:
    refused = manage("cronjob", "trigger", "quick_scheduled")
    assert refused.returncode == exitcodes.NO_WORKER
    assert "no cronworker is connected" in refused.stderr and "--here" in refused.stderr
    assert not JobState.objects.exists()
    here = manage("cronjob", "trigger", "--here", "quick_scheduled")
    assert here.returncode == exitcodes.OK, here.stderr
    assert "(manual run)" in here.stdout
    (run,) = JobRun.objects.filter(job="quick_scheduled")
    assert run.manual and run.tick is None and run.status == RunStatus.SUCCEEDED


@pytest.mark.slow
def test_two_workers_run_each_request_once_within_a_second_and_record_paused_ticks(
    worker_jobs: None, spawn: Any, manage: Any, raw_connect: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``RECORD_SKIPS`` each worker records the paused job's ticks it skipped."""
    recording = {"JOBS_MODULE": "worker_tasks", "RECORD_SKIPS": True}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(recording))
    observer = raw_connect()
    control.pause("every2_0", by="ops", reason="maintenance")
    workers = [spawn("cronworker", "yearly_manual", "every2_0", "--grace", "5") for _ in range(2)]
    wait_for_workers(observer, workers)

    triggered = manage("cronjob", "trigger", "yearly_manual")
    assert triggered.returncode == 0, triggered.stderr
    assert "one of the 2 connected cronworker(s)" in triggered.stdout
    wait_for(lambda: Marker.objects.filter(job="yearly_manual").count() == 1)

    latencies = []
    unfinished = JobRun.objects.filter(job="yearly_manual", finished__isnull=True)
    for number in range(2, 7):
        # The last body has written its marker, but its run goes on until its row is
        # finished: a request before that is refused as one during the body is (skipped).
        wait_for(lambda: not unfinished.exists())
        requested = control.request_run("yearly_manual", by="test")
        run = wait_for(lambda at=requested: manual_run_since(at), timeout=10)
        latencies.append((run.started - requested).total_seconds())
        try:
            wait_for(lambda n=number: Marker.objects.filter(job="yearly_manual").count() == n)
        except AssertionError:  # say what the history and the workers hold (CI saw it once)
            for worker in workers:
                worker.terminate()
            said = [worker.communicate(timeout=30)[1] for worker in workers]
            rows = list(JobRun.objects.values("id", "job", "status", "pid", "error"))
            raise AssertionError(f"request {number}: no body; {rows}; said: {said}") from None
    time.sleep(0.5)  # a second claim of any request would have started by now
    # The paused job's next 2-second tick has come and gone, and is recorded.
    wait_for(lambda: JobRun.objects.filter(job="every2_0").exists(), timeout=10)
    for worker in workers:
        worker.terminate()
    outputs = [worker.communicate(timeout=30) for worker in workers]
    print(f"\nrun-now latency (LISTEN/NOTIFY), s: {sorted(round(x, 3) for x in latencies)}")

    runs = JobRun.objects.filter(job="yearly_manual")
    assert runs.count() == 6 and Marker.objects.filter(job="yearly_manual").count() == 6
    assert all(run.manual and run.tick is None for run in runs)
    assert all(run.status == RunStatus.SUCCEEDED for run in runs)
    assert max(latencies) < 1.0, latencies
    assert statistics.median(latencies) < 0.3, latencies
    for _out, err in outputs:
        assert "listening for run-now requests (LISTEN/NOTIFY)" in err, err
    # The paused job's ticks were recorded, by each worker, never run.
    assert not Marker.objects.filter(job="every2_0").exists()
    paused = JobRun.objects.filter(job="every2_0")
    assert paused.exists() and {run.status for run in paused} == {RunStatus.SKIPPED_PAUSED}
    assert all(run.tick is not None and "maintenance" in run.error for run in paused)


@pytest.mark.slow
@pytest.mark.pgbouncer
def test_behind_a_transaction_pooler_workers_poll_for_requests(
    worker_jobs: None, spawn: Any, raw_connect: Any, pgbouncer_transaction: PgBouncer
) -> None:
    observer = raw_connect()
    worker = spawn("cronworker", "yearly_manual", url=bouncer_url(pgbouncer_transaction))
    wait_for_workers(observer, [worker])
    time.sleep(0.5)  # past its first look for requests
    latencies = []
    for number in range(1, 4):
        requested = control.request_run("yearly_manual", by="test")
        run = wait_for(lambda at=requested: manual_run_since(at), timeout=10)
        latencies.append((run.started - requested).total_seconds())
        wait_for(lambda n=number: Marker.objects.filter(job="yearly_manual").count() == n)
    worker.terminate()
    out, err = worker.communicate(timeout=30)
    # PgBouncer keeps the server connection, still named after the worker, once the worker is
    # gone (the documented reason to point LOCK_DATABASE past it): end it, so that later tests
    # count only their own workers.
    observer.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE %s",
        (f"{PRESENCE_NAME}%",),
    )
    wait_for(lambda: workers_present(observer) == 0, timeout=5)
    print(f"\nrun-now latency (polling behind PgBouncer), s: {[round(x, 3) for x in latencies]}")
    assert "looks for run-now requests every 1 s" in err, err
    assert "; polling for run-now requests every 1 s and schedule changes every 5 s" in out, out
    assert max(latencies) < 2.0, latencies
    assert JobRun.objects.filter(job="yearly_manual", manual=True).count() == 3


def test_the_operate_view_needs_post_csrf_and_the_permission(
    django_user_model: Any, fresh_registry: None
) -> None:
    from django.contrib.auth.models import Permission
    from django.test import Client

    url = "/admin/django_advisory_cron/registeredjob/operate/"
    form = {"job": "quick_scheduled", "operation": "pause"}
    viewer = django_user_model.objects.create_user("viewer", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_registeredjob"))
    client = Client()
    client.force_login(viewer)
    assert client.post(url, form).status_code == 403
    jobs_page = client.get("/admin/django_advisory_cron/registeredjob/")
    assert jobs_page.status_code == 200 and b'value="pause"' not in jobs_page.content

    ops = django_user_model.objects.create_user("ops", is_staff=True)
    ops.user_permissions.add(
        *Permission.objects.filter(codename__in=["operate_job", "view_registeredjob"])
    )
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(ops)
    assert strict.post(url, form).status_code == 403  # no CSRF token
    client.force_login(ops)
    assert client.get(url).status_code == 405
    assert not JobState.objects.exists()
    done = client.post(url, {**form, "until": "yesterday"}, follow=True)
    assert b"is neither a duration" in done.content and not JobState.objects.exists()
    client.post(url, form)
    assert JobState.objects.get(job="quick_scheduled").paused_by == "ops"


@pytest.mark.usefixtures("worker_jobs", "fresh_registry")
def test_run_now_on_a_job_whose_lock_is_held_elsewhere_says_by_whom(
    spawn: Any, raw_connect: Any, django_user_model: Any
) -> None:
    """The admin says at the click that the lock is held, and by whom; the worker's skip row
    names the holder too, as the Held locks page knows it."""
    from tests.admin_users import logged_in

    @locked_task(name="yearly_manual", schedule="0 0 1 1 *")
    def yearly_manual() -> None: ...

    holder = raw_connect(application_name="stuck-report")
    holder.execute(f"SELECT pg_advisory_lock({yearly_manual.key.sql})", yearly_manual.key.params)
    pid = holder.info.backend_pid
    worker = spawn("cronworker", "yearly_manual")
    wait_for_workers(raw_connect(), [worker])
    operator = logged_in(django_user_model, "ops", ["view_registeredjob", "operate_job"])
    pressed = operator.post(
        "/admin/django_advisory_cron/registeredjob/operate/",
        {"job": "yearly_manual", "operation": "run"},
        follow=True,
    )
    said = [str(message) for message in pressed.context["messages"]]
    print(said)
    assert len(said) == 1 and f"pid {pid}" in said[0] and "stuck-report" in said[0], said
    assert "held" in said[0] and "starts it within about a second" not in said[0]
    run = wait_for(lambda: JobRun.objects.filter(job="yearly_manual", manual=True).first())
    worker.terminate()
    worker.communicate(timeout=30)
    print(run.status, repr(run.error))
    assert run.status == RunStatus.SKIPPED_LOCKED
    assert f"pid {pid}" in run.error and "stuck-report" in run.error, run.error
    assert not Marker.objects.filter(job="yearly_manual").exists()


@pytest.mark.usefixtures("worker_jobs", "fresh_registry")
def test_run_now_while_an_earlier_run_is_alive_names_that_run(
    spawn: Any, raw_connect: Any, django_user_model: Any
) -> None:
    """A run of the job is going on in another process (``runlocked``): the admin names it at
    the click, and the worker's skip row names it too."""
    from tests.admin_users import logged_in

    @locked_task(name="every2_slow", every=2)
    def every2_slow() -> None: ...

    runner = spawn("runlocked", "every2_slow")
    running = wait_for(lambda: JobRun.objects.filter(job="every2_slow", status="running").first())
    worker = spawn("cronworker", "every2_slow")
    wait_for_workers(raw_connect(), [worker])
    operator = logged_in(django_user_model, "ops", ["view_registeredjob", "operate_job"])
    pressed = operator.post(
        "/admin/django_advisory_cron/registeredjob/operate/",
        {"job": "every2_slow", "operation": "run"},
        follow=True,
    )
    said = " ".join(str(message) for message in pressed.context["messages"])
    at = f"on host {running.host} pid {runner.pid}"
    assert f"held now by the run {at}" in said, said
    skip = wait_for(
        lambda: (
            JobRun.objects.filter(job="every2_slow", manual=True).exclude(status="running").first()
        )
    )
    for process in (worker, runner):
        process.terminate()
        process.communicate(timeout=30)
    assert skip.status == RunStatus.SKIPPED_LOCKED
    assert f"still alive (its lease has not expired): run {running.pk} {at}" in skip.error, (
        skip.error
    )
