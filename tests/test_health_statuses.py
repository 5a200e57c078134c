"""Which last runs make a job "failing" in ``cronstatus`` (and the health view and metrics,
which read the same status): its own failures, timeouts included; never a stop from outside."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.utils import timezone

from django_advisory_cron import exitcodes
from django_advisory_cron.models import JobRun, RunStatus

pytestmark = pytest.mark.usefixtures("transactional_db")


@pytest.fixture
def isolation_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "isolation_tasks"}))


def health(manage: Any, job: str) -> tuple[int, dict[str, Any]]:
    result = manage("cronstatus", "--json", "--job", job)
    return result.returncode, json.loads(result.stdout)["jobs"][0]


def test_a_job_whose_last_run_timed_out_is_failing(isolation_jobs: None, manage: Any) -> None:
    result = manage("runlocked", "times_out_in_transaction")
    assert result.returncode == exitcodes.TIMED_OUT, result.stderr
    code, job = health(manage, "times_out_in_transaction")
    assert job["last_run"]["status"] == "timed_out"
    assert job["failing"] is True and job["problems"] == ["failing"]
    assert code == exitcodes.UNHEALTHY


def test_a_job_whose_last_run_was_interrupted_is_not_failing(
    isolation_jobs: None, manage: Any
) -> None:
    """An interrupted run gave its tick back (a deploy's SIGTERM, say): not the job's fault."""
    now = timezone.now()
    JobRun.objects.create(
        job="records_its_pid",
        host="h",
        pid=1,
        started=now,
        finished=now,
        status=RunStatus.INTERRUPTED,
    )
    code, job = health(manage, "records_its_pid")
    assert job["last_run"]["status"] == "interrupted"
    assert job["failing"] is False
    assert code == exitcodes.OK, job
