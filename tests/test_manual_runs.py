"""Running a scheduled job by hand: ``runlocked --manual`` never takes a tick, and a
``runlocked`` (or ``runlocked --enqueue``) typed at a terminal says whether it took one; cron's
calls (no terminal) are unchanged and take their tick.

Real ``manage.py`` processes; the terminal is a real pseudo-terminal (``pty``).
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import time
from typing import Any

import pytest

from django_advisory_cron.models import EnqueuedTick, JobRun, RunStatus
from tests.conftest import MANAGE, manage_env
from tests.test_tasks_delivery import SETTINGS as TASKS

pytestmark = pytest.mark.usefixtures("transactional_db")

#: Every minute: with MAX_SKEW 60 s, a run at any moment falls within reach of a tick.
JOB = "q2_every_minute"
HINT = f"To run {JOB} by hand without taking a tick: manage.py runlocked --manual {JOB}"


def at_terminal(db_url: str, *args: str) -> tuple[int, str]:
    """Run ``manage.py ARGS`` with a pseudo-terminal as its stdin and stdout, as a person
    typing it would; returns its exit code and what it printed there (its log, on stderr, is
    left out)."""
    parent, child = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, str(MANAGE), *args],
        env=manage_env(db_url),
        stdin=child,
        stdout=child,
        stderr=subprocess.DEVNULL,
    )
    os.close(child)
    chunks = []
    while True:
        try:
            chunk = os.read(parent, 4096)
        except OSError:  # EIO: the process closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(parent)
    return process.wait(timeout=60), b"".join(chunks).decode().replace("\r\n", "\n")


def test_manual_is_documented_in_runlocked_help(manage: Any) -> None:
    shown = manage("runlocked", "--help")
    assert shown.returncode == 0
    assert "--manual" in shown.stdout and "never takes a tick" in shown.stdout


def test_a_manual_run_leaves_the_tick_to_the_scheduled_call(manage: Any) -> None:
    by_hand = manage("runlocked", "--manual", JOB)
    assert by_hand.returncode == 0, by_hand.stderr
    (manual,) = JobRun.objects.filter(job=JOB)
    assert manual.manual and manual.tick is None
    assert by_hand.stdout == f"{JOB}: ran (run {manual.id}, no tick)\n"
    cron = manage("runlocked", JOB)  # cron's call, no terminal
    assert cron.returncode == 0, cron.stderr
    scheduled = JobRun.objects.exclude(id=manual.id).get(job=JOB)
    assert scheduled.status == RunStatus.SUCCEEDED and scheduled.tick is not None
    assert cron.stdout == f"{JOB}: ran (run {scheduled.id}, tick {scheduled.tick})\n"


def clear_of_the_half_minute() -> None:
    """Wait, if need be, until the three calls below fall on one side of hh:mm:30, where the
    tick nearest to now moves to the next minute (a busy host takes seconds per call)."""
    second = time.time() % 60
    if 10 <= second < 31:
        time.sleep(31 - second)


def test_at_a_terminal_runlocked_says_it_took_the_tick(db_url: str, manage: Any) -> None:
    clear_of_the_half_minute()
    code, printed = at_terminal(db_url, "runlocked", JOB)
    assert code == 0, printed
    (run,) = JobRun.objects.filter(job=JOB)
    assert run.tick is not None and not run.manual
    assert printed == (
        f"{JOB}: ran (run {run.id}, tick {run.tick})\n"
        f"{JOB}: this run took tick {run.tick}, the tick of its schedule nearest to now "
        "(within MAX_SKEW, 60 s), so the scheduled call for that tick will skip it. "
        f"{HINT}\n"
    )
    # The same tick again, at a terminal: nothing ran, no tick taken.
    code, printed = at_terminal(db_url, "runlocked", JOB)
    assert code == 0, printed
    assert printed == (
        f"{JOB}: skipped, tick {run.tick} already ran\n{JOB}: this run took no tick. {HINT}\n"
    )
    # Cron's call (no terminal) prints its one line, as before.
    cron = manage("runlocked", JOB)
    assert cron.stdout == f"{JOB}: skipped, tick {run.tick} already ran\n"


def test_a_manual_run_at_a_terminal_takes_no_tick_and_needs_no_hint(db_url: str) -> None:
    code, printed = at_terminal(db_url, "runlocked", "--manual", JOB)
    assert code == 0, printed
    (run,) = JobRun.objects.filter(job=JOB)
    assert run.manual and run.tick is None
    assert printed == f"{JOB}: ran (run {run.id}, no tick)\n"


def test_at_a_terminal_runlocked_enqueue_says_it_took_the_tick(
    db_url: str, manage: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    job, hint = "tasks_minutely", HINT.replace(JOB, "tasks_minutely")
    settings = {"JOBS_MODULE": "tasks_delivery"}  # MAX_SKEW 60 s: a tick is always in reach
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))
    clear_of_the_half_minute()
    code, printed = at_terminal(db_url, "runlocked", TASKS, "--enqueue", job)
    assert code == 0, printed
    (claim,) = EnqueuedTick.objects.filter(job=job)
    assert printed == (
        f"{job}: enqueued (tick {claim.tick}) to Tasks backend 'immediate' as task "
        f"{claim.task_id}\n"
        f"{job}: this enqueue took tick {claim.tick}, the tick of its schedule nearest to now "
        "(within MAX_SKEW, 60 s), so the scheduled call for that tick will skip it. "
        f"{hint}\n"
    )
    # The same tick again, at a terminal: nothing enqueued, no tick taken.
    code, printed = at_terminal(db_url, "runlocked", TASKS, "--enqueue", job)
    assert code == 0, printed
    assert printed == (
        f"{job}: not enqueued, tick {claim.tick} already ran\n"
        f"{job}: this enqueue took no tick. {hint}\n"
    )
    # Cron's call (no terminal) prints its one line, as before.
    cron = manage("runlocked", TASKS, "--enqueue", job)
    assert cron.stdout == f"{job}: not enqueued, tick {claim.tick} already ran\n"
    assert EnqueuedTick.objects.filter(job=job).count() == 1
