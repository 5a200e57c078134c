"""What the commands print when something is wrong, in real subprocesses: one line, named after
the command, saying what to do; never a traceback or a Python class name."""

from __future__ import annotations

import json
import socket
from datetime import datetime
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from django_advisory_cron import exitcodes
from django_advisory_cron.core.moments import UTC
from django_advisory_cron.exceptions import CommandFailed
from django_advisory_cron.models import JobRun, RunStatus
from django_advisory_cron.ops import control
from django_advisory_cron.run.history import HOST
from tests.waiting import wait_for

pytestmark = pytest.mark.usefixtures("transactional_db")

NEED_POSTGRESQL = (
    "database alias 'sqlite' uses the 'sqlite' backend; advisory locks need PostgreSQL "
    "(set ADVISORY_CRON['LOCK_DATABASE'] to a PostgreSQL alias)"
)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def use_settings(monkeypatch: pytest.MonkeyPatch, **settings: object) -> None:
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))


@pytest.mark.parametrize("command", ["cronstatus", "runlocked", "cronworker"])
def test_a_lock_database_that_is_not_postgresql(
    manage: Any, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    use_settings(monkeypatch, LOCK_DATABASE="sqlite")
    job = ["quick_scheduled"] if command != "cronstatus" else []
    result = manage(command, "--skip-checks", *job)
    assert (result.returncode, result.stderr) == (
        exitcodes.CONFIG,
        f"{command}: {NEED_POSTGRESQL}\n",
    )


def test_cronstatus_names_an_unreachable_database(manage: Any) -> None:
    port = closed_port()
    result = manage("cronstatus", url=f"postgresql://postgres@127.0.0.1:{port}/x")
    assert result.returncode == exitcodes.DATABASE_UNAVAILABLE
    assert result.stderr.startswith(
        f"cronstatus: cannot reach PostgreSQL at 127.0.0.1:{port}/x (alias 'default'): "
    )
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize("command", [("cronjob", "list"), ("prune_jobruns",)])
def test_a_command_names_the_alias_host_and_port_it_cannot_reach(
    manage: Any, command: tuple[str, ...]
) -> None:
    port = closed_port()
    result = manage(*command, url=f"postgresql://postgres@127.0.0.1:{port}/x")
    assert result.returncode == exitcodes.DATABASE_UNAVAILABLE, result.stderr
    assert result.stderr.startswith(
        f"{command[0]}: cannot reach PostgreSQL at 127.0.0.1:{port}/x (alias 'default'): "
        "connection failed: "
    ), result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_prune_jobruns_before_migrate_exits_78_with_one_line(
    manage: Any, scratch_database_url: str
) -> None:
    result = manage("prune_jobruns", url=scratch_database_url)
    assert result.returncode == exitcodes.CONFIG, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("prune_jobruns: ") and "run manage.py migrate" in line


def test_both_schedule_and_every_are_refused_where_the_job_is_declared(
    manage: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``@locked_task`` refuses the job; the commands say so in one line (check E008), not with
    a traceback from the jobs module's import."""
    use_settings(monkeypatch, JOBS_MODULE="both_schedules_tasks")
    why = (
        "The jobs module tests.jobsapp.both_schedules_tasks was not fully loaded: "
        "@locked_task 'both_schedules': schedule='* * * * *' and every=5 are mutually "
        "exclusive: a job has either a cron expression or an interval."
    )
    check = manage("check")
    assert check.returncode == 1
    assert f"(django_advisory_cron.E008) {why}" in check.stderr
    assert "Traceback" not in check.stderr
    run = manage("runlocked", "both_schedules")
    assert (run.returncode, run.stderr) == (exitcodes.USAGE, f"runlocked: {why}\n")


def test_an_invalid_cron_field_is_named_with_its_range(manage: Any) -> None:
    result = manage("runlocked", "--settings=tests.settings_badjobs", "bad_schedule")
    assert (result.returncode, result.stderr) == (
        exitcodes.USAGE,
        "runlocked: Job 'bad_schedule' has an invalid schedule: '0 25 * * *' is not a valid "
        "cron expression: hour 25 is out of range 0-23\n",
    )


def test_cronstatus_unknown_job_suggests_and_names_no_class(manage: Any) -> None:
    result = manage("cronstatus", "--job", "sleepyy")
    assert (result.returncode, result.stderr) == (
        exitcodes.USAGE,
        "cronstatus: no job named 'sleepyy'; did you mean sleepy?\n",
    )


def test_prune_names_the_option_that_is_wrong(manage: Any) -> None:
    days = manage("prune_jobruns", "--days", "0")
    assert (days.returncode, days.stderr) == (
        exitcodes.USAGE,
        "prune_jobruns: argument --days: must be a whole number from 1 to 36500, not '0' (see "
        "manage.py prune_jobruns -h)\n",
    )
    batch = manage("prune_jobruns", "--batch-size", "-3")
    assert (batch.returncode, batch.stderr) == (
        exitcodes.USAGE,
        "prune_jobruns: argument --batch-size: must be a whole number from 1 to 100000, not "
        "'-3' (see manage.py prune_jobruns -h)\n",
    )


def test_cronworker_unknown_job_suggests(manage: Any) -> None:
    result = manage("cronworker", "quick_schedule")
    assert (result.returncode, result.stderr) == (
        exitcodes.USAGE,
        "cronworker: no job named 'quick_schedule'; did you mean quick_scheduled?\n",
    )


def test_runlocked_says_that_its_options_go_before_the_job(manage: Any) -> None:
    result = manage("runlocked", "sleepy", "--wait", "5")
    assert (result.returncode, result.stderr) == (
        exitcodes.USAGE,
        "runlocked: job 'sleepy' does not take arguments ['--wait', '5'] (too many positional "
        "arguments); the options of runlocked go before the job name: manage.py runlocked "
        "--wait 5 sleepy\n",
    )


@pytest.mark.parametrize(
    ("action", "says"),
    [
        ("pause", "skip JOB's ticks instead of running them"),
        ("resume", "run JOB's ticks again"),
        ("trigger", "ask the running cronworkers to run JOB now"),
        ("list", "every registered job: schedule, paused or not, pending run-now"),
    ],
)
def test_each_cronjob_action_has_help_of_its_own(manage: Any, action: str, says: str) -> None:
    result = manage("cronjob", action, "-h")
    assert result.returncode == 0
    assert "epilog" not in result.stdout
    assert says in " ".join(result.stdout.split()), result.stdout


def start_up_lines(worker: Any) -> list[str]:
    """The lines a stopped ``cronworker`` logged about itself (``cronworker HOST:PID: ...``)."""
    worker.terminate()
    _out, err = worker.communicate(timeout=30)
    prefix = f"cronworker {HOST}:{worker.pid}: "
    return [line.removeprefix(prefix) for line in err.splitlines() if line.startswith(prefix)]


def test_worker_start_up_says_it_listens_and_when_its_next_tick_is(
    manage: Any, spawn: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_settings(monkeypatch, JOBS_MODULE="worker_tasks")
    worker = spawn("cronworker", "yearly_manual")
    requested = control.request_run("yearly_manual", by="test")
    wait_for(lambda: JobRun.objects.filter(job="yearly_manual", started__gte=requested).exists())
    next_year = datetime(timezone.now().year + 1, 1, 1, tzinfo=UTC)
    lines = start_up_lines(worker)
    assert f"1 scheduled job(s), next tick {next_year}" in lines, lines
    assert "listening for run-now requests (LISTEN/NOTIFY)" in lines, lines


def test_worker_start_up_says_a_missed_tick_is_due_now(
    manage: Any, spawn: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_settings(monkeypatch, JOBS_MODULE="worker_tasks")
    year = timezone.now().year
    JobRun.objects.create(
        job="yearly_manual",
        tick=datetime(year - 1, 1, 1, tzinfo=UTC),
        status=RunStatus.SUCCEEDED,
        host="test",
        pid=1,
        started=datetime(year - 1, 1, 1, tzinfo=UTC),
        finished=datetime(year - 1, 1, 1, 0, 0, 1, tzinfo=UTC),
    )
    missed = datetime(year, 1, 1, tzinfo=UTC)
    worker = spawn("cronworker", "yearly_manual")
    wait_for(lambda: JobRun.objects.filter(job="yearly_manual", tick=missed).exists())
    lines = start_up_lines(worker)
    assert (
        f"1 scheduled job(s), 1 with ticks missed while no cronworker ran (the first at "
        f"{missed}): handled now, as their catch_up says"
    ) in lines, lines


def test_call_command_still_raises_the_command_error() -> None:
    """Only the command line prints the one line; code calling a command gets the exception."""
    with pytest.raises(
        CommandFailed, match=r"^--days must be a whole number from 1 to 36500, not 0$"
    ):
        call_command("prune_jobruns", days=0)
