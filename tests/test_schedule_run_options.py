"""What happens around the body of a schedule kept as data: its own retries, back-off, at most
once and captured output, or its job's (issue 24, item 1, for issue 23's schedules). Through
``cronjob`` and ``runlocked`` in real subprocesses, the settings check, and the admin through
the test client, against the real PostgreSQL."""

from __future__ import annotations

import html
import importlib
import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from django_advisory_cron import exitcodes
from django_advisory_cron.models import JobRun, RunStatus, Schedule
from tests.admin_users import logged_in
from tests.test_cronjob_schedules import ok, refused

pytestmark = pytest.mark.usefixtures("transactional_db")

ADD_URL = reverse("admin:django_advisory_cron_schedule_add")
EDITING = ["view_registeredjob", "view_schedule", "add_schedule", "change_schedule"]


@pytest.fixture(autouse=True)
def schedule_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "schedule_tasks"}))


def listed(manage: Any) -> dict[str, dict[str, Any]]:
    """``cronjob list --json``'s jobs, by name."""
    document = json.loads(ok(manage("cronjob", "list", "--json")))
    return {job["job"]: job for job in document["jobs"]}


def around(job: dict[str, Any]) -> tuple[Any, ...]:
    return (job["retries"], job["retry_backoff"], job["at_most_once"], job["capture"])


def test_a_command_schedule_retries_in_a_real_runlocked_process(manage: Any) -> None:
    """A command has no retries of its own: the schedule's ``--retries 2`` makes one run of
    three attempts, and ``--capture no`` keeps no output."""
    added = manage(
        "cronjob", "add", "flaky-cmd", "--command", "flakymark", "--args", '["flaky-cmd", "3"]',
        "--every", "3600", "--retries", "2", "--retry-backoff", "0.05", "--capture", "no",
    )  # fmt: skip
    ok(added)
    row = Schedule.objects.get(name="flaky-cmd")
    assert (row.retries, row.retry_backoff, row.at_most_once, row.capture) == (2, 0.05, None, False)

    done = manage("runlocked", "flaky-cmd")
    assert done.returncode == exitcodes.OK, done.stderr
    (run,) = JobRun.objects.filter(job="flaky-cmd")
    assert (run.status, run.attempts, run.output) == (RunStatus.SUCCEEDED, 3, "")
    assert run.error.splitlines() == [
        "attempt 1: CommandError: attempt 1 of flaky-cmd fails",
        "attempt 2: CommandError: attempt 2 of flaky-cmd fails",
    ]


def test_a_job_schedule_inherits_what_it_does_not_set_and_edit_goes_back(manage: Any) -> None:
    """``mark`` retries once after 0.1 s in code: a schedule overrides only what it sets, and
    an empty value inherits again, as an empty value clears any option of ``edit``."""
    added = manage(
        "cronjob", "add", "nightly", "--job", "mark", "--args", '["n"]',
        "--schedule", "0 3 * * *", "--at-most-once", "yes", "--capture", "yes",
    )  # fmt: skip
    ok(added)
    before = Schedule.objects.get(name="nightly").changed
    edited = manage("cronjob", "edit", "nightly", "--retries", "4", "--capture", "")
    assert ok(edited).startswith("nightly: changed (--retries, --capture); it calls job mark")
    row = Schedule.objects.get(name="nightly")
    assert row.changed > before  # the table's trigger saw the edit: the workers follow it
    assert (row.retries, row.retry_backoff, row.at_most_once, row.capture) == (4, None, True, None)
    jobs = listed(manage)
    # Its own retries with its job's back-off; its own at most once; its job's capture (off).
    assert around(jobs["nightly"]) == (4, 0.1, True, False)
    assert around(jobs["mark"]) == (1, 0.1, False, False)

    refusal = refused(manage("cronjob", "edit", "nightly", "--retries", "-1", "--capture", "maybe"))
    assert refusal == (
        "cronjob: cannot edit 'nightly': --capture must be yes or no (empty: as its job does), "
        "not 'maybe'"
    )
    refusal = refused(
        manage("cronjob", "edit", "nightly", "--retries", "0", "--retry-backoff", "2")
    )
    assert refusal == (
        "cronjob: cannot edit 'nightly': a retry back-off applies to the schedule's own "
        "retries: give retries above 0 too"
    )


def test_the_settings_list_takes_them_and_its_check_refuses_bad_ones(
    manage: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    entries = [
        {"name": "s-ok", "command": "marker", "args": ["x"], "every": 60, "retries": 2,
         "retry_backoff": 5, "at_most_once": True, "capture": False},
        {"name": "s-neg", "command": "marker", "args": ["x"], "every": 60, "retries": -1},
        {"name": "s-word", "command": "marker", "args": ["x"], "every": 60, "capture": "yes"},
        {"name": "s-celery", "job": "billing.ping", "deliver": "celery", "every": 60,
         "retries": 3, "capture": True},
    ]  # fmt: skip
    settings = {"JOBS_MODULE": "schedule_tasks", "SCHEDULES": entries}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))
    checked = manage("check")
    assert checked.returncode == 1, checked.stderr
    errors = {line for line in checked.stderr.splitlines() if line.startswith("?:")}
    assert errors == {
        "?: (django_advisory_cron.E175) ADVISORY_CRON['SCHEDULES'][1] ('s-neg'): retries must "
        "be a whole number >= 0, not -1.",
        "?: (django_advisory_cron.E171) ADVISORY_CRON['SCHEDULES'][2]: its 'capture' must be "
        "True, False or None, not yes.",
        "?: (django_advisory_cron.E175) ADVISORY_CRON['SCHEDULES'][3] ('s-celery'): a schedule "
        "sent to Celery runs in Celery's workers, which retry and log it as the Celery task "
        "says: it takes no retries, retry_backoff, at_most_once or capture of its own.",
    }, checked.stderr

    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({**settings, "SCHEDULES": entries[:1]}))
    assert around(listed(manage)["s-ok"]) == (2, 5.0, True, False)


@pytest.fixture
def editor(fresh_registry: None, django_user_model: Any) -> Client:
    """A user who may add and change schedules; ``mark`` (retries once after 0.1 s) and
    ``code_yearly`` registered here."""
    importlib.reload(importlib.import_module("tests.jobsapp.schedule_tasks"))
    return logged_in(django_user_model, "editor", EDITING)


def form(**changes: str) -> dict[str, str]:
    """The add form as a browser posts it: a schedule calling ``mark`` at 03:00 each day."""
    data = {
        "name": "nightly_mark",
        "job": "mark",
        "command": "",
        "args": '["hello"]',
        "kwargs": "{}",
        "cron": "0 3 * * *",
        "enabled": "on",
        "retries": "",
        "retry_backoff": "",
        "at_most_once": "unknown",
        "capture": "unknown",
    }
    return {**data, **changes}


def text(response: Any) -> str:
    assert response.status_code == 200, response
    return " ".join(html.unescape(response.content.decode()).split())


def test_the_admin_form_sets_them_and_the_change_page_shows_what_applies(editor: Client) -> None:
    add_page = text(editor.get(ADD_URL))
    assert "Around the body" in add_page
    assert "Empty: as its job does" in add_page  # the help texts say what empty means
    response = editor.post(ADD_URL, form(retries="3", capture="true"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    row = Schedule.objects.get(name="nightly_mark")
    assert (row.retries, row.retry_backoff, row.at_most_once, row.capture) == (3, None, None, True)

    change = reverse("admin:django_advisory_cron_schedule_change", args=[row.pk])
    page = text(editor.get(change))
    assert (
        "retries: 3 (this schedule's); retry back-off: 0.1 s (job mark's); at most once: no "
        "(job mark's); captured output: yes (this schedule's)"
    ) in page, page.split("Around the body")[1][:600]

    command = Schedule.objects.create(name="tidy", command="marker", args=["x"], every=60)
    page = text(
        editor.get(reverse("admin:django_advisory_cron_schedule_change", args=[command.pk]))
    )
    assert (
        "retries: 0 (a command's default); at most once: no (a command's default); captured "
        "output: yes (a command's default)"
    ) in page, page.split("Around the body")[1][:600]

    sent = Schedule.objects.create(name="ping", job="billing.ping", deliver="celery", every=60)
    page = text(editor.get(reverse("admin:django_advisory_cron_schedule_change", args=[sent.pk])))
    assert '<div class="readonly">as the Celery task says, in Celery\'s workers</div>' in page


@pytest.mark.parametrize(
    ("changes", "field", "says"),
    [
        ({"retries": "-1"}, "retries", "greater than or equal to 0"),
        ({"retries": "2", "retry_backoff": "0"}, "retry_backoff", "the retry back-off must be"),
        ({"retry_backoff": "2"}, "retry_backoff", "a retry back-off applies to the schedule's"),
        (
            {"name": "code_yearly", "override": "on", "job": "", "args": "", "retries": "2"},
            "__all__",
            "an override changes only a code job's cron, every, timezone, enabled; not its retries",
        ),
    ],
)
def test_each_bad_value_is_an_error_on_its_field(
    editor: Client, changes: dict[str, str], field: str, says: str
) -> None:
    response = editor.post(ADD_URL, form(**changes))
    assert response.status_code == 200, response
    found = response.context["adminform"].form.errors
    assert says in " ".join(found.get(field, [])), found
    assert not Schedule.objects.exists()
