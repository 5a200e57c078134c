"""Captured output (``@locked_task(capture=...)``, wrapped commands): kept with the run,
bounded, shown escaped on the run's admin page and by ``cronjob history --output``, and the
job's own logging unchanged. Real ``runlocked`` processes against a real server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.urls import reverse

from django_advisory_cron import exitcodes, locked_task
from django_advisory_cron.models import JobRun
from django_advisory_cron.run.output import Output
from tests.admin_users import VIEWING, logged_in

pytestmark = pytest.mark.usefixtures("transactional_db")


@pytest.fixture(autouse=True)
def output_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = {"JOBS_MODULE": "output_tasks", "CAPTURE_LIMIT": 4096}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))


def test_a_jobs_log_records_are_kept_with_its_run_and_still_logged(
    manage: Any, django_user_model: Any
) -> None:
    done = manage("runlocked", "logs", "2")
    assert done.returncode == exitcodes.OK, done.stderr
    (run,) = JobRun.objects.filter(job="logs")
    lines = run.output.splitlines()
    assert [line.split(" ", 2)[2] for line in lines] == [
        "WARNING tests.jobsapp.output_tasks: line 0 <b>bold</b>",
        "WARNING tests.jobsapp.output_tasks: line 1 <b>bold</b>",
        "ERROR payments: charged 3 cards",
    ]
    # The job's own logging printed what it always printed, the uncaptured logger too.
    for said in ("line 0 <b>bold</b>", "charged 3 cards", "not captured"):
        assert said in done.stderr
    # Shown escaped on the run's admin page, and by cronjob history --output.
    viewer = logged_in(django_user_model, "viewer", VIEWING)
    page = viewer.get(reverse("admin:django_advisory_cron_jobrun_change", args=[run.pk]))
    assert "line 0 &lt;b&gt;bold&lt;/b&gt;" in page.content.decode()
    assert "<b>bold</b>" not in page.content.decode()
    history = manage("cronjob", "history", "logs", "--output")
    assert history.returncode == 0, history.stderr
    assert "    " in history.stdout and "ERROR payments: charged 3 cards" in history.stdout


def test_a_run_without_capture_or_output_keeps_nothing(manage: Any) -> None:
    for job in ("quiet", "uncaptured"):
        done = manage("runlocked", job)
        assert done.returncode == exitcodes.OK, done.stderr
        assert JobRun.objects.get(job=job).output == ""
    assert "kept nowhere" in done.stderr


def test_a_commands_10_mb_are_kept_bounded_from_both_ends(manage: Any) -> None:
    done = manage("runlocked", "loud", "10", timeout=120)
    assert done.returncode == exitcodes.OK, done.stderr
    assert len(done.stdout) > 10_000_000  # still printed in full
    output = JobRun.objects.get(job="loud").output
    assert len(output) < 4096 + 100
    assert output.startswith("loud: starting")
    assert output.rstrip().endswith("loud: the end")
    assert "characters cut ...]" in output


def test_output_keeps_its_beginning_and_its_end() -> None:
    kept = Output(10)
    for chunk in ("abc", "defgh", "ijklmnop", "qrstuvwxyz"):
        kept.write(chunk)
    assert kept.text() == "abcde\n[... 16 characters cut ...]\nvwxyz"
    short = Output(10)
    short.write("hello")
    assert short.text() == "hello"


def test_capture_takes_true_false_or_logger_names() -> None:
    with pytest.raises(ValueError, match="capture must be True, False or a list"):
        locked_task(name="bad_capture", capture="payments")(lambda: None)
