"""A job body that raises what a signal would raise (``SystemExit``, ``KeyboardInterrupt``,
``GeneratorExit``) has failed: its run is ``failed`` and takes its tick. Only a stop from
outside (a signal the process received, a worker shutting down, a dead process) is
``interrupted`` and gives the tick back."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from django_advisory_cron import exitcodes, locked_task, registry, signals
from django_advisory_cron.core.scopes import Scope
from django_advisory_cron.models import JobRun, RunStatus
from tests.jobsapp.models import Marker
from tests.waiting import wait_for, wait_for_workers

pytestmark = pytest.mark.usefixtures("transactional_db")

#: Jobs of ``tests/jobsapp/body_exit_tasks.py`` run by the worker fleet.
FLEET_JOBS = ["exits_3", "raises_interrupt", "exits_3_in_process", "exits_3_on_commit"]
TICKS = 3


@pytest.fixture
def body_exit_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = {"JOBS_MODULE": "body_exit_tasks", "MAX_SKEW": 0.5}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))


def _ran(job: str) -> list[JobRun]:
    """The runs of ``job`` that started its body (skips excluded)."""
    skips = [RunStatus.SKIPPED_LOCKED, RunStatus.SKIPPED_TICK, RunStatus.SKIPPED_PAUSED]
    return list(JobRun.objects.filter(job=job).exclude(status__in=skips).order_by("id"))


def _finished_ticks(job: str) -> int:
    return len({run.tick for run in _ran(job) if run.status != RunStatus.RUNNING})


def _stop(workers: list[subprocess.Popen[str]]) -> list[str]:
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    errors = []
    for worker in workers:
        _out, err = worker.communicate(timeout=60)
        assert worker.returncode == exitcodes.SIGTERM, err
        errors.append(err)
    return errors


@pytest.mark.slow
def test_a_body_that_exits_runs_once_per_tick_across_three_workers(
    body_exit_jobs: None, spawn: Any, raw_connect: Any
) -> None:
    workers = [spawn("cronworker", *FLEET_JOBS, "--grace", "10") for _ in range(3)]
    wait_for_workers(raw_connect(), workers)
    wait_for(lambda: all(_finished_ticks(job) >= TICKS for job in FLEET_JOBS), 60)
    # A SystemExit (or KeyboardInterrupt) of a body stopped no worker.
    assert [worker.poll() for worker in workers] == [None, None, None]
    errors = _stop(workers)
    report = {}
    for job in FLEET_JOBS:
        runs = _ran(job)
        executions = Marker.objects.filter(job=job).count()
        per_tick = Counter(run.tick for run in runs)
        report[job] = (executions, len(per_tick), Counter(run.status for run in runs))
    print(report)  # executions, ticks, statuses per job (visible with pytest -s)
    for job, (executions, ticks, statuses) in report.items():
        # Each tick ran exactly once: one body execution and one row per tick, failed.
        assert executions == ticks == statuses.total(), (job, report[job], errors)
        assert set(statuses) == {RunStatus.FAILED}, (job, report[job], errors)
    exited = JobRun.objects.filter(job="exits_3", status=RunStatus.FAILED).first()
    assert exited is not None and "SystemExit: 3" in exited.error
    log = "".join(errors)
    assert "exits_3 interrupted" not in log and "raises_interrupt interrupted" not in log


def test_runlocked_a_body_that_calls_sys_exit_is_a_failed_run(
    body_exit_jobs: None, manage: Any
) -> None:
    done = manage("runlocked", "exits_3_once")
    assert done.returncode == exitcodes.JOB_FAILED, done.stderr
    run = JobRun.objects.get(job="exits_3_once")
    assert run.status == RunStatus.FAILED and "SystemExit: 3" in run.error
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("runlocked: job 'exits_3_once' failed: SystemExit: 3, raised by")
    assert f"run {run.id} recorded as failed" in last and "SIGINT" not in done.stderr
    # Its tick (none here) is not given back: the next runlocked runs it anew, still once.
    assert Marker.objects.filter(job="exits_3_once").count() == 1


def test_runlocked_a_body_that_raises_generator_exit_is_a_failed_run(
    body_exit_jobs: None, manage: Any
) -> None:
    done = manage("runlocked", "generator_exit")
    assert done.returncode == exitcodes.JOB_FAILED, done.stderr
    run = JobRun.objects.get(job="generator_exit")
    assert run.status == RunStatus.FAILED and "GeneratorExit" in run.error
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("runlocked: job 'generator_exit' failed: GeneratorExit, raised by")


def test_runlocked_a_real_sigint_is_still_interrupted(body_exit_jobs: None, spawn: Any) -> None:
    process = spawn("runlocked", "sleeps")
    wait_for(lambda: JobRun.objects.filter(job="sleeps", status=RunStatus.RUNNING).exists())
    process.send_signal(signal.SIGINT)
    _out, err = process.communicate(timeout=30)
    assert process.returncode == exitcodes.SIGINT, err
    assert JobRun.objects.get(job="sleeps").status == RunStatus.INTERRUPTED
    assert "interrupted by SIGINT" in err


def test_runlocked_a_sigint_between_the_row_and_the_body_is_interrupted(
    body_exit_jobs: None, manage: Any
) -> None:
    """Ctrl-C after the run's row is written, before its body starts (while its start is
    logged): recorded interrupted, exit 130, not a traceback."""
    done = manage("runlocked", "sigint_at_start")
    assert done.returncode == exitcodes.SIGINT, done.stderr
    assert "Traceback" not in done.stderr
    assert JobRun.objects.get(job="sigint_at_start").status == RunStatus.INTERRUPTED
    assert not Marker.objects.filter(job="sigint_at_start").exists()


def test_job_run_raise_keyboard_interrupt_in_the_body_is_failed(fresh_registry: None) -> None:
    @locked_task(name="raises_interrupt_here", schedule="0 * * * *")
    def raises_interrupt_here() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # re-raised, as any failure, once recorded
        raises_interrupt_here.run()
    assert JobRun.objects.get(job="raises_interrupt_here").status == RunStatus.FAILED


def test_job_run_a_real_sigint_is_still_interrupted(fresh_registry: None) -> None:
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

    @locked_task(name="gets_sigint", schedule="0 * * * *")
    def gets_sigint() -> None:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(30)

    with pytest.raises(KeyboardInterrupt):
        gets_sigint.run()
    assert JobRun.objects.get(job="gets_sigint").status == RunStatus.INTERRUPTED
    # Python's own handler is back once the run is over.
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_runlocked_an_on_commit_callback_that_exits_is_a_failed_run(
    body_exit_jobs: None, manage: Any
) -> None:
    done = manage("runlocked", "exits_3_on_commit_once")
    assert done.returncode == exitcodes.JOB_FAILED, done.stderr
    run = JobRun.objects.get(job="exits_3_on_commit_once")
    assert run.status == RunStatus.FAILED and "on_commit callback raised" in run.error
    assert "SystemExit: 3" in run.error
    assert Marker.objects.filter(job="exits_3_on_commit_once").count() == 1  # committed
    last = done.stderr.strip().splitlines()[-1]
    assert "job 'exits_3_on_commit_once' failed: SystemExit: 3" in last, done.stderr


def test_job_run_what_another_signal_handler_raises_is_a_stop(fresh_registry: None) -> None:
    """A process with its own handler (a task worker exits from it on SIGTERM): what the
    handler raises while a job runs stops the run from outside, whatever its class."""

    def exit_on_sigterm(signum: int, frame: Any) -> None:
        raise SystemExit(1)

    @locked_task(name="gets_sigterm", schedule="0 * * * *")
    def gets_sigterm() -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)

    previous = signal.signal(signal.SIGTERM, exit_on_sigterm)
    try:
        with pytest.raises(SystemExit):
            gets_sigterm.run()
        assert signal.getsignal(signal.SIGTERM) is exit_on_sigterm
    finally:
        signal.signal(signal.SIGTERM, previous)
    run = JobRun.objects.get(job="gets_sigterm")
    assert run.status == RunStatus.INTERRUPTED and run.error == "interrupted by SIGTERM"


TICK = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize("scope", ["session", "transaction"])
def test_job_run_a_real_sigint_gives_the_tick_back_and_a_raised_one_does_not(
    scope: Scope, fresh_registry: None
) -> None:
    @locked_task(name="sigint_tick", schedule="0 * * * *", scope=scope)
    def sigint_tick() -> None:
        signal.raise_signal(signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        sigint_tick.run(now=TICK)
    assert JobRun.objects.get(job="sigint_tick").status == RunStatus.INTERRUPTED

    @locked_task(name="sigint_tick", schedule="0 * * * *", scope=scope)
    def raises_on_the_tick() -> None:
        raise KeyboardInterrupt

    registry.unregister("sigint_tick")
    registry.register(raises_on_the_tick)
    with pytest.raises(KeyboardInterrupt):  # the tick was given back: it runs again
        raises_on_the_tick.run(now=TICK + timedelta(seconds=10))
    statuses = list(JobRun.objects.filter(job="sigint_tick").order_by("id").values_list("status"))
    assert statuses == [(RunStatus.INTERRUPTED,), (RunStatus.FAILED,)]
    # A failed run takes its tick: the next delivery of the same tick skips.
    assert raises_on_the_tick.run(now=TICK + timedelta(seconds=20)).skipped_tick


@pytest.mark.parametrize("scope", ["session", "transaction"])
def test_job_run_a_sigint_before_the_body_starts_is_interrupted(scope: Scope) -> None:
    def interrupt(sender: Any, run: Any, **kwargs: Any) -> None:
        signal.raise_signal(signal.SIGINT)

    signals.job_started.connect(interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            registry.get("quick_scheduled").run(now=TICK, scope=scope)
    finally:
        signals.job_started.disconnect(interrupt)
    run = JobRun.objects.get(job="quick_scheduled")
    assert run.status == RunStatus.INTERRUPTED and run.error == "interrupted by SIGINT"
    assert Marker.objects.filter(job="quick_scheduled").count() == 0


def test_job_run_under_a_django_q2_timeout_is_interrupted(fresh_registry: None) -> None:
    """django-q2 stops a task past its timeout with a SIGALRM handler that raises a
    ``SystemExit`` in it: a stop from outside, so the redelivery runs the tick again."""
    from django_q.exceptions import TimeoutException
    from django_q.timeout import TimeoutHandler

    @locked_task(name="past_q2_timeout", schedule="0 * * * *")
    def past_q2_timeout() -> None:
        time.sleep(30)

    with pytest.raises(TimeoutException), TimeoutHandler(1):
        past_q2_timeout.run(now=TICK)
    run = JobRun.objects.get(job="past_q2_timeout")
    assert run.status == RunStatus.INTERRUPTED and run.error == "interrupted by SIGALRM"


def test_django_q2_delivery_of_a_body_that_exits_fails_the_task_not_the_worker(
    fresh_registry: None,
) -> None:
    """What django-q2 calls: a job's own ``sys.exit`` reaches the q2 worker as a task failure
    (``JobFailed``, chained), never as a ``SystemExit`` that would end its process."""
    from django_advisory_cron.contrib import django_q as q2
    from django_advisory_cron.exceptions import JobFailed

    @locked_task(name="q2_exits_3", schedule="0 * * * *")
    def q2_exits_3() -> None:
        raise SystemExit(3)

    intended = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
    with pytest.raises(JobFailed, match="q2_exits_3' failed: it raised SystemExit") as raised:
        q2.run_scheduled("q2_exits_3", intended=intended.isoformat())
    assert isinstance(raised.value.__cause__, SystemExit)
    assert JobRun.objects.get(job="q2_exits_3").status == RunStatus.FAILED
    again = q2.run_scheduled("q2_exits_3", intended=intended.isoformat())  # a redelivery
    assert [run["status"] for run in again["runs"]] == ["skipped_tick"]
