"""Schedule versions (issue 39): every path that changes a database schedule keeps a version
with who, when, why and what changed (``cronjob add/edit/reset/remove/import/revert``, the
admin's form, delete and reset, plain SQL), ``cronjob versions`` and ``revert`` with their
errors, the run history naming the version each run ran under, and a revert followed by a
running ``cronworker`` at once. Real subprocesses against the real PostgreSQL; every test flushes
what it wrote (``transactional_db``), its workers stopped before."""

from __future__ import annotations

import importlib
import json
import subprocess
from typing import Any

import psycopg
import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from django_advisory_cron import exitcodes
from django_advisory_cron.models import JobRun, Schedule, ScheduleVersion
from django_advisory_cron.ops import control
from tests.admin_users import logged_in
from tests.conftest import manage_env
from tests.jobsapp.models import Marker
from tests.warm_start import run_manage

from .waiting import wait_for, wait_for_workers

pytestmark = pytest.mark.usefixtures("transactional_db")


@pytest.fixture(autouse=True)
def schedule_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "schedule_tasks"}))


def ok(result: Any) -> str:
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    return str(result.stdout)


def refused(result: Any) -> str:
    assert (result.returncode, result.stdout) == (exitcodes.USAGE, ""), result.stdout
    assert result.stderr.count("\n") == 1, result.stderr
    return str(result.stderr.rstrip("\n"))


def kept(name: str) -> list[tuple[int, str, str, Any]]:
    """The versions of ``name``, oldest first: number, who, note, state."""
    rows = ScheduleVersion.objects.filter(name=name).order_by("number")
    return [(v.number, v.changed_by, v.note, v.state) for v in rows]


def test_every_cronjob_change_keeps_a_version_with_who_why_and_the_diff(manage: Any) -> None:
    me = control.operator()
    ok(manage("cronjob", "add", "nightly", "--job", "mark", "--args", '["n"]',
              "--schedule", "0 3 * * *", "--note", "for the reports"))  # fmt: skip
    ok(manage("cronjob", "edit", "nightly", "--schedule", "30 3 * * *", "--note", "after backup"))
    ok(manage("cronjob", "edit", "nightly", "--disable"))
    versions = kept("nightly")
    assert [(n, who, note) for n, who, note, _state in versions] == [
        (1, me, "for the reports"), (2, me, "after backup"), (3, me, ""),
    ]  # fmt: skip
    assert versions[0][3]["cron"] == "0 3 * * *" and versions[0][3]["args"] == ["n"]
    assert (versions[1][3]["cron"], versions[2][3]["enabled"]) == ("30 3 * * *", False)

    lines = ok(manage("cronjob", "versions", "nightly")).splitlines()
    assert lines[0].split() == ["VERSION", "RECORDED", f"({lines[0].split()[2][1:-1]})", "BY",
                                "NOTE", "CHANGES"]  # fmt: skip
    assert lines[1].startswith("3 ") and lines[1].endswith("enabled: true -> false")
    assert "after backup" in lines[2] and lines[2].endswith('cron: "0 3 * * *" -> "30 3 * * *"')
    added = 'added: args ["n"], cron "0 3 * * *", enabled true, job "mark", name "nightly"'
    assert lines[3].endswith(added)
    document = json.loads(ok(manage("cronjob", "versions", "nightly", "--json")))
    assert [v["version"] for v in document["versions"]] == [3, 2, 1]
    assert document["versions"][1]["changes"] == [
        {"field": "cron", "old": "0 3 * * *", "new": "30 3 * * *"}
    ]

    # An edit that changes nothing the schedule holds keeps no version.
    ok(manage("cronjob", "edit", "nightly", "--schedule", "30 3 * * *"))
    assert len(kept("nightly")) == 3

    reverted = ok(manage("cronjob", "revert", "nightly", "1", "--note", "back"))
    assert reverted == (
        'nightly: reverted to version 1 as version 4 (cron: "30 3 * * *" -> "0 3 * * *"; '
        "enabled: false -> true).\n"
    )
    row = Schedule.objects.get(name="nightly")
    assert (row.cron, row.enabled, row.changed_by) == ("0 3 * * *", True, me)
    assert kept("nightly")[-1][:3] == (4, me, "revert to version 1: back")
    assert kept("nightly")[-1][3] == kept("nightly")[0][3]
    assert ok(manage("cronjob", "revert", "nightly", "4")) == (
        "nightly: already as version 4 says; nothing to do.\n"
    )

    ok(manage("cronjob", "remove", "nightly", "--note", "not needed"))
    assert kept("nightly")[-1][:4] == (5, me, "not needed", None)
    # A revert to a version before the removal adds it again.
    ok(manage("cronjob", "revert", "nightly", "3"))
    assert Schedule.objects.get(name="nightly").enabled is False
    assert kept("nightly")[-1][0] == 6


def test_an_override_and_its_reset_keep_versions(manage: Any) -> None:
    ok(manage("cronjob", "edit", "code_yearly", "--schedule", "*/5 * * * *", "--note", "busy"))
    ok(manage("cronjob", "reset", "code_yearly", "--note", "quiet again"))
    versions = kept("code_yearly")
    assert [(n, note) for n, _who, note, _state in versions] == [(1, "busy"), (2, "quiet again")]
    assert versions[0][3]["override"] is True and versions[1][3] is None
    ok(manage("cronjob", "revert", "code_yearly", "1"))
    assert Schedule.objects.get(name="code_yearly").cron == "*/5 * * * *"
    said = ok(manage("cronjob", "versions", "code_yearly")).splitlines()
    assert said[1].startswith("3 ") and "revert to version 1" in said[1]
    assert said[2].endswith("removed")


def test_unknown_schedules_and_versions_are_one_line_and_exit_2(manage: Any) -> None:
    assert refused(manage("cronjob", "versions", "nothing")) == (
        "cronjob: versions nothing: no schedule named 'nothing' has versions (only the "
        "database's schedules and overrides have them; see cronjob list)"
    )
    ok(manage("cronjob", "add", "often", "--job", "mark", "--args", '["o"]', "--every", "60"))
    assert refused(manage("cronjob", "revert", "often", "7")) == (
        "cronjob: revert often: schedule 'often' has no version 7: its versions are 1 to 1 "
        "(see cronjob versions often)"
    )
    assert refused(manage("cronjob", "revert", "nothing", "1")).startswith(
        "cronjob: revert nothing: no schedule named 'nothing' has versions"
    )
    assert refused(manage("cronjob", "revert", "often", "0")).startswith("cronjob: revert: ")
    assert refused(manage("cronjob", "revert", "often", "x")).startswith("cronjob: revert: ")


def test_a_version_that_cannot_run_now_is_refused(manage: Any) -> None:
    ok(manage("cronjob", "add", "often", "--job", "mark", "--args", '["o"]', "--every", "60"))
    ok(manage("cronjob", "edit", "often", "--every", "120"))
    with connection.cursor() as cursor:  # SQL a person typed: the version is the database user's
        cursor.execute(
            "UPDATE django_advisory_cron_scheduleversion SET state = jsonb_set(state, "
            "'{job}', '\"gone\"') WHERE name = 'often' AND number = 1"
        )
    said = refused(manage("cronjob", "revert", "often", "1"))
    assert said.startswith("cronjob: revert often: that version cannot run now: ")
    assert "gone" in said
    assert len(kept("often")) == 2  # nothing written
    with connection.cursor() as cursor:  # an override of a job that has left the code
        cursor.execute(
            "INSERT INTO django_advisory_cron_scheduleversion (name, number, recorded, "
            "changed_by, note, state) VALUES ('left_code', 1, now(), '', '', "
            "'{\"override\": true, \"every\": 60}'), ('left_code', 2, now(), '', '', NULL)"
        )
    assert refused(manage("cronjob", "revert", "left_code", "1")) == (
        "cronjob: revert left_code: that version overrides a job no longer defined in code; "
        "'manage.py cronjob reset left_code' drops an override"
    )


def test_a_write_in_sql_is_the_database_users(manage: Any) -> None:
    ok(manage("cronjob", "add", "often", "--job", "mark", "--args", '["o"]', "--every", "60"))
    with connection.cursor() as cursor:
        cursor.execute("UPDATE django_advisory_cron_schedule SET every = 90 WHERE name = 'often'")
        cursor.execute("SELECT current_user")
        user = cursor.fetchone()[0]
    assert kept("often")[-1][:3] == (2, f"database user {user}", "")
    # A rename (SQL only: the admin and cronjob have none) removes one name and adds another.
    with connection.cursor() as cursor:
        cursor.execute("UPDATE django_advisory_cron_schedule SET name = 'seldom'")
    assert kept("often")[-1][0::3] == (3, None)
    assert [(n, state["every"]) for n, _who, _note, state in kept("seldom")] == [(1, 90)]


def test_import_keeps_each_schedules_first_version(db_url: str) -> None:
    done = run_manage("cronjob", "--settings", "tests.settings_import", "import", "--from",
                      "crontab", "--note", "retiring the crontab", env=manage_env(db_url),
                      timeout=120)  # fmt: skip
    assert done.returncode == exitcodes.USAGE, done.stderr  # one entry cannot map
    names = sorted(Schedule.objects.values_list("name", flat=True))
    assert names and sorted(set(ScheduleVersion.objects.values_list("name", flat=True))) == names
    assert {v.note for v in ScheduleVersion.objects.all()} == {
        "imported from crontab: retiring the crontab"
    }
    again = run_manage("cronjob", "--settings", "tests.settings_import", "import", "--from",
                       "crontab", env=manage_env(db_url), timeout=120)  # fmt: skip
    assert again.returncode == exitcodes.USAGE
    assert ScheduleVersion.objects.count() == len(names)  # a second import changes nothing


# -- the admin ----------------------------------------------------------------------------------

EDITING = ["view_registeredjob", "view_schedule", "add_schedule", "change_schedule"]


@pytest.fixture
def editor(fresh_registry: None, django_user_model: Any) -> Client:
    """A user who may edit schedules, with ``schedule_tasks``'s jobs registered for the test
    only (left registered, they would fail later tests' checks)."""
    importlib.reload(importlib.import_module("tests.jobsapp.schedule_tasks"))
    return logged_in(django_user_model, "editor", [*EDITING, "delete_schedule"])


def form(**changes: str) -> dict[str, str]:
    data = {
        "name": "nightly_mark", "description": "", "job": "mark", "command": "",
        "args": '["hello"]', "kwargs": "{}", "cron": "0 3 * * *", "every": "", "timezone": "",
        "enabled": "on", "starts_0": "", "starts_1": "", "ends_0": "", "ends_1": "",
        "catch_up": "", "max_lateness": "", "timeout": "", "deliver": "", "change_note": "",
    }  # fmt: skip
    return {**data, **changes}


def test_the_admin_keeps_versions_lists_them_and_reverts_after_a_confirmation(
    editor: Client, django_user_model: Any
) -> None:
    add = reverse("admin:django_advisory_cron_schedule_add")
    assert editor.post(add, form(change_note="first")).status_code == 302
    row = Schedule.objects.get(name="nightly_mark")
    change = reverse("admin:django_advisory_cron_schedule_change", args=[row.pk])
    assert editor.post(change, form(cron="0 4 * * *", change_note="later")).status_code == 302
    assert [(n, who, note) for n, who, note, _s in kept("nightly_mark")] == [
        (1, "editor", "first"), (2, "editor", "later"),
    ]  # fmt: skip

    jobs = editor.get(reverse("admin:django_advisory_cron_registeredjob_changelist"))
    versions = reverse("admin:django_advisory_cron_schedule_versions", args=["nightly_mark"])
    assert f'<a href="{versions}" class="versions-link">versions</a>' in jobs.content.decode()
    page = editor.get(change).content.decode()
    assert "Versions of nightly_mark" in page and 'id="version-2"' in page
    diff = "<del>&quot;0 3 * * *&quot;</del> &rarr; <ins>&quot;0 4 * * *&quot;</ins>"
    assert f"<code>cron</code>: {diff}" in page
    revert = reverse("admin:django_advisory_cron_schedule_revert", args=[1, "nightly_mark"])
    assert revert in page

    confirm = editor.get(revert).content.decode()  # a GET changes nothing
    assert "Revert nightly_mark to version 1?" in confirm and "Yes, revert to version 1" in confirm
    assert Schedule.objects.get(name="nightly_mark").cron == "0 4 * * *"
    viewer = logged_in(django_user_model, "viewer", ["view_schedule"])
    assert viewer.get(revert).status_code == 403
    assert viewer.post(revert, {"note": "x"}).status_code == 403
    assert (
        "version-1"
        in viewer.get(
            reverse("admin:django_advisory_cron_schedule_versions", args=["nightly_mark"])
        ).content.decode()
    )

    done = editor.post(revert, {"note": "the 4:00 run overlapped"}, follow=True)
    assert "Schedule nightly_mark: reverted to version 1 as version 3" in done.content.decode()
    assert Schedule.objects.get(name="nightly_mark").cron == "0 3 * * *"
    assert kept("nightly_mark")[-1][:3] == (
        3,
        "editor",
        "revert to version 1: the 4:00 run overlapped",
    )

    missing = reverse("admin:django_advisory_cron_schedule_revert", args=[9, "nightly_mark"])
    said = editor.get(missing, follow=True).content.decode()
    assert "Schedule &#x27;nightly_mark&#x27; has no version 9" in said

    delete = reverse("admin:django_advisory_cron_schedule_delete", args=[row.pk])
    assert editor.post(delete, {"post": "yes"}).status_code == 302
    assert kept("nightly_mark")[-1][1:] == ("editor", "", None)


def test_the_admin_reset_of_an_override_keeps_a_version(editor: Client) -> None:
    Schedule.objects.create(name="code_yearly", override=True, every=30, changed_by="x")
    reset = reverse("admin:django_advisory_cron_schedule_reset")
    assert editor.post(reset, {"job": "code_yearly"}).status_code == 302
    assert kept("code_yearly")[-1][1:] == ("editor", "reset to its schedule in code", None)


# -- the runs and the version they ran under ------------------------------------------------------


def test_each_run_names_the_version_it_ran_under(manage: Any, django_user_model: Any) -> None:
    ok(manage("cronjob", "add", "often", "--job", "mark", "--args", '["o"]', "--every", "60"))
    assert manage("runlocked", "--manual", "often").returncode == 0
    ok(manage("cronjob", "edit", "often", "--every", "120"))
    assert manage("runlocked", "--manual", "often").returncode == 0
    history = json.loads(ok(manage("cronjob", "history", "often", "--json")))
    assert [run["schedule_version"] for run in history] == [2, 1]
    assert json.loads(ok(manage("cronjob", "history", "code_yearly", "--json"))) == []

    viewer = logged_in(django_user_model, "runs", ["view_jobrun"])
    page = viewer.get(reverse("admin:django_advisory_cron_jobrun_changelist")).content.decode()
    for number in (1, 2):
        url = reverse("admin:django_advisory_cron_schedule_versions", args=["often"])
        assert f'href="{url}#version-{number}">schedule version {number}</a>' in page
    first = JobRun.objects.order_by("started").first()
    assert first is not None
    one = viewer.get(reverse("admin:django_advisory_cron_jobrun_change", args=[first.pk]))
    url = reverse("admin:django_advisory_cron_schedule_versions", args=["often"])
    assert f'<a href="{url}#version-1">1</a>' in one.content.decode()


# -- a running worker follows a revert -------------------------------------------------------------


@pytest.mark.slow
def test_a_running_cronworker_runs_on_the_reverted_schedule(
    manage: Any, spawn: Any, raw_connect: Any
) -> None:
    def marks() -> int:
        return Marker.objects.filter(job="often").count()

    ok(manage("cronjob", "add", "often", "--job", "mark", "--args", '["often"]', "--every", "1"))
    ok(manage("cronjob", "edit", "often", "--every", "86400", "--note", "once a day"))
    worker = spawn("cronworker", "--grace", "10")
    try:
        wait_for_workers(raw_connect(), [worker])
        ok(
            manage(
                "cronjob", "add", "probe", "--job", "mark", "--args", '["probe"]', "--every", "1"
            )
        )
        # Once a schedule added later has ticked twice, the worker reads the rows as they are.
        wait_for(lambda: Marker.objects.filter(job="probe").count() >= 2, timeout=30)
        assert marks() == 0  # once a day: not in these seconds
        ok(manage("cronjob", "revert", "often", "1", "--note", "every second again"))
        wait_for(lambda: marks() >= 3, timeout=30)
    finally:
        worker.terminate()
        _out, err = worker.communicate(timeout=30)
    assert "Traceback" not in err, err
    ticks = list(JobRun.objects.filter(job="often").values_list("tick", flat=True))
    assert len(ticks) == len(set(ticks)) == marks()
    assert worker.returncode is not None and isinstance(worker, subprocess.Popen)


# -- the migration ---------------------------------------------------------------------------------


def test_the_migration_gives_the_rows_there_their_version_1_and_goes_back(
    scratch_database_url: str, manage: Any
) -> None:
    """Migration 0026 on a database that has schedules already: each gets version 1, as it
    was; undone, the trigger and the table go, and a write is kept no more."""
    url = scratch_database_url
    done = manage("migrate", "-v0", "django_advisory_cron", "0025", url=url)
    assert done.returncode == 0, done.stderr
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO django_advisory_cron_schedule (name, override, job, command, args,"
            " kwargs, cron, every, timezone, enabled, catch_up, deliver, description,"
            " changed_by) VALUES ('old', false, 'mark', '', '[\"a\"]', '{}', '0 3 * * *', NULL,"
            " '', true, '', '', '', 'someone')"
        )
    for target in (["django_advisory_cron", "0026"], ["django_advisory_cron", "0025"], []):
        done = manage("migrate", "-v0", *target, url=url)
        assert done.returncode == 0, done.stderr
        with psycopg.connect(url, autocommit=True) as conn:
            if target == ["django_advisory_cron", "0025"]:
                assert conn.execute(
                    "SELECT to_regclass('django_advisory_cron_scheduleversion')"
                ).fetchone() == (None,)
                conn.execute("UPDATE django_advisory_cron_schedule SET every = NULL")
                continue
            rows = conn.execute(
                "SELECT number, changed_by, note, state->>'cron', state->'args' "
                "FROM django_advisory_cron_scheduleversion WHERE name = 'old'"
            ).fetchall()
            assert rows == [(1, "someone", "as it was when versions began", "0 3 * * *", ["a"])]
