"""A fleet of ``cronworker`` processes under stress: many jobs, a worker killed mid-job, a
rolling restart, clocks skewed by ``faketime``, a lost database connection, a scheduler
running in a background thread; and how ``cronstatus`` and the admin see live workers."""

from __future__ import annotations

import importlib
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db.models import Count

from django_advisory_cron import exitcodes
from django_advisory_cron.core.keys import job_key
from django_advisory_cron.models import JobRun, RunStatus
from django_advisory_cron.worker.fleet import PRESENCE_NAME
from django_advisory_cron.worker.loop import start_worker
from tests.jobsapp.models import Marker
from tests.pglocks import holders
from tests.waiting import presence_pids, wait_for, workers_present

pytestmark = pytest.mark.usefixtures("transactional_db")

LEASE = 1.5
FLEET = {"JOBS_MODULE": "worker_tasks", "MAX_SKEW": 0.5, "HEARTBEAT": 0.5, "LEASE": LEASE}
FAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


@pytest.fixture
def fleet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(FLEET))


def stop(*workers: subprocess.Popen[str]) -> list[str]:
    """SIGTERM the workers, wait for them, return their stderr."""
    for worker in workers:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
    errors = []
    for worker in workers:
        _out, err = worker.communicate(timeout=30)
        errors.append(err)
    return errors


def db_now(observer: Any) -> datetime:
    value: datetime = observer.execute("SELECT now()").fetchone()[0]
    return value


def assert_each_tick_once(names: Iterable[str]) -> None:
    taking = JobRun.objects.filter(job__in=list(names), tick__isnull=False)
    doubled = (
        taking.exclude(status__in=[RunStatus.SKIPPED_LOCKED, RunStatus.SKIPPED_TICK])
        .exclude(status=RunStatus.INTERRUPTED)
        .values("job", "tick")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
    )
    assert not doubled.exists(), list(doubled)


def succeeded_ticks(name: str) -> list[datetime]:
    runs = JobRun.objects.filter(job=name, status=RunStatus.SUCCEEDED, tick__isnull=False)
    return sorted(tick for tick in runs.values_list("tick", flat=True) if tick is not None)


def wait_for_ticks(names: Iterable[str], beyond: datetime, timeout: float = 60) -> None:
    """Wait until every job in ``names`` has succeeded for a tick at or after ``beyond``."""
    names = list(names)
    wait_for(
        lambda: (
            JobRun.objects.filter(job__in=names, status=RunStatus.SUCCEEDED, tick__gte=beyond)
            .values("job")
            .distinct()
            .count()
            == len(names)
        ),
        timeout=timeout,
        interval=0.2,
    )


def assert_no_gap(ticks: list[datetime], start: datetime, end: datetime) -> None:
    """Every two-second tick in ``[start, end]`` has a successful run."""
    inside = [tick for tick in ticks if start <= tick <= end]
    assert inside, (start, end, ticks)
    gaps = {(later - earlier).total_seconds() for earlier, later in itertools.pairwise(inside)}
    assert gaps <= {2.0}, (start, end, inside)
    assert (inside[0] - start).total_seconds() < 2 and (end - inside[-1]).total_seconds() < 2


@pytest.mark.slow
def test_three_workers_twenty_jobs_twelve_seconds_each_tick_once(
    fleet: None, spawn: Any, raw_connect: Any
) -> None:
    observer = raw_connect()
    names = [f"every2_{number}" for number in range(20)]
    workers = [spawn("cronworker", *names, "--grace", "5") for _ in range(3)]
    wait_for(lambda: workers_present(observer) == 3)
    started = db_now(observer)
    wait_for_ticks(names, started + timedelta(seconds=12))
    ended = db_now(observer)
    errors = stop(*workers)
    assert [worker.returncode for worker in workers] == [exitcodes.SIGTERM] * 3, errors
    assert_each_tick_once(names)
    # Each body ran once per recorded success.
    runs = JobRun.objects.filter(job__in=names, status=RunStatus.SUCCEEDED)
    assert Marker.objects.filter(job__in=names).count() == runs.count()
    for name in names:
        assert_no_gap(
            succeeded_ticks(name), started + timedelta(seconds=2), ended - timedelta(seconds=2)
        )
    wins = Counter(Marker.objects.filter(job__in=names).values_list("pid", flat=True))
    assert len(wins) == 3, wins  # every worker won some ticks
    assert min(wins.values()) >= runs.count() // 10, wins


#: A worker's stop line: the ticks it skipped because another replica had them, and how many
#: of those it saw claimed before trying their locks (the rest its claims lost).
SKIPPED = re.compile(
    r"(\d+) skipped \(another replica had them; (\d+) seen claimed before trying\)"
)


def losing_attempts(stdout: str) -> int:
    """Claims of a tick that another replica had, by one worker, read from its stop line."""
    found = SKIPPED.search(stdout)
    assert found is not None, stdout
    return int(found[1]) - int(found[2])


@pytest.mark.slow
def test_each_tick_is_tried_by_one_worker_and_a_stopped_workers_share_by_the_others(
    fleet: None, spawn: Any, raw_connect: Any
) -> None:
    """Each job-tick is claimed by the worker it is dealt to; the others look whether it is
    still unclaimed before trying its lock, and claim only what is. Measured here (three
    workers, ten jobs every 2 s, one killed after a few ticks; the two survivors' stop lines):
    before, every worker claimed every job due, and the survivors' claims lost 109 times for
    their 71 runs (about (R - 1) x their runs); after, 6 times for 80 runs (the first tick,
    before each worker has seen the others, and the tick after the kill, whose dead share both
    survivors claim). The killed worker's share still runs once per tick, through the others,
    from the tick after its lease."""
    observer = raw_connect()
    names = [f"every2_{number}" for number in range(10)]
    workers = [spawn("cronworker", *names, "--grace", "5", "-v", "0") for _ in range(3)]
    wait_for(lambda: workers_present(observer) == 3)
    started = db_now(observer)
    wait_for_ticks(names, started + timedelta(seconds=6))
    victim, *survivors = workers
    victim.send_signal(signal.SIGKILL)
    killed = db_now(observer)
    victim.communicate(timeout=10)
    wait_for(lambda: workers_present(observer) == 2)
    wait_for_ticks(names, killed + timedelta(seconds=LEASE + 8))
    ended = db_now(observer)
    outputs = []
    for worker in survivors:
        worker.send_signal(signal.SIGTERM)
    for worker in survivors:
        out, err = worker.communicate(timeout=30)
        assert worker.returncode == exitcodes.SIGTERM, err
        outputs.append(out)
    assert_each_tick_once(names)
    after = killed + timedelta(seconds=LEASE + 2)
    for name in names:
        assert_no_gap(succeeded_ticks(name), started + timedelta(seconds=2), killed)
        assert_no_gap(succeeded_ticks(name), after, ended - timedelta(seconds=2))
    # After the kill the survivors ran every job, the killed worker's share included.
    late = JobRun.objects.filter(job__in=names, status=RunStatus.SUCCEEDED, tick__gte=after)
    assert set(late.values_list("pid", flat=True)) == {worker.pid for worker in survivors}
    assert set(late.values_list("job", flat=True)) == set(names)
    runs = JobRun.objects.filter(job__in=names, status=RunStatus.SUCCEEDED)
    mine = runs.filter(pid__in=[worker.pid for worker in survivors]).count()
    lost = sum(losing_attempts(out) for out in outputs)
    # Before: every worker tried every job due, so its claims lost about (R - 1) x its runs.
    assert lost <= mine // 4, (lost, mine, outputs)


def test_kill_9_of_a_worker_mid_job_loses_no_tick_after_the_lease(
    fleet: None, spawn: Any, raw_connect: Any
) -> None:
    observer = raw_connect()
    workers = [spawn("cronworker", "every2_work", "--grace", "1") for _ in range(2)]
    wait_for(lambda: workers_present(observer) == 2)
    wait_for(lambda: JobRun.objects.filter(job="every2_work", status="running").exists())
    victim_run = JobRun.objects.get(job="every2_work", status="running")
    (victim,) = [worker for worker in workers if worker.pid == victim_run.pid]
    (survivor,) = [worker for worker in workers if worker is not victim]
    victim.send_signal(signal.SIGKILL)
    killed = db_now(observer)
    victim.communicate(timeout=10)
    wait_for_ticks(["every2_work"], killed + timedelta(seconds=LEASE + 6))
    ended = db_now(observer)
    stop(survivor)
    assert survivor.returncode == exitcodes.SIGTERM
    victim_run.refresh_from_db()
    # The dead worker's run was found and marked by the survivor once its lease ran out.
    assert victim_run.status == RunStatus.INTERRUPTED, victim_run.error
    assert f"pid {survivor.pid}" in victim_run.error
    assert_each_tick_once(["every2_work"])
    # Ticks while the dead run's lease was valid were skipped on purpose and recorded.
    lease_skips = JobRun.objects.filter(
        job="every2_work", status=RunStatus.SKIPPED_LOCKED, error__contains="still alive"
    )
    limit = killed + timedelta(seconds=LEASE + 2)
    assert all(skip.tick is not None and skip.tick <= limit for skip in lease_skips)
    # Every tick once the lease had run out ran, on the survivor.
    after = killed + timedelta(seconds=LEASE + 2)
    assert_no_gap(succeeded_ticks("every2_work"), after, ended - timedelta(seconds=2))
    assert not holders(observer, job_key("every2_work"))


@pytest.mark.slow
def test_a_rolling_restart_doubles_no_tick_and_misses_none(
    fleet: None, spawn: Any, raw_connect: Any
) -> None:
    observer = raw_connect()
    names = [f"every2_{number}" for number in range(5)]
    workers = [spawn("cronworker", *names, "--grace", "5") for _ in range(3)]
    wait_for(lambda: workers_present(observer) == 3)
    started = db_now(observer)
    for _round in range(3):  # replace each of the three, one a tick: two are always up
        wait_for_ticks(names, db_now(observer))
        old = workers.pop(0)
        stop(old)
        assert old.returncode == exitcodes.SIGTERM
        workers.append(spawn("cronworker", *names, "--grace", "5"))
        wait_for(lambda: workers_present(observer) == 3)
    wait_for_ticks(names, db_now(observer) + timedelta(seconds=2))
    ended = db_now(observer)
    stop(*workers)
    assert_each_tick_once(names)
    for name in names:
        assert_no_gap(
            succeeded_ticks(name), started + timedelta(seconds=2), ended - timedelta(seconds=2)
        )
    assert JobRun.objects.filter(job__in=names, status=RunStatus.FAILED).count() == 0


@pytest.mark.skipif(
    not FAKETIME.exists() and os.environ.get("CI") != "true",
    reason="Debian's faketime is not installed (CI installs it)",
)
def test_workers_with_skewed_clocks_run_each_tick_once(
    fleet: None, spawn: Any, raw_connect: Any, manage: Any
) -> None:
    observer = raw_connect()
    names = [f"every2_{number}" for number in range(5)]
    skews = ("-20s", "+20s")
    # A skewed host has a wrong wall clock; its monotonic clock still counts real seconds
    # (libfaketime's faked monotonic clock also breaks timed waits in its own preload).
    envs = [
        {"LD_PRELOAD": str(FAKETIME), "FAKETIME": skew, "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
        for skew in skews
    ]
    # The preload really moves the clock those processes see.
    for env, expected in zip(envs, (-20, 20), strict=True):
        seen = subprocess.run(
            [sys.executable, "-c", "import time; print(time.time())"],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            check=True,
        )
        assert abs(float(seen.stdout) - time.time() - expected) < 2
    workers = [spawn("cronworker", *names, "--grace", "5", env=env) for env in envs]
    wait_for(lambda: workers_present(observer) == 2)
    started = db_now(observer)
    wait_for_ticks(names, started + timedelta(seconds=6))
    ended = db_now(observer)
    errors = stop(*workers)
    assert [worker.returncode for worker in workers] == [exitcodes.SIGTERM] * 2, errors
    assert_each_tick_once(names)
    for name in names:
        assert_no_gap(
            succeeded_ticks(name), started + timedelta(seconds=2), ended - timedelta(seconds=2)
        )
    wins = set(Marker.objects.filter(job__in=names).values_list("pid", flat=True))
    assert wins == {worker.pid for worker in workers}


def test_a_worker_survives_losing_its_database_connection(
    fleet: None, spawn: Any, raw_connect: Any
) -> None:
    observer = raw_connect()
    worker = spawn("cronworker", "every2_0", "--grace", "2")
    wait_for(lambda: workers_present(observer) == 1)
    (cut_pid,) = observer.execute(
        "SELECT pid FROM pg_stat_activity WHERE application_name LIKE %s "
        "AND pg_terminate_backend(pid)",
        (f"{PRESENCE_NAME}%",),
    ).fetchone()
    cut = db_now(observer)
    # The worker reconnects at once, so a count of 0 may last too short to see: wait for
    # its presence from another backend instead.
    wait_for(lambda: presence_pids(observer) - {cut_pid}, timeout=15)
    wait_for(lambda: any(tick > cut + timedelta(seconds=2) for tick in succeeded_ticks("every2_0")))
    assert worker.poll() is None, "the worker exited"
    (err,) = stop(worker)
    assert worker.returncode == exitcodes.SIGTERM, err
    assert "lost the database" in err and "reconnecting" in err
    assert "Traceback" not in err


def test_start_worker_runs_the_scheduler_in_a_background_thread(
    fleet: None, spawn: Any, raw_connect: Any, settings: Any, fresh_registry: None
) -> None:
    """Two in-process schedulers beside one cronworker process: still one run per tick."""
    observer = raw_connect()
    names = ["every2_1", "every2_2"]
    settings.ADVISORY_CRON = {**settings.ADVISORY_CRON, **FLEET}
    module = sys.modules.get("tests.jobsapp.worker_tasks")
    if module is None:
        importlib.import_module("tests.jobsapp.worker_tasks")
    else:
        importlib.reload(module)  # fresh_registry dropped its jobs after an earlier test
    process = spawn("cronworker", *names, "--grace", "2")
    threads = [start_worker(names, grace=2) for _ in range(2)]
    wait_for(lambda: workers_present(observer) == 3)
    started = db_now(observer)
    wait_for_ticks(names, started + timedelta(seconds=6))
    ended = db_now(observer)
    for worker in threads:
        worker.close(timeout=10)
        assert worker.thread is not None and not worker.thread.is_alive()
    stop(process)
    assert process.returncode == exitcodes.SIGTERM
    assert_each_tick_once(names)
    for name in names:
        assert_no_gap(
            succeeded_ticks(name), started + timedelta(seconds=2), ended - timedelta(seconds=2)
        )
    ran = sum(worker.stats.ran for worker in threads)
    recorded_here = JobRun.objects.filter(
        job__in=names, status=RunStatus.SUCCEEDED, pid=os.getpid()
    ).count()
    assert ran == recorded_here


def test_cronstatus_fails_when_scheduled_jobs_have_too_few_live_workers(
    fleet: None, spawn: Any, raw_connect: Any, manage: Any
) -> None:
    observer = raw_connect()
    missing = manage("cronstatus", "--expect-workers", "1", "--job", "every2_0")
    assert missing.returncode == exitcodes.UNHEALTHY, missing.stderr
    assert "expected at least 1 live worker(s), none is running" in missing.stdout
    not_required = manage("cronstatus", "--job", "every2_0")
    assert not_required.returncode == 0, not_required.stdout
    worker = spawn("cronworker", "every2_0", "--grace", "1")
    wait_for(lambda: workers_present(observer) == 1)
    present = manage("cronstatus", "--expect-workers", "1", "--job", "every2_0", "--json")
    assert present.returncode == 0, present.stdout
    report = json.loads(present.stdout)
    assert report["healthy"] is True and report["workers"]["problem"] is None
    assert [item["pid"] for item in report["workers"]["live"]] == [worker.pid]
    text = manage("cronstatus", "--expect-workers", "1", "--job", "every2_0")
    assert f"1 cronworker(s) alive: {report['workers']['live'][0]['host']}:{worker.pid}" in (
        text.stdout
    )
    degraded = manage("cronstatus", "--expect-workers", "2", "--job", "every2_0")
    assert degraded.returncode == exitcodes.UNHEALTHY, degraded.stderr
    assert "1 of the 2 expected alive: degraded" in degraded.stdout
    assert "nothing runs" not in degraded.stdout
    stop(worker)
    bad = manage("cronstatus", "--expect-workers", "-1")
    assert bad.returncode == exitcodes.USAGE and "Traceback" not in bad.stderr


def test_the_jobs_page_lists_live_workers(
    fleet: None, spawn: Any, raw_connect: Any, admin_client: Any
) -> None:
    observer = raw_connect()
    url = "/admin/django_advisory_cron/registeredjob/"
    assert "No cronworker is running" in admin_client.get(url).content.decode()
    worker = spawn("cronworker", "every2_0", "--grace", "1")
    wait_for(lambda: workers_present(observer) == 1)
    page = admin_client.get(url).content.decode()
    assert 'class="worker-row"' in page and f"<td>{worker.pid}</td>" in page
    stop(worker)
