"""The admin's Schedules pages and the Jobs page's overrides, through the test client against
the real PostgreSQL: Django's model permissions gate every change, each change is in the admin's
log with its user, every problem of a schedule is a form error on its field, and what users typed
is shown escaped."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.test import Client
from django.urls import reverse

from django_advisory_cron.jobs.definitions import Definition, to_job
from django_advisory_cron.jobs.job import registry
from django_advisory_cron.models import JobState, Schedule
from tests.admin_users import logged_in

JOBS_URL = reverse("admin:django_advisory_cron_registeredjob_changelist")
OPERATE_URL = reverse("admin:django_advisory_cron_registeredjob_operate")
LIST_URL = reverse("admin:django_advisory_cron_schedule_changelist")
ADD_URL = reverse("admin:django_advisory_cron_schedule_add")
RESET_URL = reverse("admin:django_advisory_cron_schedule_reset")
EDITING = ["view_registeredjob", "view_schedule", "add_schedule", "change_schedule"]


def change_url(row: Schedule) -> str:
    return reverse("admin:django_advisory_cron_schedule_change", args=[row.pk])


@pytest.fixture
def schedule_jobs(fresh_registry: None, db: None) -> None:
    """``mark`` (with arguments) and ``code_yearly`` (scheduled in code) registered here."""
    importlib.reload(importlib.import_module("tests.jobsapp.schedule_tasks"))


@pytest.fixture
def editor(schedule_jobs: None, django_user_model: Any) -> Client:
    return logged_in(django_user_model, "editor", EDITING)


def form(**changes: str) -> dict[str, str]:
    """The add form as a browser posts it: a schedule calling ``mark`` at 03:00 each day."""
    data = {
        "name": "nightly_mark",
        "description": "",
        "job": "mark",
        "command": "",
        "args": '["hello"]',
        "kwargs": "{}",
        "cron": "0 3 * * *",
        "every": "",
        "timezone": "",
        "enabled": "on",
        "starts_0": "",
        "starts_1": "",
        "ends_0": "",
        "ends_1": "",
        "catch_up": "",
        "max_lateness": "",
        "timeout": "",
        "deliver": "",
    }
    return {**data, **changes}


def errors(response: Any) -> dict[str, list[str]]:
    """The form's errors by field (``__all__``: above the form); the page was not saved."""
    assert response.status_code == 200, response
    found: dict[str, list[str]] = response.context["adminform"].form.errors
    return found


def job_row(page: str, name: str) -> str:
    """The Jobs page's row of job ``name``."""
    return page.split(f'data-job="{name}"')[1].split("</tr>")[0]


def override(name: str = "code_yearly", **values: Any) -> Schedule:
    return Schedule.objects.create(name=name, override=True, **values)


def test_adding_a_schedule_logs_who_and_lists_it_as_a_database_job(editor: Client) -> None:
    typed = form(kwargs='{"note": "from the admin"}', changed_by="mallory", created="2000-01-01")
    response = editor.post(ADD_URL, typed)
    assert response.status_code == 302, errors(response)
    row = Schedule.objects.get(name="nightly_mark")
    assert (row.job, row.args, row.kwargs) == ("mark", ["hello"], {"note": "from the admin"})
    assert row.changed_by == "editor" and row.created.year > 2000  # read-only, whatever is sent
    entry = LogEntry.objects.get(object_id=str(row.pk))
    assert entry.action_flag == ADDITION and entry.user.get_username() == "editor"

    listed = editor.get(LIST_URL).content.decode()
    assert "job mark" in listed and "0 3 * * *" in listed and "by editor" in listed
    jobs = editor.get(JOBS_URL).content.decode()
    assert 'data-job="nightly_mark"' in jobs and "defined in the database" in jobs
    named = reverse("admin:django_advisory_cron_schedule_named", args=["nightly_mark"])
    assert named in jobs
    assert editor.get(named)["Location"] == change_url(row)
    missing = editor.get(reverse("admin:django_advisory_cron_schedule_named", args=["nope"]))
    assert missing["Location"] == LIST_URL

    response = editor.post(change_url(row), form(cron="", every="30"))
    assert response.status_code == 302, errors(response)
    row.refresh_from_db()
    assert row.every == 30 and row.cron == ""
    assert "every 30s" in editor.get(JOBS_URL).content.decode()
    entry = LogEntry.objects.filter(object_id=str(row.pk)).latest("id")
    assert entry.action_flag == CHANGE and entry.user.get_username() == "editor"


def test_a_viewer_can_neither_add_nor_change_nor_delete(
    schedule_jobs: None, django_user_model: Any
) -> None:
    row = Schedule.objects.create(name="weekly_mark", job="mark", args=["w"], cron="0 4 * * 1")
    viewer = logged_in(django_user_model, "viewer", ["view_schedule", "view_registeredjob"])
    assert viewer.get(LIST_URL).status_code == 200
    page = viewer.get(change_url(row))
    assert page.status_code == 200 and 'name="_save"' not in page.content.decode()
    assert viewer.get(ADD_URL).status_code == 403
    assert viewer.post(ADD_URL, form()).status_code == 403
    assert (
        viewer.post(change_url(row), form(name="weekly_mark", cron="* * * * *")).status_code == 403
    )
    delete = reverse("admin:django_advisory_cron_schedule_delete", args=[row.pk])
    assert viewer.post(delete, {"post": "yes"}).status_code == 403
    row.refresh_from_db()
    assert row.cron == "0 4 * * 1" and not LogEntry.objects.exists()
    # The Jobs page offers what the permissions allow: a link to the schedule, nothing else.
    jobs = viewer.get(JOBS_URL).content.decode()
    assert "Override schedule" not in jobs and "Reset to code" not in jobs
    named = reverse("admin:django_advisory_cron_schedule_named", args=["weekly_mark"])
    assert named in jobs and viewer.get(named)["Location"] == change_url(row)
    jobs_only = logged_in(django_user_model, "jobs_only", ["view_registeredjob"])
    assert named not in jobs_only.get(JOBS_URL).content.decode()
    assert jobs_only.get(named).status_code == 403


def test_an_override_shows_what_it_changes_and_resets_to_code_with_delete_permission(
    schedule_jobs: None, django_user_model: Any
) -> None:
    row = override(every=30)
    changer = logged_in(django_user_model, "changer", EDITING)
    jobs = changer.get(JOBS_URL).content.decode()
    assert "defined in code; schedule overridden: every 30s (code: 0 0 1 1 *)" in jobs
    assert "Reset to code" not in jobs  # change_schedule is not delete_schedule
    assert changer.post(RESET_URL, {"job": "code_yearly"}).status_code == 403
    assert Schedule.objects.filter(pk=row.pk).exists()

    resetter = logged_in(django_user_model, "resetter", [*EDITING, "delete_schedule"])
    jobs = resetter.get(JOBS_URL).content.decode()
    assert "Reset to code" in jobs and f'action="{RESET_URL}"' in jobs
    assert resetter.get(RESET_URL).status_code == 405
    response = resetter.post(RESET_URL, {"job": "code_yearly", "back": "q=code"}, follow=True)
    assert response.redirect_chain == [(f"{JOBS_URL}?q=code", 302)]
    page = response.content.decode()
    assert "Job code_yearly: reset to its schedule in code (the override said every 30s)" in page
    assert not Schedule.objects.filter(name="code_yearly").exists()
    entry = LogEntry.objects.get(object_id=str(row.pk))
    assert entry.action_flag == DELETION and entry.user.get_username() == "resetter"
    assert "reset to its schedule in code" in entry.change_message
    assert "defined in code (" in page and "schedule overridden" not in page
    # Nothing left to reset.
    again = resetter.post(RESET_URL, {"job": "code_yearly"}, follow=True).content.decode()
    assert "Job code_yearly has no override to reset." in again


def test_a_disabling_override_shows_the_job_disabled(
    schedule_jobs: None, django_user_model: Any
) -> None:
    override(enabled=False)
    viewer = logged_in(django_user_model, "viewer", ["view_registeredjob"])
    row = job_row(viewer.get(JOBS_URL).content.decode(), "code_yearly")
    assert "disabled by an override" in row and "DISABLED" in row


def test_a_settings_schedule_says_so_and_its_override_names_the_settings(
    schedule_jobs: None, django_user_model: Any
) -> None:
    declared = Definition(name="settings_mark", job="mark", args=["s"], cron="0 6 * * *")
    registry.register(to_job(declared, source="settings"))
    viewer = logged_in(django_user_model, "viewer", ["view_registeredjob", "add_schedule"])
    row = job_row(viewer.get(JOBS_URL).content.decode(), "settings_mark")
    assert "defined in settings" in row and "Override schedule" in row
    override(name="settings_mark", every=30)
    row = job_row(viewer.get(JOBS_URL).content.decode(), "settings_mark")
    assert "defined in settings; schedule overridden: every 30s (settings: 0 6 * * *)" in row


def test_the_override_link_opens_a_prefilled_add_form(
    editor: Client, schedule_jobs: None, django_user_model: Any
) -> None:
    jobs = editor.get(JOBS_URL).content.decode()
    link = f"{ADD_URL}?override=1&amp;name=code_yearly"
    assert link in jobs
    viewer = logged_in(django_user_model, "viewer", ["view_registeredjob", "view_schedule"])
    assert link not in viewer.get(JOBS_URL).content.decode()
    prefilled = editor.get(ADD_URL, {"override": "1", "name": "code_yearly"})
    fields = prefilled.context["adminform"].form
    assert fields["override"].value() and fields["name"].value() == "code_yearly"

    response = editor.post(
        ADD_URL,
        form(name="code_yearly", override="on", job="", args="", kwargs="", cron="*/5 * * * *"),
    )
    assert response.status_code == 302, errors(response)
    row = Schedule.objects.get(name="code_yearly")
    assert row.override and row.args == [] and row.kwargs == {}
    jobs = editor.get(JOBS_URL).content.decode()
    assert "schedule overridden: */5 * * * * (code: 0 0 1 1 *)" in jobs
    assert link not in jobs


def test_what_users_typed_is_shown_escaped(editor: Client) -> None:
    response = editor.post(ADD_URL, form(kwargs='{"note": "<script>x</script>"}'))
    assert response.status_code == 302, errors(response)
    row = Schedule.objects.get()
    for url in (LIST_URL, change_url(row), JOBS_URL):
        page = editor.get(url).content.decode()
        assert "<script>x</script>" not in page, url
    assert "&lt;script&gt;x&lt;/script&gt;" in editor.get(LIST_URL).content.decode()
    assert "&lt;script&gt;x&lt;/script&gt;" in editor.get(change_url(row)).content.decode()


@pytest.mark.parametrize(
    ("changes", "field", "says"),
    [
        ({"job": "nope"}, "job", "Select a valid choice"),
        ({"job": "os.system"}, "job", "Select a valid choice"),
        (
            {"job": "", "command": "django.core.management.call_command"},
            "command",
            "not a command a schedule may call",
        ),
        ({"cron": "61 * * * *"}, "cron", "bad cron expression: '61 * * * *'"),
        ({"cron": "0 0 30 2 *"}, "cron", "'0 0 30 2 *' never fires"),
        ({"timezone": "Mars/Base"}, "timezone", "'Mars/Base' is not a known time zone"),
        ({"cron": "", "every": "60", "timezone": "UTC"}, "timezone", "a time zone applies to"),
        ({"args": "[]"}, "args", "cannot be called with these arguments"),
        ({"kwargs": '{"colour": "red"}'}, "args", "unexpected keyword argument 'colour'"),
        ({"args": '{"a": 1}'}, "args", "the arguments must be a JSON list"),
        ({"args": "[1,"}, "args", "Enter a valid JSON"),
        ({"kwargs": "[1]"}, "kwargs", "the keyword arguments must be a JSON object"),
        ({"name": "code_yearly"}, "name", "'code_yearly' is taken by a job defined in code"),
        ({"name": "nope", "override": "on", "job": "", "args": ""}, "name", "no job 'nope'"),
        (
            {"name": "code_yearly", "override": "on", "job": "", "args": "", "timeout": "60"},
            "__all__",
            "an override changes only a code job's cron, every, timezone, enabled; not its timeout",
        ),
        ({"job": "", "command": "check", "args": '["--nope"]'}, "args", "refuses these"),
        (
            {"job": "", "command": "check", "args": "", "kwargs": '{"x": 1}'},
            "kwargs",
            "no option x",
        ),
        ({"every": "30"}, "__all__", "either a cron expression or an interval"),
        ({"cron": ""}, "__all__", "needs a cron expression or an interval"),
        ({"command": "check"}, "__all__", "either a job or a management command"),
        ({"catch_up": "sometimes"}, "catch_up", "Select a valid choice"),
        ({"deliver": "carrier-pigeon"}, "deliver", "deliver must be"),
        ({"timeout": "-1"}, "timeout", "the timeout must be"),
        (
            {
                "starts_0": "2027-01-02",
                "starts_1": "00:00",
                "ends_0": "2027-01-01",
                "ends_1": "00:00",
            },
            "ends",
            "ends before it starts",
        ),
    ],
)
def test_each_problem_is_a_form_error_on_its_field(
    editor: Client, changes: dict[str, str], field: str, says: str
) -> None:
    found = errors(editor.post(ADD_URL, form(**changes)))
    assert says in " ".join(found.get(field, [])), found
    assert not Schedule.objects.exists()


def test_a_bad_cron_beside_an_interval_shows_its_own_error_too(editor: Client) -> None:
    """Both given, the cron's own error stays on the cron field beside "not both"."""
    found = errors(editor.post(ADD_URL, form(cron="61 * * * *", every="30")))
    assert "either a cron expression or an interval" in " ".join(found.get("__all__", []))
    assert "bad cron expression: '61 * * * *'" in " ".join(found.get("cron", [])), found
    found = errors(editor.post(ADD_URL, form(cron="0 3 * * *", every="-5")))
    assert "the interval must be" in " ".join(found.get("every", [])), found


def test_a_saved_schedule_whose_job_left_the_code_says_why_it_cannot_run(editor: Client) -> None:
    row = Schedule.objects.create(name="orphan", job="gone", args=[], cron="0 5 * * *")
    listed = editor.get(LIST_URL).content.decode()
    assert "cannot run:" in listed and "there is no registered job &#x27;gone&#x27;" in listed
    page = editor.get(change_url(row))
    assert page.context["adminform"].form["job"].value() == "gone"
    found = errors(editor.post(change_url(row), form(name="orphan", job="gone", args="[]")))
    assert found["job"] == ["there is no registered job 'gone'"]


def test_the_jobs_page_operates_database_schedules(
    schedule_jobs: None, django_user_model: Any
) -> None:
    Schedule.objects.create(name="weekly_mark", job="mark", args=["w"], cron="0 4 * * 1")
    operator = logged_in(django_user_model, "ops", ["view_registeredjob", "operate_job"])
    paused = operator.post(
        OPERATE_URL, {"job": "weekly_mark", "operation": "pause"}, follow=True
    ).content.decode()
    assert "Job weekly_mark: paused by ops" in paused
    assert JobState.objects.get(job="weekly_mark").paused
    unknown = operator.post(OPERATE_URL, {"job": "nope", "operation": "pause"}, follow=True)
    assert "There is no job named nope." in unknown.content.decode()
    assert not JobState.objects.filter(job="nope").exists()


def test_the_run_list_filters_on_database_schedules_too(
    schedule_jobs: None, django_user_model: Any
) -> None:
    Schedule.objects.create(name="weekly_mark", job="mark", args=["w"], cron="0 4 * * 1")
    reader = logged_in(django_user_model, "reader", ["view_jobrun"])
    page = reader.get(reverse("admin:django_advisory_cron_jobrun_changelist")).content.decode()
    choices = page.split('id="changelist-filter"')[1]
    assert "?job=weekly_mark" in choices and "?job=code_yearly" in choices


def test_a_saved_schedule_lists_its_next_ticks_in_its_zone_with_a_pause_marked(
    editor: Client,
) -> None:
    """Five ticks, each in the schedule's zone with its UTC offset; those a pause will skip
    say so; an override lists the ticks it gives its job, a disabled schedule none."""
    row = Schedule.objects.create(
        name="paris_mark", job="mark", args=["hi"], cron="30 2 * * *", timezone="Europe/Paris"
    )
    page = editor.get(change_url(row)).content.decode()
    ticks = page.split('class="next-tick">')[1:]
    assert len(ticks) == 5, page
    assert all(" UTC+0" in tick and " 02:30:00 " in tick for tick in ticks)
    JobState.objects.create(job="paris_mark", paused=True)
    paused = editor.get(change_url(row)).content.decode()
    assert paused.count("skipped: paused<") == 5, paused
    every = override(every=3600)
    hourly = editor.get(change_url(every)).content.decode().split('class="next-tick">')[1:]
    assert len(hourly) == 5 and all(":00:00 UTC+00:00" in tick for tick in hourly)
    Schedule.objects.filter(pk=row.pk).update(enabled=False)
    assert "none: it is disabled" in editor.get(change_url(row)).content.decode()


PREVIEW_URL = reverse("admin:django_advisory_cron_schedule_preview")


def test_the_form_previews_the_next_ticks_of_what_is_typed(
    editor: Client, django_user_model: Any
) -> None:
    """The add form's script asks preview/ as people type: five ticks in the zone typed, or
    the problems the form would show; only for those who may add or change a schedule."""
    paris = editor.get(PREVIEW_URL, {"cron": "30 2 * * *", "timezone": "Europe/Paris"}).json()
    assert paris["zone"] == "Europe/Paris" and paris["problems"] == []
    assert len(paris["ticks"]) == 5
    assert all(
        t["when"].endswith(" 02:30:00") and t["offset"] in ("UTC+01:00", "UTC+02:00")
        for t in paris["ticks"]
    )
    every = editor.get(PREVIEW_URL, {"every": "90"}).json()["ticks"]
    assert len(every) == 5 and every[0]["offset"] == "UTC+00:00"
    bad = editor.get(PREVIEW_URL, {"cron": "61 * * * *"}).json()
    assert bad["ticks"] == [] and bad["problems"][0].startswith("bad cron expression"), bad
    both = editor.get(PREVIEW_URL, {"cron": "* * * * *", "every": "5"}).json()["problems"]
    assert "not both" in both[0]
    once = editor.get(
        PREVIEW_URL, {"at_0": "2099-12-24", "at_1": "18:00", "timezone": "Europe/Berlin"}
    ).json()
    assert once["problems"] == [] and [t["when"] for t in once["ticks"]] == [
        "2099-12-24 18:00:00"
    ], once
    late = editor.get(PREVIEW_URL, {"at_0": "2099-12-24", "at_1": "soon"}).json()
    assert late["ticks"] == [] and late["problems"][0].startswith("at must be"), late
    zone = editor.get(PREVIEW_URL, {"cron": "* * * * *", "timezone": "Mars/Olympus"}).json()
    assert zone["ticks"] == [] and "Mars/Olympus" in zone["problems"][0]
    JobState.objects.update_or_create(job="code_yearly", defaults={"paused": True})
    paused = editor.get(PREVIEW_URL, {"name": "code_yearly", "cron": "0 3 * * *"}).json()
    assert {t["note"] for t in paused["ticks"]} == {"skipped: paused"}
    viewer = logged_in(django_user_model, "viewer", ["view_schedule"])
    assert viewer.get(PREVIEW_URL, {"cron": "* * * * *"}).status_code == 403
    add_page = editor.get(ADD_URL).content.decode()
    assert f'data-preview="{PREVIEW_URL}"' in add_page
    assert "django_advisory_cron/schedule_preview.js" in add_page
