"""A reset is a change of the job's schedule: a worker started after it runs no tick of a
period the job was disabled in (docs/schedules.md: an edit never invents a missed tick).

The job's override is the row whose ``changed`` anchors catch-up; a reset deletes it, so the
time of the reset is kept apart. Through ``cronjob reset`` and the admin's "Reset to code",
both of which delete the override row."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.urls import reverse

from django_advisory_cron.models import JobRun
from tests.admin_users import logged_in
from tests.waiting import wait_for

JOB = "every_second"


@pytest.fixture(autouse=True)
def reset_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "reset_tasks"}))


def ok(result: Any) -> str:
    assert result.returncode == 0, result.stderr
    return str(result.stdout)


def ticks() -> list[datetime]:
    return sorted(t for t in JobRun.objects.filter(job=JOB).values_list("tick", flat=True) if t)


@pytest.mark.parametrize("how", ["cronjob", "admin"])
def test_a_worker_started_after_a_reset_runs_no_tick_of_the_disabled_period(
    how: str, manage: Any, spawn: Any, raw_connect: Any, django_user_model: Any
) -> None:
    clock = raw_connect()

    def now() -> datetime:
        return clock.execute("SELECT now()").fetchone()[0]  # type: ignore[no-any-return]

    ok(manage("runlocked", JOB))
    (recorded,) = ticks()
    ok(manage("cronjob", "edit", JOB, "--disable"))
    disabled = now()
    wait_for(lambda: now() >= disabled + timedelta(seconds=3.5))  # three ticks, disabled
    before_reset = now()
    if how == "cronjob":
        ok(manage("cronjob", "reset", JOB))
    else:
        admin = logged_in(django_user_model, "resetter", ["view_schedule", "delete_schedule"])
        url = reverse("admin:django_advisory_cron_schedule_reset")
        assert admin.post(url, {"job": JOB}).status_code == 302
    worker = spawn("cronworker", JOB)
    wait_for(lambda: ticks()[-1] > before_reset, timeout=30)
    worker.terminate()
    _out, err = worker.communicate(timeout=30)
    assert "Traceback" not in err, err
    during = [tick.isoformat() for tick in ticks() if recorded < tick <= before_reset]
    assert during == [], f"ran ticks of the disabled period: {during}\n{err}"
