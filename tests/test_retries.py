"""Retries within a tick (``@locked_task(retries=...)``): the process that holds the tick
calls the job again after a back-off, under the same lock and in the same run row, never past
its next tick. Real ``runlocked`` and ``cronworker`` processes against a real server."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from django_advisory_cron import exitcodes, locked_task
from django_advisory_cron.core.retries import RetryPolicy
from django_advisory_cron.models import JobRun, RunStatus
from tests.admin_users import VIEWING, logged_in
from tests.jobsapp.models import Marker
from tests.waiting import wait_for, wait_for_workers

pytestmark = pytest.mark.usefixtures("transactional_db")

TICK = "2026-01-01T00:00:00+00:00"


@pytest.fixture(autouse=True)
def retry_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same environment for every test's commands, so that one warm starter serves them
    all (tests/warm_start.py: one starter per environment)."""
    settings = {"JOBS_MODULE": "retry_tasks", "MAX_SKEW": 0.5}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))


def gaps(job: str) -> list[float]:
    made = [marker.created for marker in Marker.objects.filter(job=job).order_by("id")]
    return [(b - a).total_seconds() for a, b in itertools.pairwise(made)]


def test_a_job_that_fails_twice_then_succeeds_is_one_run_of_three_attempts(
    manage: Any, django_user_model: Any
) -> None:
    done = manage("runlocked", "--tick", TICK, "flaky", "3")
    assert done.returncode == exitcodes.OK, done.stderr
    (run,) = JobRun.objects.filter(job="flaky")
    assert (run.status, run.attempts, run.tick.isoformat() if run.tick else None) == (
        RunStatus.SUCCEEDED,
        3,
        TICK,
    )
    assert run.error.splitlines() == [
        "attempt 1: Flaky: attempt 1 of flaky fails",
        "attempt 2: Flaky: attempt 2 of flaky fails",
    ]
    # Back-off: 0.5 s doubled, times a jitter between 0.5 and 1.
    first, second = gaps("flaky")
    assert first >= 0.25 and second >= 0.5, (first, second)
    assert "attempt 1 of 4 failed (Flaky: attempt 1 of flaky fails); retrying in" in done.stderr
    # The run's admin page shows the attempts, and each failed one's error.
    viewer = logged_in(django_user_model, "viewer", VIEWING)
    page = viewer.get(reverse("admin:django_advisory_cron_jobrun_change", args=[run.pk]))
    text = " ".join(page.content.decode().split())
    assert 'Attempts:</label> <div class="readonly">3</div>' in text
    assert "attempt 2: Flaky: attempt 2 of flaky fails" in text


def test_a_run_that_succeeded_on_a_retry_shows_no_error_of_its_own(
    manage: Any, django_user_model: Any
) -> None:
    """The failed first attempt's error is shown as that attempt's, never as the run's: not
    in the run list's error column nor in ``cronjob history``; the attempts are counted."""
    done = manage("runlocked", "--tick", TICK, "flaky", "2")
    assert done.returncode == exitcodes.OK, done.stderr
    (run,) = JobRun.objects.filter(job="flaky")
    viewer = logged_in(django_user_model, "viewer", VIEWING)
    listed = viewer.get(reverse("admin:django_advisory_cron_jobrun_changelist"))
    row = listed.content.decode().split('id="result_list"')[1].split("</tr>")[1]
    assert "on attempt 2" in row
    assert "Flaky" not in row.split('class="field-error_short"')[1]
    page = viewer.get(reverse("admin:django_advisory_cron_jobrun_change", args=[run.pk]))
    text = " ".join(page.content.decode().split())
    assert "Earlier attempts:" in text and "attempt 1: Flaky: attempt 1 of flaky fails" in text
    assert 'Error:</label> <div class="readonly">—</div>' in text
    history = manage("cronjob", "history", "flaky")
    assert "Flaky" not in history.stdout and "succeeded on attempt 2" in history.stdout


def test_the_last_attempt_decides_and_every_attempt_is_recorded(manage: Any) -> None:
    done = manage("runlocked", "--tick", TICK, "flaky", "99")
    assert done.returncode == exitcodes.JOB_FAILED, done.stderr
    (run,) = JobRun.objects.filter(job="flaky")
    assert (run.status, run.attempts) == (RunStatus.FAILED, 4)
    lines = run.error.splitlines()
    assert lines[:3] == [f"attempt {n}: Flaky: attempt {n} of flaky fails" for n in (1, 2, 3)]
    assert "Flaky: attempt 4 of flaky fails" in run.error.split("attempt 3:")[1]
    assert Marker.objects.filter(job="flaky").count() == 4


def test_only_the_failures_retry_on_names_are_retried(manage: Any) -> None:
    done = manage("runlocked", "--tick", TICK, "flaky_value", "3")
    assert done.returncode == exitcodes.JOB_FAILED
    (run,) = JobRun.objects.filter(job="flaky_value")
    assert (run.status, run.attempts) == (RunStatus.FAILED, 1)


def test_no_retry_starts_after_the_next_tick(manage: Any) -> None:
    done = manage("runlocked", "--tick", TICK, "flaky_soon")
    assert done.returncode == exitcodes.JOB_FAILED
    (run,) = JobRun.objects.filter(job="flaky_soon")
    assert (run.status, run.attempts) == (RunStatus.FAILED, 1)
    assert "attempt 1 failed; not retried: its next tick" in done.stderr


@pytest.mark.slow
def test_three_workers_one_replica_runs_every_attempt_of_a_tick(
    spawn: Any, raw_connect: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FLAKY_DIR", str(tmp_path))  # each worker counts its attempts there
    workers = [spawn("cronworker", "flaky_every", "--grace", "5") for _ in range(3)]
    wait_for_workers(raw_connect(), workers)
    wait_for(
        lambda: JobRun.objects.filter(job="flaky_every", status=RunStatus.SUCCEEDED).count() >= 3,
        timeout=40,
    )
    for worker in workers:
        worker.terminate()
    for worker in workers:
        worker.communicate(timeout=30)
    runs = JobRun.objects.filter(job="flaky_every", status=RunStatus.SUCCEEDED)
    for run in runs:
        assert run.attempts == 3 and run.finished is not None
        during = Marker.objects.filter(
            job="flaky_every", created__gte=run.started, created__lte=run.finished
        )
        assert [int(marker.note) for marker in during] == [run.pid] * 3
    ticks = [run.tick for run in JobRun.objects.filter(job="flaky_every")]
    assert len(ticks) == len(set(ticks))


def test_bad_retry_options_are_refused_at_the_decorator() -> None:
    for options, message in (
        ({"retries": -1}, "retries must be a whole number"),
        ({"retries": 2, "retry_backoff": 0}, "retry_backoff must be a number of seconds"),
        ({"retries": 2, "retry_on": "ValueError"}, "retry_on must be an exception class"),
    ):
        with pytest.raises(ValueError, match=message):
            locked_task(name="bad_retry", **options)(lambda: None)


def test_the_back_off_doubles_is_capped_and_jittered() -> None:
    policy = RetryPolicy(5, backoff=2, backoff_max=10)
    assert [policy.delay(n, draw=0.999999) for n in (1, 2, 3, 4)] == pytest.approx(
        [2, 4, 8, 10], rel=1e-5
    )
    assert policy.delay(1, draw=0) == 1


@pytest.mark.usefixtures("fresh_registry")
def test_a_job_with_more_than_a_thousand_retries_keeps_retrying(db_url: str) -> None:
    """The back-off doubles from ``retry_backoff`` up to its cap; past the 1,024th doubling a
    float cannot hold the doubled value, and the run still waits the cap and retries."""
    attempts: list[int] = []

    @locked_task(name="many_retries", retries=1100, retry_backoff=1e-6, retry_backoff_max=1e-6)
    def many_retries() -> None:
        attempts.append(len(attempts) + 1)
        if len(attempts) <= 1100:
            raise OSError(f"attempt {len(attempts)} fails")

    result = many_retries.run()
    assert result.status == RunStatus.SUCCEEDED, result.error
    (run,) = JobRun.objects.filter(job="many_retries")
    assert (run.status, run.attempts, len(attempts)) == (RunStatus.SUCCEEDED, 1101, 1101)
