"""``cronworker`` isolation and limits, in real processes with real signals: runs in child
processes, hard timeouts, skipped overlapping ticks, and shutdown with runs in processes."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
from datetime import timedelta
from typing import Any

import pytest

from django_advisory_cron import exitcodes, locked_task
from django_advisory_cron.core.keys import job_key
from django_advisory_cron.models import JobRun, RunStatus
from tests.jobsapp.models import Marker
from tests.pglocks import holders
from tests.waiting import wait_for

pytestmark = pytest.mark.usefixtures("transactional_db")


@pytest.fixture
def isolation_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = {"JOBS_MODULE": "isolation_tasks", "MAX_SKEW": 0.5}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def stop(worker: subprocess.Popen[str]) -> tuple[str, str]:
    worker.send_signal(signal.SIGTERM)
    out, err = worker.communicate(timeout=60)
    assert worker.returncode == exitcodes.SIGTERM, err
    return out, err


def runs(job: str, **filters: Any) -> list[JobRun]:
    return list(JobRun.objects.filter(job=job, **filters).order_by("tick", "id"))


@pytest.mark.slow
def test_a_job_over_its_timeout_is_stopped_and_recorded_and_the_next_tick_runs(
    isolation_jobs: None, spawn: Any, raw_connect: Any
) -> None:
    observer = raw_connect()
    worker = spawn("cronworker", "sleeps_past_timeout", "--grace", "5")
    wait_for(lambda: len(runs("sleeps_past_timeout", status=RunStatus.TIMED_OUT)) >= 2, 40)
    _out, err = stop(worker)
    timed_out = runs("sleeps_past_timeout", status=RunStatus.TIMED_OUT)
    first, second = timed_out[:2]
    assert first.tick is not None and second.tick is not None and second.tick > first.tick
    for run in timed_out:
        assert run.error == "stopped after its timeout of 1 s" and run.finished is not None
        assert run.pid != worker.pid  # a job with a timeout runs in a process of its own
        assert not alive(run.pid)
        # Stopped by its own alarm at about one second, not by the worker's backstop.
        assert (run.finished - run.started).total_seconds() < 4
    assert "timed out" in err
    assert not holders(observer, job_key("sleeps_past_timeout"))
    # The body started in the child that the row names.
    pids = set(Marker.objects.filter(job="sleeps_past_timeout").values_list("pid", flat=True))
    assert {run.pid for run in timed_out} <= pids


@pytest.mark.slow
def test_a_process_that_ignores_its_timeout_is_killed_and_recorded_by_the_worker(
    isolation_jobs: None, spawn: Any, raw_connect: Any
) -> None:
    observer = raw_connect()
    worker = spawn("cronworker", "ignores_timeout", "--grace", "5")
    wait_for(lambda: Marker.objects.filter(job="ignores_timeout").exists())
    (child,) = Marker.objects.filter(job="ignores_timeout").values_list("pid", flat=True)
    wait_for(lambda: runs("ignores_timeout", status=RunStatus.TIMED_OUT), 30)
    _out, err = stop(worker)
    run = runs("ignores_timeout", status=RunStatus.TIMED_OUT)[0]
    assert run.pid == child and not alive(child)
    assert "was killed by cronworker" in run.error
    assert "did not stop after SIGTERM; killing it" in err
    # The worker counts from the process's start (after its tick), not from the row's
    # ``started``, which the child writes once Django is up: SIGTERM came 5 s after the
    # 1 s timeout, SIGKILL 5 s later.
    assert run.tick is not None and run.finished is not None
    assert 10.5 < (run.finished - run.tick).total_seconds() < 25
    # The killed process's backend let the lock go, and nothing else is left running.
    wait_for(lambda: not holders(observer, job_key("ignores_timeout")), timeout=5)
    assert not runs("ignores_timeout", status=RunStatus.RUNNING)


@pytest.mark.slow
def test_process_isolation_runs_each_job_in_a_child_process(
    isolation_jobs: None, spawn: Any
) -> None:
    worker = spawn("cronworker", "records_its_pid", "--isolation", "process", "--grace", "5")
    wait_for(lambda: len(runs("records_its_pid", status=RunStatus.SUCCEEDED)) >= 2, 20)
    out, _err = stop(worker)
    succeeded = runs("records_its_pid", status=RunStatus.SUCCEEDED)
    markers = set(Marker.objects.filter(job="records_its_pid").values_list("pid", flat=True))
    assert {run.pid for run in succeeded} <= markers
    assert worker.pid not in markers
    assert len({run.pid for run in succeeded}) == len(succeeded)  # a fresh process per run
    assert f"{len(succeeded)} ran" in out


@pytest.mark.slow
def test_a_tick_that_comes_while_the_previous_run_goes_on_is_skipped_and_recorded(
    isolation_jobs: None, spawn: Any
) -> None:
    name = "three_seconds_every_second"
    worker = spawn("cronworker", name, "--grace", "5")
    wait_for(lambda: len(runs(name, status=RunStatus.SUCCEEDED)) >= 2, 30)
    out, _err = stop(worker)
    succeeded = runs(name, status=RunStatus.SUCCEEDED)
    skipped = runs(name, status=RunStatus.SKIPPED_LOCKED)
    assert len(skipped) >= 2
    by_id = {run.id: run for run in succeeded}
    for run in skipped:
        # Recorded by the worker itself, naming the run that was still going.
        assert run.pid == worker.pid and run.finished is not None
        previous = int(run.error.removeprefix("its previous run (run ").split(")")[0])
        assert run.error == f"its previous run (run {previous}) is still running"
        finished = by_id[previous].finished
        assert finished is not None and by_id[previous].started <= run.started <= finished
    # Never two at once: each run ended before the next one started.
    for earlier, later in itertools.pairwise(succeeded):
        assert earlier.finished is not None and earlier.finished <= later.started
    assert Marker.objects.filter(job=name).count() == len(succeeded)
    assert f"{len(skipped)} tick(s) skipped because the job's previous run" in out


@pytest.mark.slow
def test_sigterm_stops_runs_in_child_processes_within_the_grace(
    isolation_jobs: None, spawn: Any, raw_connect: Any
) -> None:
    observer = raw_connect()
    worker = spawn("cronworker", "sleeps_a_minute", "--isolation", "process", "--grace", "2")
    wait_for(lambda: Marker.objects.filter(job="sleeps_a_minute").exists())
    (child,) = Marker.objects.filter(job="sleeps_a_minute").values_list("pid", flat=True)
    _out, err = stop(worker)
    (run,) = runs("sleeps_a_minute")
    assert run.status == RunStatus.INTERRUPTED and run.finished is not None
    assert run.finished - run.started < timedelta(seconds=30)  # stopped, not slept out (60 s)
    assert run.pid == child and not alive(child)
    assert "1 run(s) in child processes were still going" in err
    assert not holders(observer, job_key("sleeps_a_minute"))


def test_runlocked_stops_a_transaction_scoped_job_at_its_timeout(
    isolation_jobs: None, manage: Any, raw_connect: Any
) -> None:
    observer = raw_connect()
    result = manage("runlocked", "times_out_in_transaction")
    assert result.returncode == exitcodes.TIMED_OUT, result.stderr
    (run,) = runs("times_out_in_transaction")
    assert run.status == RunStatus.TIMED_OUT
    # Stopped, not slept out: the body sleeps 30 s (the run's own times, not the process's,
    # whose start on a busy machine is no part of it).
    assert run.finished is not None and run.finished - run.started < timedelta(seconds=15)
    assert result.stderr.strip().splitlines()[-1] == (
        f"runlocked: times_out_in_transaction: stopped after its timeout of 1 s (run {run.id} "
        "recorded as timed out; lock released)"
    )
    assert not Marker.objects.filter(job="times_out_in_transaction").exists()  # rolled back
    assert not holders(observer, job_key("times_out_in_transaction"))


def test_bad_isolation_and_timeout_are_refused_in_one_line(
    isolation_jobs: None, manage: Any, fresh_registry: None
) -> None:
    bogus = manage("cronworker", "--isolation", "bogus")
    assert bogus.returncode == exitcodes.USAGE
    assert bogus.stderr.strip() == (
        "cronworker: --isolation must be thread or process, not 'bogus'"
    )
    for timeout in (0, -1, float("nan"), True):
        with pytest.raises(ValueError, match="timeout must be a finite number of seconds > 0"):
            locked_task(name="bad_timeout", timeout=timeout)(lambda: None)
