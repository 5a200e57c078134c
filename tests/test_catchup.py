"""Missed ticks, per job: ``catch_up`` and ``max_lateness``, decided from the run history.

The worker tests run a real [Worker][django_advisory_cron.worker.loop.Worker] against real
PostgreSQL history, in this process: ``OnePass`` is the worker with its sleep replaced by a
stop, so it makes one pass over its due jobs (on the database clock) and waits for their runs.
The last test restarts real ``cronworker`` processes.
"""

from __future__ import annotations

import itertools
import json
import logging
import signal
import time
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db.models import Count
from django.test import override_settings

from django_advisory_cron import exitcodes, locked_task
from django_advisory_cron.db.execute import database_now
from django_advisory_cron.jobs.job import Job
from django_advisory_cron.models import JobRun, RunStatus
from django_advisory_cron.worker.fleet import PRESENCE_NAME
from django_advisory_cron.worker.loop import Worker
from tests.jobsapp.models import Marker
from tests.unit.test_catchup import HOUR
from tests.waiting import wait_for

# -- cronworker at start-up: the ticks since the job's latest recorded tick ------------------


class OnePass(Worker):
    """A real worker that stops where it would sleep, once the runs it started have ended:
    one pass over its due jobs (a worker that is stopped starts no further catch-up run)."""

    def _sleep(self, seconds: float) -> None:
        for future in list(self._running.values()):
            future.result()
        self.stop()


def hour_of(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def succeeded_ticks(name: str) -> list[datetime]:
    runs = JobRun.objects.filter(job=name, status=RunStatus.SUCCEEDED).order_by("started")
    return [run.tick for run in runs if run.tick is not None]


def hourly(name: str, **options: Any) -> Job[..., Any]:
    """An hourly interval job (ticks on the UTC hour) that leaves a marker per run."""

    def body() -> None:
        Marker.objects.create(job=name, pid=0)

    return locked_task(name=name, every=HOUR, **options)(body)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_registry")
@pytest.mark.parametrize(
    ("policy", "caught_up"),
    [("latest", [0]), ("all", [-2, -1, 0]), ("none", [])],
)
def test_a_worker_restarting_after_downtime_follows_the_jobs_policy(
    policy: str, caught_up: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    """Every replica was down for three ticks; the last recorded tick is three hours old."""
    job = hourly(f"restart_{policy}", catch_up=policy)
    latest = hour_of(database_now("default"))
    last_recorded = latest - 3 * HOUR
    assert job.run(now=last_recorded).tick == last_recorded
    with caplog.at_level(logging.WARNING, logger="django_advisory_cron"):
        OnePass([job]).run()
    if hour_of(database_now("default")) != latest:
        pytest.skip("an hour boundary passed during the test")
    # In the order they ran ("all" runs them one after another, oldest first).
    assert succeeded_ticks(job.name) == [last_recorded] + [latest + n * HOUR for n in caught_up]
    assert Marker.objects.filter(job=job.name).count() == 1 + len(caught_up)
    assert f"job {job.name}: 3 missed tick(s)" in caplog.text
    assert f"catch_up={policy!r}" in caplog.text


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_registry")
def test_the_default_policy_is_the_catch_up_setting() -> None:
    job = hourly("restart_default")
    latest = hour_of(database_now("default"))
    job.run(now=latest - 2 * HOUR)
    with override_settings(ADVISORY_CRON={"CATCH_UP": "none"}):
        OnePass([job]).run()
    assert succeeded_ticks(job.name) == [latest - 2 * HOUR]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_registry")
def test_max_lateness_passes_over_the_ticks_that_are_too_old(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = database_now("default")
    latest = hour_of(now)
    # Just enough for the tick an hour before the latest: the two before it are too late.
    lateness = (now - (latest - HOUR)).total_seconds() + 600
    job = hourly("restart_late", catch_up="all", max_lateness=lateness)
    job.run(now=latest - 4 * HOUR)
    with caplog.at_level(logging.WARNING, logger="django_advisory_cron"):
        OnePass([job]).run()
    assert succeeded_ticks(job.name) == [latest - 4 * HOUR, latest - HOUR, latest]
    assert f"passes over 2 more than max_lateness={lateness:g}s late" in caplog.text


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_registry")
def test_a_job_with_no_recorded_tick_starts_with_its_next_tick(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The very first start: nothing from before the worker started runs, whatever the
    policy ("all" here), and nothing is reported missed."""
    job = hourly("first_start", catch_up="all")
    with caplog.at_level(logging.WARNING, logger="django_advisory_cron"):
        OnePass([job]).run()
    assert not JobRun.objects.filter(job=job.name).exists()
    assert "missed" not in caplog.text


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_registry")
def test_every_recorded_tick_counts_skips_included() -> None:
    """A tick recorded only as skipped (its previous run was still going, or the job was
    paused) was decided, not missed: a restart does not run it again."""
    job = hourly("skipped_latest", catch_up="all")
    latest = hour_of(database_now("default"))
    job.run(now=latest - 2 * HOUR)
    JobRun.objects.create(
        job=job.name,
        tick=latest,
        host="elsewhere",
        pid=1,
        started=database_now("default"),
        finished=database_now("default"),
        status=RunStatus.SKIPPED_LOCKED,
    )
    OnePass([job]).run()
    if hour_of(database_now("default")) != latest:
        pytest.skip("an hour boundary passed during the test")
    assert succeeded_ticks(job.name) == [latest - 2 * HOUR]


class StartedAnHourAgo(OnePass):
    """A worker whose start-up reading of the clock is an hour old by its first pass."""

    def _first_ticks(self, now: datetime) -> dict[str, datetime]:
        return super()._first_ticks(now - HOUR)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_registry")
def test_a_tick_after_the_worker_started_is_on_time_not_missed() -> None:
    """``catch_up="none"`` passes over what was missed before the start, not a tick that came
    between the start and the first pass."""
    job = hourly("slow_start", catch_up="none")
    latest = hour_of(database_now("default"))
    job.run(now=latest - 3 * HOUR)
    StartedAnHourAgo([job]).run()
    if hour_of(database_now("default")) != latest:
        pytest.skip("an hour boundary passed during the test")
    assert succeeded_ticks(job.name) == [latest - 3 * HOUR, latest]


# -- cronworker asleep: the ticks it slept through -------------------------------------------


class SleepsThrough(Worker):
    """A worker whose first sleep lasts ``nap`` seconds; meanwhile another replica runs the
    second tick it sleeps through (``other_tick``). Then one more pass, and it stops."""

    def __init__(self, job: Job[..., Any], nap: float) -> None:
        super().__init__([job])
        self.job, self.nap = job, nap
        self.other_tick: datetime | None = None

    def _sleep(self, seconds: float) -> None:
        # This worker's runs end first: a run of it still going would hold the job's lock,
        # and "another replica" would skip its tick instead of running it.
        for future in list(self._running.values()):
            future.result()
        if self.other_tick is not None:
            self.stop()
            return
        schedule = self.job.schedule
        assert schedule is not None
        self.other_tick = schedule.next_tick(schedule.next_tick(database_now("default")))
        # "Another replica", on the tick's own time.
        assert self.job.run(now=self.other_tick).ran
        time.sleep(self.nap)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_registry")
def test_a_worker_that_slept_through_ticks_runs_those_nobody_recorded() -> None:
    """Asleep for over five half-second ticks; another replica ran the second. The worker
    then asks the history and runs (``"all"``) the ticks after that one, each once."""

    def body() -> None:
        Marker.objects.create(job="slept", pid=0)

    job = locked_task(name="slept", every=0.5, catch_up="all")(body)
    worker = SleepsThrough(job, nap=2.6)
    worker.run()
    other, step = worker.other_tick, timedelta(seconds=0.5)
    assert other is not None
    ticks = succeeded_ticks("slept")
    after = [tick for tick in ticks if tick > other]
    assert other - step not in ticks  # slept through, before the other replica's tick
    assert after == [other + step * n for n in range(1, len(after) + 1)], (other, ticks)
    assert len(after) >= 3
    assert Marker.objects.filter(job="slept").count() == len(ticks)


# -- django-q2 deliveries follow the job's own policy ----------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_registry")
@pytest.mark.parametrize(("policy", "runs"), [("all", 4), ("none", 0)])
def test_a_late_django_q_delivery_follows_the_jobs_own_policy(policy: str, runs: int) -> None:
    q2 = pytest.importorskip("django_advisory_cron.contrib.django_q")
    job = hourly(f"q2_{policy}", catch_up=policy)
    latest = hour_of(database_now("default"))
    with override_settings(ADVISORY_CRON={"CATCH_UP": "latest"}):
        summary = q2.run_scheduled(job.name, intended=(latest - 3 * HOUR).isoformat())
    if hour_of(database_now("default")) != latest:
        pytest.skip("an hour boundary passed during the test")
    assert len(summary["runs"]) == runs
    assert len(summary["passed_over"]) == 4 - runs
    assert Marker.objects.filter(job=job.name).count() == runs


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_registry")
def test_a_django_q_delivery_later_than_max_lateness_is_passed_over() -> None:
    """On time (no later tick has passed) but picked up too late: passed over, logged."""
    q2 = pytest.importorskip("django_advisory_cron.contrib.django_q")
    now = database_now("default")
    latest = hour_of(now)
    late = (now - latest).total_seconds()
    if late < 2:
        pytest.skip("too close to the hour to be late")
    job = hourly("q2_max_lateness", max_lateness=late / 2)
    summary = q2.run_scheduled(job.name, intended=latest.isoformat())
    assert summary["runs"] == [] and summary["passed_over"] == [latest.isoformat()]
    on_time = hourly("q2_on_time", max_lateness=late + 60)
    ran = q2.run_scheduled(on_time.name, intended=latest.isoformat())
    assert [run["status"] for run in ran["runs"]] == ["succeeded"]


# -- a rolling restart of real cronworker processes ------------------------------------------


def ticks_run(name: str) -> list[datetime]:
    return sorted(
        tick
        for tick in JobRun.objects.filter(job=name, status=RunStatus.SUCCEEDED).values_list(
            "tick", flat=True
        )
        if tick is not None
    )


def history(name: str) -> list[tuple[str, str, int]]:
    """``(tick, status, pid)`` of each row of the job, by tick."""
    rows = JobRun.objects.filter(job=name).order_by("tick", "started")
    return [(f"{row.tick:%H:%M:%S}" if row.tick else "-", row.status, row.pid) for row in rows]


def contiguous(ticks: list[datetime]) -> bool:
    return all(
        later - earlier == timedelta(seconds=2) for earlier, later in itertools.pairwise(ticks)
    )


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_rolling_restart_runs_the_missed_ticks_by_each_jobs_policy(
    spawn: Any, raw_connect: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Worker A runs three two-second jobs, stops; every replica is down for over four
    seconds; worker B starts. ``latest``: the tick missed last runs once, at B's start, the
    earlier ones not; ``all``: every missed tick runs; ``none``: B goes on with its next tick.
    No tick runs twice."""
    monkeypatch.setenv(
        "ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "catchup_tasks", "MAX_SKEW": 0.5})
    )
    observer = raw_connect()
    names = [f"catchup_{policy}" for policy in ("latest", "all", "none")]
    first = spawn("cronworker", "--grace", "5")
    wait_for(lambda: all(ticks_run(name) for name in names))
    first.send_signal(signal.SIGTERM)
    _out, err = first.communicate(timeout=30)
    assert first.returncode == exitcodes.SIGTERM, err
    before = {name: ticks_run(name)[-1] for name in names}
    # Every replica down: at least two ticks of each job pass, on the database's clock.
    (down,) = observer.execute("SELECT now()").fetchone()
    wait_for(
        lambda: (
            observer.execute("SELECT now() - %s", (down,)).fetchone()[0] >= timedelta(seconds=4.2)
        ),
        interval=0.1,
    )
    second = spawn("cronworker", "--grace", "5")
    row = None

    def second_present() -> bool:
        nonlocal row
        row = observer.execute(
            "SELECT backend_start FROM pg_stat_activity WHERE application_name LIKE %s",
            (f"{PRESENCE_NAME} %:{second.pid}",),
        ).fetchone()
        return row is not None

    wait_for(second_present)
    assert row is not None
    restart: datetime = row[0]
    wait_for(lambda: all(ticks_run(name)[-1] > restart + timedelta(seconds=2) for name in names))
    second.send_signal(signal.SIGTERM)
    _out, err = second.communicate(timeout=30)
    assert second.returncode == exitcodes.SIGTERM, err

    for name in names:
        runs = JobRun.objects.filter(job=name, status=RunStatus.SUCCEEDED)
        assert not runs.values("tick").annotate(n=Count("id")).filter(n__gt=1).exists()
        assert Marker.objects.filter(job=name).count() == runs.count()
    # Ticks after the last one worker A ran, per job:
    after = {name: [t for t in ticks_run(name) if t > before[name]] for name in names}
    rows = {name: history(name) for name in names}  # for the failure messages
    # No tick after B started is lost: each ran, or (a busy host) found the job's previous run
    # in B still holding its lock and was recorded as skipped by B, as the docs promise.
    overlapped = {
        name: set(
            tick
            for tick in JobRun.objects.filter(
                job=name, status=RunStatus.SKIPPED_LOCKED, pid=second.pid
            ).values_list("tick", flat=True)
            if tick is not None
        )
        for name in names
    }
    handled = {name: sorted({*after[name], *overlapped[name]}) for name in names}
    assert all(contiguous(ticks) for ticks in handled.values()), rows
    latest, every, none = (after[name] for name in names)
    # "all": no gap at all.
    assert every[0] == before["catchup_all"] + timedelta(seconds=2), (before, rows)
    # "latest": a gap of at least one passed-over tick, then the last tick before B started.
    assert latest[0] - before["catchup_latest"] >= timedelta(seconds=4), (before, rows)
    catch_up_run = JobRun.objects.get(job="catchup_latest", tick=latest[0], status="succeeded")
    assert catch_up_run.pid == second.pid and catch_up_run.started > restart
    # The last tick before B looked (B may take a moment after connecting, on a busy host).
    assert restart - timedelta(seconds=2) < latest[0] <= catch_up_run.started, (restart, rows)
    assert "job catchup_latest: " in err and "catch_up='latest' runs" in err
    # "none": nothing from before B started.
    assert none[0] > restart, (restart, rows)
