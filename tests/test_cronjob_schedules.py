"""``manage.py cronjob add|edit|reset|remove``, and the other actions on schedules kept in the
database, in real subprocesses against a real PostgreSQL: what they write, what they print,
and the one line and exit code of every kind of bad input (issue 23)."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

import pytest
from django.utils import timezone

from django_advisory_cron import exitcodes
from django_advisory_cron.core.schedule import Schedule as Timetable
from django_advisory_cron.models import JobRun, RunStatus, Schedule
from django_advisory_cron.ops import control
from tests.jobsapp.models import Marker

from .test_messages import closed_port
from .waiting import wait_for, wait_for_workers

pytestmark = pytest.mark.usefixtures("transactional_db")


@pytest.fixture(autouse=True)
def schedule_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "schedule_tasks"}))


def listed(manage: Any) -> dict[str, list[str]]:
    """The rows of ``cronjob list``, by job, as cells (the header's cells under ``JOB``)."""
    shown = manage("cronjob", "list")
    assert (shown.returncode, shown.stderr) == (0, ""), shown.stderr
    rows = [re.split(r"\s{2,}", line) for line in shown.stdout.splitlines()[:-1]]
    return {row[0]: row[1:] for row in rows}


def ok(result: Any) -> str:
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    return str(result.stdout)


def refused(result: Any) -> str:
    """The one line a refusal printed (exit 2, nothing on stdout)."""
    assert (result.returncode, result.stdout) == (exitcodes.USAGE, ""), result.stdout
    assert result.stderr.count("\n") == 1, result.stderr
    return str(result.stderr.rstrip("\n"))


def tick_text(cron: str, zone: str, now: datetime) -> str:
    return f"{Timetable(cron, zone=zone).next_tick(now):%Y-%m-%d %H:%M:%S}"


def test_add_list_edit_and_remove_a_schedule_that_calls_a_job(manage: Any) -> None:
    added = manage(
        "cronjob", "add", "nightly", "--job", "mark", "--kwargs", '{"label": "nightly"}',
        "--schedule", "0 3 * * *", "--timezone", "Europe/Paris",
        "--description", "the nightly mark",
    )  # fmt: skip
    assert ok(added) == (
        "nightly: added, calling job mark, 0 3 * * * in Europe/Paris. Running cronworkers "
        "follow at once; cron can call 'manage.py runlocked nightly'.\n"
    )
    row = Schedule.objects.get(name="nightly")
    assert (row.override, row.job, row.command, row.args, row.kwargs) == (
        False, "mark", "", [], {"label": "nightly"},
    )  # fmt: skip
    assert (row.cron, row.every, row.timezone, row.enabled, row.description) == (
        "0 3 * * *", None, "Europe/Paris", True, "the nightly mark",
    )  # fmt: skip
    assert row.changed_by == control.operator()  # the operator, as pause records one

    before = timezone.now()
    rows = listed(manage)
    ticks = {tick_text("0 3 * * *", "Europe/Paris", at) for at in (before, timezone.now())}
    source, schedule, tick, last, deliver, state = rows["nightly"]
    assert (source, schedule, last, deliver, state) == (
        "database", "0 3 * * *", "never ran", "-", "active",
    )  # fmt: skip
    assert tick in ticks
    assert rows["code_yearly"][:2] == ["code", "0 0 1 1 *"]
    assert rows["JOB"] == ["SOURCE", "SCHEDULE", "NEXT TICK (UTC)", "LAST RUN", "DELIVER", "STATE"]

    every = manage("cronjob", "edit", "nightly", "--every", "30")
    assert ok(every) == "nightly: changed (--every); it calls job mark, every 30s.\n"
    row.refresh_from_db()
    assert (row.cron, row.every, row.timezone, row.kwargs) == ("", 30, "", {"label": "nightly"})

    disabled = manage("cronjob", "edit", "nightly", "--disable", "--description", "")
    assert ok(disabled) == (
        "nightly: changed (--description, --disable); it calls job mark, every 30s, disabled.\n"
    )
    assert listed(manage)["nightly"][-1] == "disabled"
    row.refresh_from_db()
    assert (row.enabled, row.description) == (False, "")

    removed = manage("cronjob", "remove", "nightly")
    assert ok(removed) == "nightly: removed (it called job mark); its run history is kept.\n"
    assert not Schedule.objects.exists()
    assert "nightly" not in listed(manage)


def test_runlocked_trigger_history_and_pause_find_an_added_schedule(manage: Any) -> None:
    ok(
        manage(
            "cronjob", "add", "marked", "--job", "mark", "--args", '["via-add"]',
            "--kwargs", '{"note": "cli"}', "--every", "3600",
        )
    )  # fmt: skip
    ran = manage("runlocked", "marked")
    assert ran.returncode == exitcodes.OK, ran.stderr
    assert ran.stdout.startswith("marked: ran (run ")
    here = manage("cronjob", "trigger", "--here", "marked")
    assert here.returncode == exitcodes.OK, here.stderr
    assert list(Marker.objects.values_list("job", "note")) == [("via-add", "cli")] * 2
    runs = JobRun.objects.filter(job="marked")
    assert sorted(runs.values_list("status", "manual")) == [
        (RunStatus.SUCCEEDED, False), (RunStatus.SUCCEEDED, True),
    ]  # fmt: skip
    history = ok(manage("cronjob", "history", "marked")).splitlines()
    assert len(history) == 3 and "succeeded (manual)" in history[1]

    paused = manage("cronjob", "pause", "marked", "--reason", "quiet please")
    assert "marked: paused by" in ok(paused)
    assert listed(manage)["marked"][-1].endswith(": quiet please")
    assert "marked: resumed" in ok(manage("cronjob", "resume", "marked"))

    ok(manage("cronjob", "add", "quiet", "--command", "noop", "--every", "3600"))
    assert manage("runlocked", "quiet").returncode == exitcodes.OK
    assert JobRun.objects.get(job="quiet").status == RunStatus.SUCCEEDED


def marks(label: str) -> int:
    return Marker.objects.filter(job=label).count()


@pytest.mark.slow
def test_a_running_cronworker_follows_add_edit_and_remove(
    manage: Any, spawn: Any, raw_connect: Any
) -> None:
    worker = spawn("cronworker", "--grace", "10")
    wait_for_workers(raw_connect(), [worker])
    ok(manage("cronjob", "add", "often", "--job", "mark", "--args", '["often"]', "--every", "1"))
    wait_for(lambda: marks("often"), timeout=30)
    # A worker follows the changes in the order they were made: once a schedule added after
    # another change has ticked twice, the change before it holds.
    ok(manage("cronjob", "edit", "often", "--disable"))
    ok(manage("cronjob", "add", "after", "--job", "mark", "--args", '["after"]', "--every", "1"))
    wait_for(lambda: marks("after") >= 2, timeout=30)
    often = marks("often")
    ok(manage("cronjob", "remove", "after"))
    ok(manage("cronjob", "add", "last", "--job", "mark", "--args", '["last"]', "--every", "1"))
    wait_for(lambda: marks("last") >= 2, timeout=30)
    after = marks("after")
    wait_for(lambda: marks("last") >= 4, timeout=30)
    worker.terminate()
    _out, err = worker.communicate(timeout=30)
    assert "Traceback" not in err, err
    assert (marks("often"), marks("after")) == (often, after)
    for name in ("often", "after", "last"):
        ticks = list(JobRun.objects.filter(job=name).values_list("tick", flat=True))
        assert len(ticks) == len(set(ticks)) == marks(name), name


@pytest.mark.slow  # about 10 s of processes: started first, beside the other slow tests
def test_edit_overrides_a_code_job_and_reset_goes_back_to_the_code(manage: Any) -> None:
    edited = manage("cronjob", "edit", "code_yearly", "--schedule", "*/5 * * * *")
    assert ok(edited) == (
        "code_yearly: overridden in the database: */5 * * * * (in code: 0 0 1 1 *); "
        "'manage.py cronjob reset code_yearly' goes back to that.\n"
    )
    row = Schedule.objects.get(name="code_yearly")
    assert (row.override, row.job, row.cron, row.every, row.timezone, row.enabled) == (
        True, "", "*/5 * * * *", None, "", True,
    )  # fmt: skip
    assert listed(manage)["code_yearly"][:2] == ["code, overridden: schedule", "*/5 * * * *"]

    ok(manage("cronjob", "edit", "code_yearly", "--disable"))
    rows = listed(manage)
    assert rows["code_yearly"][0] == "code, overridden: schedule, disabled"
    assert rows["code_yearly"][-1] == "disabled"
    skipped = manage("runlocked", "code_yearly")
    assert "skipped, its schedule is disabled" in ok(skipped)

    assert refused(manage("cronjob", "edit", "code_yearly", "--job", "mark")) == (
        "cronjob: cannot edit 'code_yearly': it is defined in code: change --job there; edit "
        "changes only its --schedule, --every or --timezone, and --enable/--disable"
    )
    assert refused(manage("cronjob", "remove", "code_yearly")) == (
        "cronjob: cannot remove 'code_yearly': it is defined in code, and removed there; "
        "'manage.py cronjob reset code_yearly' drops its override"
    )
    reset = manage("cronjob", "reset", "code_yearly")
    assert ok(reset) == (
        "code_yearly: override removed; back to its schedule in code: 0 0 1 1 *.\n"
    )
    assert not Schedule.objects.exists()
    assert listed(manage)["code_yearly"][:2] == ["code", "0 0 1 1 *"]
    again = manage("cronjob", "reset", "code_yearly")
    assert ok(again) == (
        "code_yearly: has no override; nothing to do (it runs 0 0 1 1 *, as in code).\n"
    )
    assert refused(manage("cronjob", "remove", "code_yearly")).endswith(
        "it is defined in code, and removed there; 'manage.py cronjob edit code_yearly "
        "--disable' takes its ticks away"
    )

    # A zone alone reads the code's cron expression in that zone.
    ok(manage("cronjob", "edit", "code_yearly", "--timezone", "Europe/Paris"))
    row = Schedule.objects.get(name="code_yearly")
    assert (row.override, row.cron, row.timezone) == (True, "0 0 1 1 *", "Europe/Paris")


NAME_TAKEN = (
    "the name 'code_yearly' is taken by a job defined in code; pick another name, or override "
    "that job's schedule instead"
)
BAD_INPUT = [
    (["--job", "marc", "--every", "60"], "there is no registered job 'marc'; did you mean mark?"),
    (
        ["--command", "nosuch", "--every", "60"],
        "there is no management command 'nosuch'; see manage.py help",
    ),
    (
        ["--command", "clearsesions", "--every", "60"],
        "there is no management command 'clearsesions'; did you mean clearsessions?",
    ),
    (
        ["--job", "mark", "--args", "[1, 2, 3, 4]", "--every", "60"],
        "job 'mark' cannot be called with these arguments: too many positional arguments",
    ),
    (
        ["--command", "noop", "--args", '["--nope"]', "--every", "60"],
        "manage.py noop refuses these arguments: unrecognized arguments: --nope",
    ),
    (
        ["--job", "mark", "--args", "[1,", "--every", "60"],
        "--args is not JSON (Expecting value: line 1 column 4 (char 3)); give a JSON list such "
        "as '[\"daily\", 2]'",
    ),
    (
        ["--job", "mark", "--args", '{"label": "x"}', "--every", "60"],
        "the arguments must be a JSON list, not dict",
    ),
    (
        ["--job", "mark", "--command", "noop", "--every", "60"],
        "a schedule calls either a job or a management command (one of the two)",
    ),
    (
        ["--command", "noop"],
        "a schedule needs a cron expression or an interval (every N seconds)",
    ),
    (
        ["--command", "noop", "--schedule", "0 * * * *", "--every", "60"],
        "a schedule has either a cron expression or an interval, not both",
    ),
    (
        ["--command", "noop", "--schedule", "61 * * * *"],
        "bad cron expression: '61 * * * *' is not a valid cron expression: minute 61 is out "
        "of range 0-59",
    ),
    (
        ["--command", "noop", "--schedule", "0 0 30 2 *"],
        "'0 0 30 2 *' never fires: no date matches its day of month, month and weekday fields "
        "(such as 30 February or 31 April); name a day that its months have, or L for the "
        "last day of the month",
    ),
    (["--command", "noop", "--every", "soon"], "--every must be a number of seconds, not 'soon'"),
    (
        ["--command", "noop", "--every", "0"],
        "the interval must be a number of seconds from 1 to 31622400 (366 days), not 0",
    ),
    (
        ["--command", "noop", "--every", "60", "--catch-up", "sometimes"],
        "catch-up must be one of latest, all, none, not 'sometimes'",
    ),
    (
        ["--command", "noop", "--every", "60", "--starts", "tomorrow"],
        "--starts must be an ISO 8601 date-time such as 2026-12-24T08:00 (or "
        "2026-12-24T08:00+01:00), not 'tomorrow'",
    ),
    (
        ["--command", "noop", "--every", "60", "--starts", "2027-01-02", "--ends", "2027-01-01"],
        "the schedule ends before it starts",
    ),
    (
        ["--command", "noop", "--every", "60", "--description", "x" * 501],
        "the description is 501 characters long; at most 500",
    ),
    (
        ["--job", "marc", "--schedule", "61 * * * *"],
        "there is no registered job 'marc'; did you mean mark?; bad cron expression: "
        "'61 * * * *' is not a valid cron expression: minute 61 is out of range 0-59",
    ),
]


@pytest.mark.parametrize(("options", "says"), BAD_INPUT, ids=[says[:40] for _, says in BAD_INPUT])
def test_add_refuses_a_schedule_that_cannot_run_in_one_line(
    manage: Any, options: list[str], says: str
) -> None:
    assert refused(manage("cronjob", "add", "x", *options)) == f"cronjob: cannot add 'x': {says}"
    assert not Schedule.objects.exists()


@pytest.mark.slow  # about 10 s of processes: started first, beside the other slow tests
def test_add_and_edit_refuse_names_zones_and_empty_edits(manage: Any) -> None:
    taken = manage("cronjob", "add", "code_yearly", "--command", "noop", "--every", "60")
    assert refused(taken) == f"cronjob: cannot add 'code_yearly': {NAME_TAKEN}"
    zone = refused(manage("cronjob", "add", "x", "--command", "noop", "--schedule", "0 * * * *",
                          "--timezone", "Mars/Olympus"))  # fmt: skip
    assert zone.startswith("cronjob: cannot add 'x': ") and "Mars/Olympus" in zone
    ok(manage("cronjob", "add", "x", "--command", "noop", "--every", "60"))
    twice = manage("cronjob", "add", "x", "--command", "noop", "--every", "90")
    assert refused(twice) == (
        "cronjob: cannot add 'x': a schedule of that name is kept in the database; change it "
        "with 'manage.py cronjob edit x'"
    )
    assert refused(manage("cronjob", "edit", "x")) == (
        "cronjob: cannot edit 'x': nothing to change; see manage.py cronjob edit -h"
    )
    assert refused(manage("cronjob", "edit", "x", "--every", "-1")) == (
        "cronjob: cannot edit 'x': the interval must be a number of seconds from 1 to 31622400 "
        "(366 days), not -1"
    )
    assert refused(manage("cronjob", "reset", "x")) == (
        "cronjob: cannot reset 'x': it is a schedule kept in the database, with no code to go "
        "back to; change it with 'manage.py cronjob edit x', or remove it"
    )
    assert refused(manage("cronjob", "remove", "xx")) == (
        "cronjob: no job named 'xx'; did you mean x?"
    )
    assert refused(manage("cronjob", "add")) == (
        "cronjob: add: the following arguments are required: NAME (see manage.py cronjob add -h)"
    )
    assert Schedule.objects.get().every == 60


def test_a_schedule_that_cannot_run_is_listed_apart_and_can_be_mended(manage: Any) -> None:
    # Saved when its job existed; the job has since left the code.
    Schedule.objects.create(name="orphan", job="gone", every=60, changed_by="test")
    shown = ok(manage("cronjob", "list"))
    assert (
        "orphan: a database schedule that cannot run: there is no registered job 'gone' "
        "(manage.py cronjob edit orphan, or remove it)\n"
    ) in shown
    document = json.loads(ok(manage("cronjob", "list", "--json")))
    assert document["cannot_run"] == {"orphan": "there is no registered job 'gone'"}
    assert {job["job"]: job["source"] for job in document["jobs"]} == {
        "code_yearly": "code", "mark": "code",
    }  # fmt: skip
    assert refused(manage("cronjob", "history", "orphan")) == (
        "cronjob: the schedule 'orphan' cannot run: there is no registered job 'gone'; change "
        "it with 'manage.py cronjob edit orphan', or remove it"
    )
    mended = manage("cronjob", "edit", "orphan", "--job", "mark", "--args", '["o"]')
    assert ok(mended) == "orphan: changed (--job, --args); it calls job mark, every 1m.\n"
    assert listed(manage)["orphan"][:2] == ["database", "every 1m"]


def test_an_unreachable_database_exits_69_in_one_line(manage: Any) -> None:
    port = closed_port()
    for action in (["add", "x", "--command", "noop", "--every", "60"], ["remove", "x"]):
        result = manage("cronjob", *action, url=f"postgresql://postgres@127.0.0.1:{port}/x")
        assert result.returncode == exitcodes.DATABASE_UNAVAILABLE, result.stderr
        assert result.stderr.startswith(
            f"cronjob: cannot reach PostgreSQL at 127.0.0.1:{port}/x (alias 'default'): "
        )
        assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("action", "says"),
    [
        ("add", "add a schedule kept in the database, named NAME"),
        ("add", "--every SECONDS an interval instead of a cron expression, in seconds"),
        ("edit", "an override kept in the database, until reset"),
        ("edit", "--disable take its ticks away"),
        ("reset", "its schedule is the one in code (or settings) again"),
        ("remove", "delete the database schedule NAME (its run history stays)"),
        ("list", "where it is defined (SOURCE: code, settings for"),
    ],
)
def test_the_schedule_actions_have_help_of_their_own(manage: Any, action: str, says: str) -> None:
    helped = manage("cronjob", action, "-h")
    assert helped.returncode == 0, helped.stderr
    assert says in " ".join(helped.stdout.split()), helped.stdout
    listed = " ".join(manage("cronjob", "-h").stdout.split())
    assert f" {action} " in listed
    assert "usage error (an unknown job, a bad value), or a schedule that cannot run" in listed
