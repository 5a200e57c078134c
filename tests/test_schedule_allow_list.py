"""The management commands and Celery tasks a schedule kept in the database may call are those
``ADVISORY_CRON["SCHEDULE_COMMANDS"]`` and ``["SCHEDULE_CELERY_TASKS"]`` list (issue 33): a
staff user who may add schedules cannot make a worker run ``shell``, through the admin (test
client), ``cronjob add`` or a row written in SQL, which real ``runlocked`` and ``cronworker``
processes report and never run."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from django_advisory_cron import exitcodes
from django_advisory_cron.models import JobRun, RunStatus, Schedule
from tests.admin_users import logged_in
from tests.jobsapp.models import Marker

from .test_admin_schedules import ADD_URL, errors, form
from .test_cronjob_import import _manage, import_db  # noqa: F401 (a fixture)
from .test_cronjob_schedules import refused
from .waiting import wait_for

#: What ``shell`` would run: a trace that it ran (a real escalation sets ``is_superuser``).
ESCALATE = ["-c", "from tests.jobsapp.models import Marker; Marker.objects.create(job='x', pid=0)"]


@pytest.fixture
def adder(django_user_model: Any, db: None) -> Client:
    """A staff user who may add and view schedules, and nothing else."""
    return logged_in(django_user_model, "adder", ["add_schedule", "view_schedule"])


def test_the_admin_offers_and_takes_only_the_allowed_commands(adder: Client) -> None:
    page = adder.get(ADD_URL).content.decode()
    assert '<option value="marker">' in page and '<option value="shell">' not in page
    typed = form(name="escalate", job="", command="shell", args=json.dumps(ESCALATE))
    (problem,) = errors(adder.post(ADD_URL, typed))["command"]
    assert "ADVISORY_CRON['SCHEDULE_COMMANDS']" in problem, problem
    assert not Schedule.objects.exists()


@pytest.mark.usefixtures("transactional_db")
def test_cronjob_add_refuses_a_command_not_allowed(manage: Any) -> None:
    added = manage("cronjob", "add", "escalate", "--command", "shell", "--args",
                   json.dumps(ESCALATE), "--every", "60")  # fmt: skip
    assert refused(added) == (
        "cronjob: cannot add 'escalate': manage.py shell is not a command a schedule may "
        "call; add 'shell' to ADVISORY_CRON['SCHEDULE_COMMANDS'] to allow it"
    )
    assert not Schedule.objects.exists()


def stored(name: str, command: str, args: list[str], every: float) -> None:
    """A schedule row written in SQL, past every check."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO django_advisory_cron_schedule (name, override, job, command, args,"
            " kwargs, cron, every, timezone, enabled, catch_up, deliver, description,"
            " changed_by, changed) VALUES (%s, false, '', %s, %s, '{}', '', %s, '', true, '',"
            " '', '', 'sql', now())",
            [name, command, json.dumps(args), every],
        )


@pytest.mark.usefixtures("transactional_db")
def test_a_stored_row_naming_a_command_not_allowed_is_reported_and_never_run(
    manage: Any, spawn: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "schedule_tasks"}))
    stored("escalate", "shell", ESCALATE, 1)
    stored("tidy", "marker", ["tidy"], 1)
    why = (
        "manage.py shell is not a command a schedule may call; add 'shell' to "
        "ADVISORY_CRON['SCHEDULE_COMMANDS'] to allow it"
    )
    ran = manage("runlocked", "escalate")
    print(ran.returncode, ran.stdout, ran.stderr)
    assert (ran.returncode, ran.stdout) == (exitcodes.USAGE, "")
    assert f"the schedule 'escalate' cannot run: {why}" in ran.stderr
    worker = spawn("cronworker")
    wait_for(lambda: JobRun.objects.filter(job="tidy", status=RunStatus.SUCCEEDED).exists())
    worker.terminate()
    logged = worker.communicate(timeout=30)[1]
    assert f"schedule escalate is not run: {why}" in logged, logged
    assert not JobRun.objects.filter(job="escalate").exists()
    assert not Marker.objects.filter(job="x").exists()


@pytest.mark.usefixtures("transactional_db")
def test_a_settings_entry_is_the_sites_own_code_and_not_held_to_the_list(
    manage: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    declared = {"name": "own", "command": "marker", "args": ["own"], "every": 60}
    monkeypatch.setenv(
        "ADVISORY_CRON_JSON", json.dumps({"SCHEDULE_COMMANDS": [], "SCHEDULES": [declared]})
    )
    ran = manage("runlocked", "own")
    assert ran.returncode == 0, ran.stderr
    assert Marker.objects.filter(job="own").count() == 1


def test_cronjob_import_refuses_the_tasks_not_allowed(import_db: str) -> None:  # noqa: F811
    imported = _manage(import_db, "cronjob", "import", "--from", "celery-beat", "--deliver",
                       "celery", settings="tests.settings_import_unlisted")  # fmt: skip
    assert imported.returncode == exitcodes.USAGE, imported.stderr
    assert (
        "CELERY_BEAT_SCHEDULE['report-by-name'] -> report-by-name: refused: Celery task "
        "send_report is not a task a schedule may send; add 'send_report' to "
        "ADVISORY_CRON['SCHEDULE_CELERY_TASKS'] to allow it; it would be calling Celery task "
        "send_report() (deliver=celery), every 30s\n"
    ) in imported.stdout
    assert "entries imported or already there" in imported.stdout
    assert " 0 of " in imported.stdout, imported.stdout
    assert not Schedule.objects.exists()
