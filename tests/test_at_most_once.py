"""At most once (``@locked_task(at_most_once=True)``): a tick whose body started stays taken
after its run was interrupted, by ``kill -9`` or a stop signal, where the default gives it
back to be run again. Real ``runlocked`` processes, real signals, a real server."""

from __future__ import annotations

import importlib
import json
import signal
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from django_advisory_cron import exitcodes, locked_task
from django_advisory_cron.models import JobRun
from tests.admin_users import VIEWING, logged_in
from tests.jobsapp.models import Marker
from tests.waiting import wait_for

pytestmark = pytest.mark.usefixtures("transactional_db")

TICK = "2026-01-01T00:00:00+00:00"


@pytest.fixture(autouse=True)
def once_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = {"JOBS_MODULE": "once_tasks", "LEASE": 1.5, "HEARTBEAT": 0.5}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))


def statuses(job: str) -> list[str]:
    return [run.status for run in JobRun.objects.filter(job=job).order_by("id")]


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "SIGTERM"])
@pytest.mark.parametrize(
    ("job", "again"),
    [("given_back", ["interrupted", "succeeded"]), ("at_most_once", ["interrupted"])],
)
def test_an_interrupted_tick_runs_again_only_by_default(
    spawn: Any, manage: Any, tmp_path: Path, stop: int, job: str, again: list[str]
) -> None:
    release = tmp_path / "release"
    victim = spawn("runlocked", "--tick", TICK, job, str(release))
    wait_for(lambda: Marker.objects.filter(job=job).exists())
    victim.send_signal(stop)
    victim.communicate(timeout=30)
    release.touch()
    # The same tick once more (cron's next call, another replica): it waits out the dead
    # run's lease after kill -9.
    second = manage("runlocked", "-w", "30", "--tick", TICK, job, str(release))
    assert second.returncode == exitcodes.OK, second.stderr
    assert statuses(job) == again
    assert {str(run.tick and run.tick.isoformat()) for run in JobRun.objects.filter(job=job)} == {
        TICK
    }
    assert Marker.objects.filter(job=job).count() == len(again)
    if job == "at_most_once":
        assert "already ran" in second.stdout, second.stdout


def test_at_most_once_needs_a_session_lock() -> None:
    with pytest.raises(ValueError, match="at_most_once needs a session lock"):
        locked_task(name="once_in_a_transaction", scope="transaction", at_most_once=True)(
            lambda: None
        )


def test_the_jobs_page_and_cronstatus_say_which_policy_a_job_has(
    django_user_model: Any, fresh_registry: None, manage: Any
) -> None:
    importlib.reload(importlib.import_module("tests.jobsapp.once_tasks"))
    viewer = logged_in(django_user_model, "viewer", VIEWING)
    page = viewer.get(reverse("admin:django_advisory_cron_registeredjob_changelist"))
    text = " ".join(page.content.decode().split())
    assert "scope session, at most once: an interrupted run keeps its tick" in text
    assert "scope session, an interrupted run gives its tick back" in text
    status = manage("cronstatus", "--json")
    jobs = {job["job"]: job for job in json.loads(status.stdout)["jobs"]}
    assert jobs["at_most_once"]["at_most_once"] is True
    assert jobs["given_back"]["at_most_once"] is False
