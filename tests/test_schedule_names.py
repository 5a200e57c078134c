"""A schedule's name is one line of printable text (issue 33): a newline in it would forge log
lines, a NUL or an unpaired surrogate cannot be stored. The definition rules refuse it in one
line, wherever a schedule is typed: ``cronjob add`` (a real subprocess), the admin (test
client), ``ADVISORY_CRON["SCHEDULES"]`` (``manage.py check``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from django_advisory_cron.models import JobRun, RunStatus, Schedule

from .test_admin_schedules import ADD_URL, editor, errors, form, schedule_jobs  # noqa: F401
from .test_cronjob_schedules import refused
from .test_schedule_allow_list import stored
from .waiting import wait_for


@pytest.mark.usefixtures("transactional_db")
def test_cronjob_add_refuses_a_name_that_forges_a_log_line(manage: Any) -> None:
    name = "tidy\nERROR cronworker: forged"
    assert refused(manage("cronjob", "add", name, "--command", "noop", "--every", "60")) == (
        "cronjob: cannot add 'tidy\\nERROR cronworker: forged': the name holds the control "
        "character U+000A; a name is one line of printable text"
    )
    assert not Schedule.objects.exists()


def test_the_admin_refuses_it_on_the_name_field(editor: Client) -> None:  # noqa: F811
    (problem,) = errors(editor.post(ADD_URL, form(name="nightly\tmark")))["name"]
    assert problem.startswith("the name holds the control character U+0009"), problem
    assert not Schedule.objects.exists()


@pytest.mark.usefixtures("transactional_db")
def test_a_settings_entry_with_such_a_name_is_a_check_error(
    manage: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = {"name": "ti\rdy", "command": "noop", "every": 60}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"SCHEDULES": [entry]}))
    checked = manage("check")
    assert checked.returncode == 1
    assert "django_advisory_cron.E172" in checked.stderr, checked.stderr
    entry["name"] = "ti\x1bdy"
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"SCHEDULES": [entry]}))
    checked = manage("check")
    assert "the name holds the control character U+001B" in checked.stderr, checked.stderr


@pytest.mark.usefixtures("transactional_db")
def test_a_row_written_in_sql_with_such_a_name_shows_on_one_line(
    manage: Any, spawn: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "schedule_tasks"}))
    stored("evil\nERROR forged", "noop", [], 1)
    stored("tidy", "marker", ["tidy"], 1)
    why = "the name holds the control character U+000A; a name is one line of printable text"
    listed = manage("cronjob", "list")
    assert f"evil\\nERROR forged: a database schedule that cannot run: {why}" in listed.stdout
    assert "\nERROR forged" not in listed.stdout
    worker = spawn("cronworker")
    wait_for(lambda: JobRun.objects.filter(job="tidy", status=RunStatus.SUCCEEDED).exists())
    worker.terminate()
    logged = worker.communicate(timeout=30)[1]
    assert f"schedule evil\\nERROR forged is not run: {why}" in logged, logged
    assert "\nERROR forged" not in logged
