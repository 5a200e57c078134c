"""A job's lateness target, ``late_after`` (issue 39, item 3): a job whose runs start later after
their ticks than its target is late in ``cronstatus``, ``health/``, the Jobs page and ``cronjob
list``, before it is overdue; nothing is skipped for it (``max_lateness`` skips). Set with
``cronjob``, the admin's form and ``ADVISORY_CRON["SCHEDULES"]`` (the decorator's:
tests/unit/test_catchup.py), refused in one line where typed. Real subprocesses and the test
client, against the real PostgreSQL."""

from __future__ import annotations

import html
import importlib
import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from django.test.utils import override_settings
from django.urls import reverse
from django.utils import timezone

from django_advisory_cron import exitcodes
from django_advisory_cron.models import JobRun, RunStatus, Schedule
from tests.admin_users import logged_in
from tests.test_cronjob_schedules import ok, refused

pytestmark = pytest.mark.usefixtures("transactional_db")

DAY = timedelta(days=1)
#: Two days of grace before a job is overdue: long enough to see it late first.
GRACE = {"OVERDUE_GRACE": 2 * 86400}
HEALTH = "/cron/health/"
JOBS_URL = reverse("admin:django_advisory_cron_registeredjob_changelist")
ADD_URL = reverse("admin:django_advisory_cron_schedule_add")


def configure(monkeypatch: pytest.MonkeyPatch, **options: Any) -> None:
    """The subprocesses' settings: the schedule jobs, and ``options``."""
    value = json.dumps({"JOBS_MODULE": "schedule_tasks", **options})
    monkeypatch.setenv("ADVISORY_CRON_JSON", value)


def todays_tick() -> datetime:
    """The latest tick of a daily interval: midnight UTC (an interval ticks on the epoch's
    grid)."""
    return timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)


def ran(tick: datetime, after: float, *, manual: bool = False) -> None:
    """A run of ``lag`` that started ``after`` seconds after ``tick`` (a manual one has none)."""
    started = tick + timedelta(seconds=after)
    JobRun.objects.create(
        job="lag",
        tick=None if manual else tick,
        host="h",
        pid=1,
        started=started,
        finished=started + timedelta(seconds=1),
        status=RunStatus.SUCCEEDED,
        manual=manual,
    )


def status(manage: Any, *options: str) -> tuple[int, dict[str, Any]]:
    result = manage("cronstatus", "--json", "--job", "lag", *options)
    return result.returncode, json.loads(result.stdout)["jobs"][0]


def add_lag(manage: Any) -> None:
    added = manage(
        "cronjob", "add", "lag", "--command", "marker", "--args", '["x"]', "--every", "86400",
        "--late-after", "5",
    )  # fmt: skip
    ok(added)
    assert Schedule.objects.get(name="lag").late_after == 5


def test_a_run_that_started_past_its_target_makes_the_job_late(
    manage: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(monkeypatch, **GRACE)
    add_lag(manage)
    tick = todays_tick()
    ran(tick, 30)
    code, job = status(manage)
    assert (code, job["problems"], job["late"], job["overdue"]) == (
        exitcodes.UNHEALTHY, ["late"], True, False
    )  # fmt: skip
    assert (job["late_after"], job["started_after_tick"]) == (5.0, 30.0)
    line = ok(manage("cronstatus", "--all", "--job", "lag", "--ignore", "late"))
    first = line.splitlines()[0]
    assert first.startswith("lag: LATE (last run succeeded at "), line
    assert first.endswith("; its last run started 30.0 s after its tick (late after 5.0 s))"), line
    listed = ok(manage("cronjob", "list"))
    assert "LATE: its last run started 30.0 s after its tick (late after 5.0 s)" in listed

    # A manual run answers no tick: the last run that had one still says how late they start.
    ran(tick, 40, manual=True)
    assert status(manage)[1]["late"] is True
    JobRun.objects.filter(job="lag", manual=False).update(started=tick + timedelta(seconds=2))
    code, job = status(manage)
    assert (code, job["problems"], job["started_after_tick"]) == (exitcodes.OK, [], 2.0)


def test_a_tick_waiting_past_its_target_is_late_then_overdue(
    manage: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its last run was on time two days ago: yesterday's tick has had no run since. Within
    the grace before overdue, the job is late; past it, overdue (and no longer late); paused,
    neither. Declared in settings: a database schedule's ticks before it was written are
    not missed."""
    lag = {"name": "lag", "command": "marker", "args": ["x"], "every": 86400, "late_after": 5}
    configure(monkeypatch, SCHEDULES=[lag], **GRACE)
    ran(todays_tick() - 2 * DAY, 1)
    code, job = status(manage)
    assert (code, job["problems"], job["started_after_tick"]) == (
        exitcodes.UNHEALTHY, ["late"], 1.0
    )  # fmt: skip
    yesterday = (todays_tick() - DAY).isoformat(timespec="seconds")
    said = manage("cronstatus", "--job", "lag").stdout
    assert f"tick {yesterday} has no run yet (late after 5.0 s))" in said

    configure(monkeypatch, SCHEDULES=[lag])  # the default grace: 5 minutes
    code, job = status(manage)
    assert (code, job["problems"], job["late"]) == (exitcodes.UNHEALTHY, ["overdue"], False)

    configure(monkeypatch, SCHEDULES=[lag], **GRACE)
    ok(manage("cronjob", "pause", "lag"))
    code, job = status(manage)
    assert (code, job["problems"]) == (exitcodes.OK, [])


def test_the_health_view_and_the_jobs_page_say_late(django_user_model: Any) -> None:
    Schedule.objects.create(name="lag", command="marker", args=["x"], every=86400, late_after=5)
    ran(todays_tick(), 30)
    client = Client()
    # The test settings' own (the commands a schedule may call), the view open, the grace.
    with override_settings(
        ADVISORY_CRON={**settings.ADVISORY_CRON, "ENDPOINT_ACCESS": "open", **GRACE}
    ):
        answer = client.get(HEALTH)
        assert answer.status_code == 503, answer.content
        assert answer.json()["unhealthy"] == ["lag"]
        (job,) = [item for item in answer.json()["jobs"] if item["job"] == "lag"]
        assert (job["late"], job["problems"]) == (True, ["late"])
        assert client.get(HEALTH, {"ignore": "late"}).status_code == 200

        viewer = logged_in(django_user_model, "viewer", ["view_registeredjob", "view_jobrun"])
        page = html.unescape(viewer.get(JOBS_URL).content.decode())
        row = page.split('data-job="lag"')[1].split("</tr>")[0]
        assert "<strong" in row and ">LATE</strong>" in row
        assert "its last run started 30.0 s after its tick (late after 5.0 s)" in row


def test_cronjob_and_the_settings_refuse_a_bad_target_in_one_line(
    manage: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(monkeypatch)
    base = ("cronjob", "add", "lag", "--command", "marker", "--args", '["x"]', "--every", "60")
    assert refused(manage(*base, "--late-after", "soon")) == (
        "cronjob: cannot add 'lag': --late-after must be a number of seconds, not 'soon'"
    )
    assert refused(manage(*base, "--late-after", "0")) == (
        "cronjob: cannot add 'lag': the lateness target (late_after) must be a number of "
        "seconds from 0.000001 to 31622400 (366 days), not 0"
    )
    add_lag(manage)
    ok(manage("cronjob", "edit", "lag", "--late-after", ""))  # empty: no target
    assert Schedule.objects.get(name="lag").late_after is None

    entries = [
        {"name": "s-late", "command": "marker", "args": ["x"], "every": 60, "late_after": 90},
        {"name": "s-bad", "command": "marker", "args": ["x"], "every": 60, "late_after": -3},
    ]
    configure(monkeypatch, SCHEDULES=entries)
    checked = manage("check")
    errors = [line for line in checked.stderr.splitlines() if line.startswith("?:")]
    assert errors == [
        "?: (django_advisory_cron.E175) ADVISORY_CRON['SCHEDULES'][1] ('s-bad'): the lateness "
        "target (late_after) must be a number of seconds from 0.000001 to 31622400 (366 days), "
        "not -3."
    ], checked.stderr
    configure(monkeypatch, SCHEDULES=entries[:1])
    document = json.loads(ok(manage("cronjob", "list", "--json")))
    (declared,) = [job for job in document["jobs"] if job["job"] == "s-late"]
    assert (declared["late_after"], declared["late"]) == (90.0, False)


@pytest.fixture
def editor(fresh_registry: None, django_user_model: Any) -> Client:
    importlib.reload(importlib.import_module("tests.jobsapp.schedule_tasks"))
    codenames = ["view_registeredjob", "view_schedule", "add_schedule", "change_schedule"]
    return logged_in(django_user_model, "editor", codenames)


def test_the_admin_form_sets_a_target_and_refuses_a_bad_one_at_its_field(
    editor: Client,
) -> None:
    form = {
        "name": "nightly_mark", "job": "mark", "command": "", "args": '["n"]', "kwargs": "{}",
        "cron": "0 3 * * *", "enabled": "on", "retries": "", "retry_backoff": "",
        "at_most_once": "unknown", "capture": "unknown",
    }  # fmt: skip
    page = " ".join(html.unescape(editor.get(ADD_URL).content.decode()).split())
    assert "Nothing is skipped (max lateness skips a tick instead)." in page
    answer = editor.post(ADD_URL, {**form, "late_after": "-1"})
    assert answer.status_code == 200
    errors = answer.context["adminform"].form.errors
    assert list(errors) == ["late_after"], errors
    assert errors["late_after"][0].startswith("the lateness target (late_after) must be ")
    answer = editor.post(ADD_URL, {**form, "late_after": "90"})
    assert answer.status_code == 302, answer.context["adminform"].form.errors
    assert Schedule.objects.get(name="nightly_mark").late_after == 90
