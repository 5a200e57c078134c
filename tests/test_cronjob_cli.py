"""``cronjob list``, ``cronjob history JOB`` and ``cronjob crontab``, in real subprocesses
against a real PostgreSQL: the exact lines they print and their exit codes (issue 27)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from django_advisory_cron import exitcodes
from django_advisory_cron.core.moments import UTC
from django_advisory_cron.core.schedule import Every, Schedule
from django_advisory_cron.models import JobRun, RunStatus
from django_advisory_cron.ops import control

from .conftest import MANAGE, manage_env

pytestmark = pytest.mark.usefixtures("transactional_db")

#: The jobs of tests/jobsapp/cli_tasks.py, by name, as their schedules tick.
SCHEDULES: dict[str, Schedule] = {
    "cli_enqueued": Schedule("*/15 * * * *"),
    "cli_every": Every(timedelta(minutes=2)),
    "cli_hourly": Schedule("0 * * * *"),
    "cli_paris": Schedule("30 2 * * *", zone="Europe/Paris"),
    "cli_seconds": Schedule("0 3 * * * 30"),
}
AT = datetime(2026, 12, 4, 9, 0, 0, 250000, tzinfo=UTC)
TRACEBACK = """Traceback (most recent call last):
  File "/srv/app/digest/tasks.py", line 12, in send
    relay.send(batch)
RuntimeError: relay refused the batch
  (421 too many connections)"""


@pytest.fixture(autouse=True)
def cli_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "cli_tasks"}))


def next_ticks(now: datetime) -> dict[str, str]:
    return {
        name: f"{schedule.next_tick(now):%Y-%m-%d %H:%M:%S}" for name, schedule in SCHEDULES.items()
    }


def at_either_end(run: Callable[[], Any], expected: Callable[[dict[str, str]], str]) -> Any:
    """Run ``run`` and assert its output is ``expected`` for the next ticks as of its start or
    its end (a tick may pass while it runs)."""
    before = timezone.now()
    result = run()
    after = timezone.now()
    assert result.returncode == 0, result.stderr
    assert result.stdout in {expected(next_ticks(before)), expected(next_ticks(after))}
    return result


def record(job: str, status: str, started: datetime, seconds: float | None, **fields: Any) -> int:
    """A run in the history, as a runner records it, at a time the test chooses."""
    finished = None if seconds is None else started + timedelta(seconds=seconds)
    run = JobRun.objects.create(
        job=job,
        status=status,
        started=started,
        finished=finished,
        host=fields.pop("host", "web-1"),
        pid=fields.pop("pid", 4242),
        **fields,
    )
    return int(run.pk)


def test_list_shows_the_next_tick_the_last_run_its_status_and_deliver(manage: Any) -> None:
    record("cli_hourly", RunStatus.SUCCEEDED, AT - timedelta(hours=1), 2)
    record("cli_hourly", RunStatus.FAILED, AT, 3.5, error=TRACEBACK)
    record("cli_hourly", RunStatus.SKIPPED_LOCKED, AT + timedelta(seconds=1), 0)
    control.pause("cli_paris", by="ops", reason="maintenance")

    def expected(tick: dict[str, str]) -> str:
        return (
            "JOB           SOURCE  SCHEDULE       NEXT TICK (UTC)      "
            "LAST RUN                    DELIVER  STATE\n"
            "cli_broken    code    (no schedule)  -                    "
            "never ran                   -        active\n"
            f"cli_enqueued  code    */15 * * * *   {tick['cli_enqueued']}  "
            "never ran                   tasks    active\n"
            f"cli_every     code    every 2m       {tick['cli_every']}  "
            "never ran                   -        active\n"
            f"cli_hourly    code    0 * * * *      {tick['cli_hourly']}  "
            "failed 2026-12-04 09:00:00  -        active\n"
            f"cli_paris     code    30 2 * * *     {tick['cli_paris']}  "
            "never ran                   -        paused by ops: maintenance\n"
            f"cli_seconds   code    0 3 * * * 30   {tick['cli_seconds']}  "
            "never ran                   -        active\n"
            "0 cronworker(s) connected\n"
        )

    at_either_end(lambda: manage("cronjob", "list"), expected)

    listed = manage("cronjob", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    document = json.loads(listed.stdout)
    assert document["cronworkers"] == 0
    jobs = {job["job"]: job for job in document["jobs"]}
    assert jobs["cli_enqueued"]["deliver"] == "tasks" and jobs["cli_hourly"]["deliver"] is None
    assert jobs["cli_hourly"]["last_run"]["status"] == "failed"
    assert jobs["cli_hourly"]["last_run"]["started"] == "2026-12-04T09:00:00.250000+00:00"
    assert jobs["cli_paris"]["paused"] == "paused by ops: maintenance"
    assert jobs["cli_paris"]["timezone"] == "Europe/Paris"


def test_history_lists_the_last_runs_newest_first(manage: Any) -> None:
    record("cli_hourly", RunStatus.SUCCEEDED, AT - timedelta(hours=2), 75, host="web-2", pid=7)
    record("cli_hourly", RunStatus.FAILED, AT - timedelta(hours=1), 3.25, error=TRACEBACK)
    record("cli_hourly", RunStatus.SKIPPED_LOCKED, AT, 0.01, error="locked by another process")
    record("cli_hourly", RunStatus.SUCCEEDED, AT + timedelta(minutes=5), 4000, manual=True)
    last = record("cli_hourly", RunStatus.RUNNING, AT + timedelta(hours=1), None)

    width = max(3, len(str(last)))

    def run(back: int) -> str:
        return str(last - back).ljust(width)

    shown = manage("cronjob", "history", "cli_hourly")
    assert (shown.returncode, shown.stderr) == (0, "")
    assert shown.stdout.splitlines() == [
        f"{'RUN'.ljust(width)}  STARTED (UTC)        DURATION    STATUS              HOST   PID   "
        "ERROR",
        f"{run(0)}  2026-12-04 10:00:00  -           running             web-1  4242",
        f"{run(1)}  2026-12-04 09:05:00  1 h 06 min  succeeded (manual)  web-1  4242",
        f"{run(2)}  2026-12-04 09:00:00  0.0 s       skipped_locked      web-1  4242  "
        "locked by another process",
        f"{run(3)}  2026-12-04 08:00:00  3.2 s       failed              web-1  4242  "
        "RuntimeError: relay refused the batch",
        f"{run(4)}  2026-12-04 07:00:00  1 min 15 s  succeeded           web-2  7",
    ]

    limited = manage("cronjob", "history", "--limit", "2", "cli_hourly")
    assert limited.stdout.splitlines() == shown.stdout.splitlines()[:3]

    as_json = manage("cronjob", "history", "--limit", "1", "--json", "cli_hourly")
    assert json.loads(as_json.stdout) == [
        {
            "id": last,
            "status": "running",
            "manual": False,
            "backfill": False,
            "tick": None,
            "jitter_offset": None,
            "host": "web-1",
            "pid": 4242,
            "started": "2026-12-04T10:00:00.250000+00:00",
            "finished": None,
            "duration": None,
            "attempts": 1,
            "error": "",
            "output": "",
            "schedule_version": None,  # not a database schedule
        }
    ]

    never = manage("cronjob", "history", "cli_paris")
    assert (never.returncode, never.stdout) == (0, "cli_paris: no runs recorded\n")


def test_history_shows_the_exception_line_of_a_real_failure(manage: Any) -> None:
    failed = manage("runlocked", "cli_broken")
    assert failed.returncode == exitcodes.JOB_FAILED, failed.stderr
    shown = manage("cronjob", "history", "cli_broken")
    assert shown.returncode == 0, shown.stderr
    _header, row = shown.stdout.splitlines()
    assert "  failed  " in row and row.endswith("  RuntimeError: disk full on /var")


def test_history_refuses_an_unknown_job_and_a_limit_below_one(manage: Any) -> None:
    unknown = manage("cronjob", "history", "cli_brokn")
    assert (unknown.returncode, unknown.stdout, unknown.stderr) == (
        exitcodes.USAGE,
        "",
        "cronjob: no job named 'cli_brokn'; did you mean cli_broken, cli_seconds?\n",
    )
    far = manage("cronjob", "history", "zzzz")
    assert (far.returncode, far.stderr) == (
        exitcodes.USAGE,
        "cronjob: no job named 'zzzz'; see cronjob list\n",
    )
    zero = manage("cronjob", "history", "--limit", "0", "cli_broken")
    assert (zero.returncode, zero.stderr) == (
        exitcodes.USAGE,
        "cronjob: history: argument --limit: must be a whole number from 1 to 10000, not '0' "
        "(see manage.py cronjob history -h)\n",
    )


def test_crontab_prints_a_runlocked_line_per_cron_job_in_its_zone(manage: Any, db_url: str) -> None:
    printed = manage("cronjob", "crontab")
    assert (printed.returncode, printed.stderr) == (0, "")
    command = (
        f"cd {shlex.quote(os.getcwd())} && DJANGO_SETTINGS_MODULE=tests.settings "
        f"{shlex.quote(sys.executable)} {shlex.quote(str(MANAGE))} runlocked"
    )
    assert printed.stdout.splitlines() == [
        "# django-advisory-cron: the same lines in every replica's crontab "
        "(manage.py cronjob crontab)",
        "# runlocked takes the tick nearest its start within MAX_SKEW (60s): each line takes "
        "the tick it is called for",
        "CRON_TZ=UTC",
        f"*/15 * * * * {command} --enqueue cli_enqueued",
        "# cli_every: 'every 2m' is an interval (every=), which crontab cannot express: run it "
        "with manage.py cronworker",
        f"0 * * * * {command} cli_hourly",
        "CRON_TZ=Europe/Paris",
        f"30 2 * * * {command} cli_paris",
        "# cli_seconds: '0 3 * * * 30' is a seconds field, which crontab cannot express: run it "
        "with manage.py cronworker",
    ]
    # The command of a line runs the job, as cron would run it (with the test's database).
    line = next(line for line in printed.stdout.splitlines() if line.endswith("cli_hourly"))
    environment = manage_env(db_url)
    ran = subprocess.run(
        ["/bin/sh", "-c", line.removeprefix("0 * * * * ")],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("cli_hourly: ran (run ")
    assert JobRun.objects.get(job="cli_hourly").status == RunStatus.SUCCEEDED


@pytest.mark.parametrize(
    ("action", "says"),
    [
        ("list", "its next tick, its last run (skips aside) and how that ended"),
        ("history", "JOB's last runs, newest first (--limit N, default 20)"),
        ("crontab", "Each job's lines follow a CRON_TZ= line naming the zone"),
        ("crontab", "runlocked takes the tick nearest the time it starts within MAX_SKEW"),
    ],
)
def test_each_new_action_has_help_of_its_own(manage: Any, action: str, says: str) -> None:
    helped = manage("cronjob", action, "-h")
    assert helped.returncode == 0, helped.stderr
    assert says in " ".join(helped.stdout.split()), helped.stdout
    listed = manage("cronjob", "-h")
    assert f"  {action} " in listed.stdout


def test_crontab_escapes_a_percent_sign_which_would_end_the_command(
    db_url: str, tmp_path: Any
) -> None:
    directory = tmp_path / "50%"
    directory.mkdir()
    printed = subprocess.run(
        [sys.executable, str(MANAGE), "cronjob", "crontab"],
        cwd=directory,
        env=manage_env(db_url),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert printed.returncode == 0, printed.stderr
    line = next(line for line in printed.stdout.splitlines() if line.endswith("cli_hourly"))
    # cron gives the shell "%" for "\%"; a bare "%" would end the command there.
    assert line.startswith(f"0 * * * * cd {tmp_path}/50\\% && DJANGO_SETTINGS_MODULE=")


ACTIONS = (
    "list",
    "history",
    "next",
    "crontab",
    "pause",
    "resume",
    "trigger",
    "add",
    "edit",
    "reset",
    "remove",
    "versions",
    "revert",
    "import",
)


def test_cronjob_help_fits_a_screen_with_a_line_per_action(manage: Any) -> None:
    helped = manage("cronjob", "-h")
    assert helped.returncode == 0, helped.stderr
    lines = helped.stdout.splitlines()
    assert len(lines) <= 40, f"{len(lines)} lines:\n{helped.stdout}"
    for action in ACTIONS:
        said = [line for line in lines if line.split()[:1] == [action]]
        assert len(said) == 1, (action, said)
    assert "cronjob ACTION -h" in helped.stdout


@pytest.mark.parametrize("action", ACTIONS)
def test_each_action_help_ends_with_an_example(manage: Any, action: str) -> None:
    helped = manage("cronjob", action, "-h")
    assert helped.returncode == 0, helped.stderr
    _, example = helped.stdout.split("\nexample:\n")
    assert f"manage.py cronjob {action}" in example.splitlines()[0], helped.stdout
