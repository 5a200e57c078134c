"""``ADVISORY_CRON["SCHEDULES"]``: schedules declared in settings in django-crontab's shape
(tuples, its ``call_command`` form, dotted paths of registered jobs) or as dicts, registered at
start-up as jobs of their own with readable names, run by ``runlocked``, overridden by
``cronjob edit``; a bad entry is one system check error with an id per kind of problem, in
real subprocesses against a real PostgreSQL (issue 23)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from django_advisory_cron import exitcodes
from django_advisory_cron.models import Schedule
from tests.jobsapp.models import Marker

pytestmark = pytest.mark.usefixtures("transactional_db")

CALL_COMMAND = "django.core.management.call_command"

#: Entries in every accepted shape; JSON makes the tuples lists, as settings written in JSON
#: or YAML would.
ENTRIES: list[Any] = [
    ["*/5 * * * *", "mark", ["five"]],
    ["0 4 * * *", "mark", ["four"], {"note": "n", "seconds": 0}],
    ["0 3 * * *", CALL_COMMAND, ["marker", "tidy"], {"note": "crontab"}],
    ["30 * * * *", "tests.jobsapp.schedule_tasks.mark", ["dotted"]],
    {
        "name": "hourly-report",
        "job": "mark",
        "kwargs": {"label": "report"},
        "every": 3600,
        "catch_up": "none",
        "description": "the hourly report",
    },
    {
        "command": "marker",
        "args": ["dict-form"],
        "schedule": "15 2 * * *",
        "timezone": "Europe/Paris",
    },
]
#: Their names: given, or derived from what they call.
NAMES = {
    "mark(five)": "*/5 * * * *",
    "mark(four, note=n, seconds=0)": "0 4 * * *",
    "marker tidy note=crontab": "0 3 * * *",
    "mark(dotted)": "30 * * * *",
    "hourly-report": "every 1h",
    "marker dict-form": "15 2 * * *",
}


def declare(monkeypatch: pytest.MonkeyPatch, entries: Any) -> None:
    monkeypatch.setenv(
        "ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "schedule_tasks", "SCHEDULES": entries})
    )


@pytest.mark.slow  # about 10 s of processes: started first, beside the other slow tests
def test_every_shape_of_entry_is_a_job_of_its_own(
    manage: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    declare(monkeypatch, ENTRIES)
    checked = manage("check")
    assert (checked.returncode, checked.stderr) == (0, ""), checked.stderr

    listed = manage("cronjob", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    jobs = {job["job"]: job for job in json.loads(listed.stdout)["jobs"]}
    declared = {name: job["schedule"] for name, job in jobs.items() if job["source"] == "settings"}
    assert declared == NAMES
    assert jobs["marker dict-form"]["timezone"] == "Europe/Paris"
    assert (jobs["mark"]["source"], jobs["code_yearly"]["source"]) == ("code", "code")

    for name in ("mark(five)", "mark(four, note=n, seconds=0)", "marker tidy note=crontab"):
        ran = manage("runlocked", "--manual", name)
        assert ran.returncode == exitcodes.OK, ran.stderr
    for name in ("mark(dotted)", "hourly-report", "marker dict-form"):
        assert manage("runlocked", "--manual", name).returncode == exitcodes.OK
    assert sorted(Marker.objects.values_list("job", "note")) == [
        ("dict-form", ""),
        ("dotted", ""),
        ("five", ""),
        ("four", "n"),
        ("report", ""),
        ("tidy", "crontab"),
    ]

    crontab = manage("cronjob", "crontab").stdout
    assert re.search(r"^\*/5 \* \* \* \* .* runlocked 'mark\(five\)'$", crontab, re.MULTILINE)


def test_a_settings_schedule_is_overridden_like_a_code_job(
    manage: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    declare(monkeypatch, ENTRIES[:1])
    edited = manage("cronjob", "edit", "mark(five)", "--schedule", "0 1 * * *")
    assert edited.returncode == 0, edited.stderr
    assert edited.stdout == (
        "mark(five): overridden in the database: 0 1 * * * (in ADVISORY_CRON['SCHEDULES']: "
        "*/5 * * * *); 'manage.py cronjob reset mark(five)' goes back to that.\n"
    )
    assert Schedule.objects.get(name="mark(five)").override
    shown = manage("cronjob", "list").stdout
    assert re.search(r"^mark\(five\)\s+settings, overridden: schedule\s+0 1 \* \* \* ", shown, re.M)
    removed = manage("cronjob", "remove", "mark(five)")
    assert (removed.returncode, removed.stderr) == (
        exitcodes.USAGE,
        "cronjob: cannot remove 'mark(five)': it is defined in ADVISORY_CRON['SCHEDULES'], and "
        "removed there; 'manage.py cronjob reset mark(five)' drops its override\n",
    )
    reset = manage("cronjob", "reset", "mark(five)")
    assert reset.stdout == (
        "mark(five): override removed; back to its schedule in ADVISORY_CRON['SCHEDULES']: "
        "*/5 * * * *.\n"
    )
    assert not Schedule.objects.exists()


#: Bad entries, each with the check id and the message it is reported with.
BAD = [
    ("0 * * * *", "E171", "[0]: is neither a (cron, job, args, kwargs) tuple (2 to 4 items) nor "
     "a dict, but str 0 * * * *."),
    (["0 * * * *"], "E171", "[1]: is neither a (cron, job, args, kwargs) tuple (2 to 4 items) "
     "nor a dict, but list ['0 * * * *']."),
    ({"job": "mark", "args": ["x"], "cron": "0 * * * *"}, "E171", "[2]: has no key 'cron' (the "
     "keys: name, job, command, args, kwargs, schedule, every, timezone, enabled, catch_up, "
     "max_lateness, late_after, jitter, timeout, deliver, description, starts, ends, retries, "
     "retry_backoff, at_most_once, capture, at, max_runs, calendar)."),
    (["0 * * * *", CALL_COMMAND, []], "E171", f"[3]: calls {CALL_COMMAND} without the "
     "command's name as its first argument."),
    (["0 * * * *", "mark", ["a"]], None, ""),
    (["*/2 * * * *", "mark", ["a"]], "E172", "[5] ('mark(a)'): entry 4 has the same name; give "
     "one of them a name of its own (the dict form's 'name')."),
    ({"name": "code_yearly", "job": "mark", "args": ["x"], "every": 60}, "E172",
     "[6] ('code_yearly'): the name 'code_yearly' is taken by a job defined in code; pick "
     "another name, or override that job's schedule instead."),
    (["0 * * * *", "myapp.cron.my_scheduled_job"], "E173", "[7] ('myapp.cron.my_scheduled_job()'"
     "): there is no registered job 'myapp.cron.my_scheduled_job'."),
    (["0 * * * *", "mark"], "E173", "[8] ('mark()'): job 'mark' cannot be called with these "
     "arguments: missing a required argument: 'label'."),
    (["0 * * * *", CALL_COMMAND, ["nosuch"]], "E173", "[9] ('nosuch'): there is no management "
     "command 'nosuch'; see manage.py help."),
    (["0 0 30 2 *", "mark", ["b"]], "E174", "[10] ('mark(b)'): '0 0 30 2 *' never fires"),
    ({"job": "mark", "args": ["c"], "every": 60, "timezone": "Europe/Paris"}, "E174",
     "[11] ('mark(c)'): a time zone applies to a cron expression, not to an interval."),
    ({"job": "mark", "args": ["d"], "every": 60, "catch_up": "sometimes"}, "E175",
     "[12] ('mark(d)'): catch-up must be one of latest, all, none, not 'sometimes'."),
    # A sub-microsecond interval is no timedelta: checked as the job holds it (issue 33).
    ({"job": "mark", "args": ["e"], "every": 1e-7}, "E174", "[13] ('mark(e)'): the interval "
     "must be a number of seconds from 1 to 31622400 (366 days), not 1e-07."),
    ({"job": "mark", "args": ["f"], "every": 60, "timeout": 1e300}, "E175", "[14] ('mark(f)'): "
     "the timeout must be a number of seconds from 0.000001 to 31622400 (366 days), not "
     "1e+300."),
]  # fmt: skip


def test_each_bad_entry_is_one_check_error_with_the_id_of_its_kind(
    manage: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    declare(monkeypatch, [entry for entry, _code, _says in BAD])
    checked = manage("check")
    assert checked.returncode == 1
    assert "Traceback" not in checked.stderr
    reported = re.findall(r"^\?: \(django_advisory_cron\.(E\d+)\) (.*)$", checked.stderr, re.M)
    expected = [(code, says) for _entry, code, says in BAD if code]
    assert len(reported) == len(expected), checked.stderr
    for (code, line), (wanted, says) in zip(sorted(reported), sorted(expected), strict=True):
        assert code == wanted and line.startswith(f"ADVISORY_CRON['SCHEDULES']{says}"), line

    # The commands refuse to start, one line per error; the good entry is registered.
    refused = manage("cronjob", "list")
    assert refused.returncode == exitcodes.CONFIG
    assert len(refused.stderr.splitlines()) == len(expected)
    ran = manage("runlocked", "--skip-checks", "--manual", "mark(a)")
    assert ran.returncode == exitcodes.OK, ran.stderr
    assert Marker.objects.get().job == "a"


def test_schedules_that_are_not_a_list_are_a_settings_error(
    manage: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    declare(monkeypatch, "0 * * * * mark")
    checked = manage("check")
    assert checked.returncode == 1
    assert (
        "?: (django_advisory_cron.E170) ADVISORY_CRON['SCHEDULES'] must be a list of schedules: "
        "(cron, job, args, kwargs) tuples or dicts\n"
    ) in checked.stderr
