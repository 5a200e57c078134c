"""Captured output (``@locked_task(capture=...)``, wrapped commands): kept with the run,
bounded, shown escaped on the run's admin page and by ``cronjob history --output``, and the
job's own logging unchanged. Real ``runlocked`` processes against a real server."""

from __future__ import annotations

import json
import logging
import signal
import threading
from typing import Any

import pytest
from django.db import connections
from django.urls import reverse

from django_advisory_cron import exitcodes, locked_task
from django_advisory_cron.models import JobRun, RunStatus
from django_advisory_cron.run.output import Output
from tests.admin_users import VIEWING, logged_in
from tests.waiting import wait_for

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


#: Django's default logging, as a new project has: the job's logger drops INFO.
DEFAULT_LOGGING = "--settings=tests.settings_default_logging"
CHARGED = "INFO tests.jobsapp.output_tasks: charging 3 subscriptions"


def test_info_records_are_captured_under_djangos_default_logging(manage: Any) -> None:
    done = manage("runlocked", DEFAULT_LOGGING, "charges", "3")
    assert done.returncode == exitcodes.OK, done.stderr
    output = JobRun.objects.get(job="charges").output
    assert CHARGED in output, output
    assert "not asked for" not in output  # DEBUG is below the capture's level
    # The project's logging prints what it always printed: nothing at INFO.
    assert "charging" not in done.stderr + done.stdout
    history = manage("cronjob", DEFAULT_LOGGING, "history", "charges", "--output")
    assert CHARGED in history.stdout, history.stderr


def test_capture_level_keeps_debug_records_that_print_nowhere(
    manage: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = {"JOBS_MODULE": "output_tasks", "CAPTURE_LEVEL": "DEBUG"}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))
    done = manage("runlocked", DEFAULT_LOGGING, "charges", "3")
    assert done.returncode == exitcodes.OK, done.stderr
    lines = JobRun.objects.get(job="charges").output.splitlines()
    assert [line.split(" ", 2)[2] for line in lines] == [
        CHARGED,
        "DEBUG tests.jobsapp.output_tasks: not asked for",
    ]
    assert "asked for" not in done.stderr + done.stdout
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"CAPTURE_LEVEL": "debug"}))
    refused = manage("check")
    assert "django_advisory_cron.E118" in refused.stderr, refused.stderr


def test_a_workers_runs_capture_info_under_djangos_default_logging(
    spawn: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = {"JOBS_MODULE": "output_tasks", "MAX_SKEW": 0.4}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))
    worker = spawn("cronworker", DEFAULT_LOGGING, "charges_every1", "--grace", "5")
    finished = JobRun.objects.filter(job="charges_every1", status=RunStatus.SUCCEEDED)
    wait_for(lambda: finished.exists(), timeout=30)
    worker.send_signal(signal.SIGTERM)
    out, err = worker.communicate(timeout=30)
    assert worker.returncode == exitcodes.SIGTERM, err
    output = finished.first().output  # type: ignore[union-attr]
    assert CHARGED in output, output
    assert "charging" not in out + err


shared = logging.getLogger("tests.capture_threads")
logged_elsewhere = threading.Event()


@locked_task(name="capture_threads", capture=["tests.capture_threads"])
def capture_threads() -> None:
    shared.info("from the run")
    assert logged_elsewhere.wait(10)


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_a_run_captures_its_own_threads_records_and_changes_no_handler() -> None:
    assert shared.getEffectiveLevel() == logging.WARNING  # INFO dropped, as Django's default
    handler = Kept()
    shared.addHandler(handler)

    def other_thread() -> None:
        wait_for(lambda: JobRun.objects.filter(job="capture_threads").exists())
        shared.info("from another thread")
        shared.warning("a warning from another thread")
        logged_elsewhere.set()
        connections.close_all()  # this thread's own

    elsewhere = threading.Thread(target=other_thread)
    elsewhere.start()
    try:
        run = capture_threads.run()
    finally:
        elsewhere.join()
        shared.removeHandler(handler)
    assert run.output.endswith("INFO tests.capture_threads: from the run\n"), run.output
    assert "another thread" not in run.output
    # The project's handlers got what its configuration lets through, from either thread.
    assert [record.getMessage() for record in handler.records] == ["a warning from another thread"]
    assert shared.isEnabledFor(logging.INFO) is False
    assert "isEnabledFor" not in vars(shared)


def test_a_logger_that_cannot_be_captured_is_said_at_check_and_in_the_output(
    manage: Any, spawn: Any
) -> None:
    disabled = "--settings=tests.settings_disabled_logger"
    why = "logger 'payments' is disabled by the project's logging configuration"
    check = manage("check", disabled)
    assert check.returncode == 0, check.stderr
    assert f"(django_advisory_cron.W015) Job 'logs' cannot capture what it asks for: {why}" in (
        check.stderr
    )
    # A process of its own: a warm starter's second django.setup() would apply LOGGING again,
    # and disable the loggers the first one made (the job's module logger among them).
    done = spawn("runlocked", disabled, "logs")
    _out, err = done.communicate(timeout=60)
    assert done.returncode == exitcodes.OK, err
    lines = JobRun.objects.get(job="logs").output.splitlines()
    assert lines[0] == f"(not captured: {why})", lines
    assert lines[1].endswith("WARNING tests.jobsapp.output_tasks: line 0 <b>bold</b>"), lines
    assert "charged 3 cards" not in "\n".join(lines)
