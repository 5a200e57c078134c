"""A schedule kept in the database is a job like the others on every path: ``runlocked
NAME`` runs it with its arguments (and pings its monitor), ``cronstatus``, ``health/`` and
``metrics/`` show it, the run history holds its runs under its name."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from django.test.utils import override_settings
from prometheus_client.parser import text_string_to_metric_families

from django_advisory_cron import exitcodes
from django_advisory_cron.models import JobRun, RunStatus, Schedule
from tests.jobsapp.models import Marker
from tests.monitor_servers import Recorder, recorder

pytestmark = pytest.mark.usefixtures("transactional_db")


@pytest.fixture
def server() -> Iterator[Recorder]:
    yield from recorder()


@pytest.fixture
def nightly(monkeypatch: pytest.MonkeyPatch, server: Recorder, fresh_registry: None) -> Schedule:
    importlib.reload(importlib.import_module("tests.jobsapp.schedule_tasks"))  # in-process too
    settings = {
        "JOBS_MODULE": "schedule_tasks",
        "PING_URL": {"nightly-mark": f"{server.url}/ok/nightly-mark"},
    }
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))
    return Schedule.objects.create(
        name="nightly-mark",
        job="mark",
        kwargs={"label": "nightly", "note": "from the database"},
        cron="30 3 * * *",
        timezone="Europe/Paris",
    )


def test_runlocked_runs_it_and_its_monitor_is_pinged(
    nightly: Schedule, manage: Any, server: Recorder
) -> None:
    ran = manage("runlocked", "--manual", "nightly-mark")
    assert ran.returncode == exitcodes.OK, ran.stderr
    (marker,) = Marker.objects.filter(job="nightly")
    assert marker.note == "from the database"
    (run,) = JobRun.objects.filter(job="nightly-mark")
    assert run.status == RunStatus.SUCCEEDED and run.manual
    assert server.paths("/ok/nightly-mark") == [
        ("GET", "/ok/nightly-mark/start"),
        ("GET", "/ok/nightly-mark"),
    ]

    Schedule.objects.filter(pk=nightly.pk).update(enabled=False)
    skipped = manage("runlocked", "nightly-mark")
    assert skipped.returncode == exitcodes.OK, skipped.stderr
    assert "its schedule is disabled" in skipped.stdout
    assert JobRun.objects.filter(job="nightly-mark").count() == 1


def test_cronstatus_health_and_metrics_show_it(nightly: Schedule, manage: Any) -> None:
    status = manage("cronstatus", "--json")
    assert status.returncode == exitcodes.OK, status.stderr
    (job,) = [job for job in json.loads(status.stdout)["jobs"] if job["job"] == "nightly-mark"]
    assert job["schedule"] == "30 3 * * *"

    with override_settings(ADVISORY_CRON={"ENDPOINT_ACCESS": "open"}):
        health = Client().get("/cron/health/")
        metrics = Client().get("/cron/metrics/")
    assert health.status_code == 200
    assert "nightly-mark" in health.content.decode()
    families = {
        family.name: family for family in text_string_to_metric_families(metrics.content.decode())
    }
    jobs = {
        sample.labels["job"]
        for family in families.values()
        for sample in family.samples
        if "job" in sample.labels
    }
    assert "nightly-mark" in jobs
