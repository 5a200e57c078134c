"""``manage.py runlocked`` in real subprocesses: exit codes, messages, signals, kill -9."""

from __future__ import annotations

import logging
import signal
import socket
import time
from pathlib import Path

import pytest

from django_advisory_cron import exitcodes, registry
from django_advisory_cron.conf import app_settings
from django_advisory_cron.core.keys import LockKey
from django_advisory_cron.models import JobRun, RunStatus
from tests.jobsapp.models import Marker
from tests.pglocks import holders
from tests.waiting import wait_for


def lock_held(observer, name: str) -> bool:
    return bool(holders(observer, LockKey(name)))


def running(job: str) -> bool:
    return JobRun.objects.filter(job=job, status=RunStatus.RUNNING).exists()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_runs_a_job(manage) -> None:
    result = manage("runlocked", "sleepy", "0")
    assert result.returncode == exitcodes.OK, result.stderr
    assert "sleepy: ran" in result.stdout
    assert JobRun.objects.get(job="sleepy").status == RunStatus.SUCCEEDED


def test_help_documents_exit_codes(manage) -> None:
    result = manage("runlocked", "--help")
    assert result.returncode == 0
    for text in ("--wait", "--conflict-exit-code", "--scope", "--database", "69", "143"):
        assert text in result.stdout


def test_list(manage) -> None:
    result = manage("runlocked", "--list")
    assert result.returncode == 0
    line = next(line for line in result.stdout.splitlines() if line.startswith("quick_scheduled"))
    assert "*/5 * * * *" in line and str(LockKey("quick_scheduled")) in line


def test_unknown_job_suggests_close_matches(manage) -> None:
    result = manage("runlocked", "sleepyy")
    assert result.returncode == exitcodes.USAGE
    assert "no job or command named 'sleepyy'" in result.stderr
    assert "did you mean sleepy" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_job_arguments_are_a_usage_error(manage) -> None:
    result = manage("runlocked", "quick_scheduled", "extra")
    assert result.returncode == exitcodes.USAGE
    assert "does not take arguments" in result.stderr
    assert not JobRun.objects.exists()


def test_bad_schedule(manage) -> None:
    result = manage("runlocked", "--settings=tests.settings_badjobs", "bad_schedule")
    assert result.returncode == exitcodes.USAGE, result.stderr
    assert "bad_schedule" in result.stderr and "not a valid cron expression" in result.stderr
    assert "Traceback" not in result.stderr
    check = manage("check", "--settings=tests.settings_badjobs")
    assert check.returncode == 1
    assert "django_advisory_cron.E005" in check.stderr and "bad_schedule" in check.stderr


def test_non_postgresql_alias(manage) -> None:
    result = manage("runlocked", "--database", "sqlite", "sleepy", "0")
    assert result.returncode == exitcodes.CONFIG
    assert "need PostgreSQL" in result.stderr and "Traceback" not in result.stderr
    unknown = manage("runlocked", "--database", "nope", "sleepy", "0")
    assert unknown.returncode == exitcodes.CONFIG, unknown.stderr
    assert "'nope' is not in DATABASES" in unknown.stderr and "Traceback" not in unknown.stderr


def test_database_down(manage) -> None:
    port = closed_port()
    result = manage("runlocked", "sleepy", "0", url=f"postgresql://postgres@127.0.0.1:{port}/x")
    assert result.returncode == exitcodes.DATABASE_UNAVAILABLE
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"127.0.0.1:{port}" in lines[0] and "Traceback" not in result.stderr


def test_job_failure_exits_1_and_logs_one_traceback(manage) -> None:
    result = manage("runlocked", "failing")
    assert result.returncode == exitcodes.JOB_FAILED
    assert result.stderr.count("Traceback") == 1
    assert "RuntimeError: boom" in result.stderr
    assert JobRun.objects.get(job="failing").status == RunStatus.FAILED


def test_conflict_exit_code(manage, raw_connect) -> None:
    raw_connect().execute(
        "SELECT pg_advisory_lock(%(lock_ns)s, %(lock_id)s)", LockKey("sleepy").params
    )
    default = manage("runlocked", "sleepy", "0")
    assert default.returncode == 0 and "skipped, locked" in default.stdout
    flagged = manage("runlocked", "-E", "3", "sleepy", "0")
    assert flagged.returncode == 3 and "locked by another process" in flagged.stderr
    assert Marker.objects.count() == 0


def test_wait_option_acquires_after_the_holder(manage, raw_connect) -> None:
    holder = raw_connect()
    holder.execute("SELECT pg_advisory_lock(%(lock_ns)s, %(lock_id)s)", LockKey("sleepy").params)
    # Django start-up of the subprocess takes a moment; release while it waits.
    import threading

    unlock = "SELECT pg_advisory_unlock(%(lock_ns)s, %(lock_id)s)"
    timer = threading.Timer(2.0, lambda: holder.execute(unlock, LockKey("sleepy").params))
    timer.start()
    result = manage("runlocked", "--wait", "30", "sleepy", "0")
    timer.join()
    assert result.returncode == 0 and "sleepy: ran" in result.stdout, result.stderr


def test_wraps_management_commands_with_their_arguments(manage) -> None:
    result = manage("runlocked", "showmigrations", "django_advisory_cron")
    assert result.returncode == 0, result.stderr
    assert "0001_initial" in result.stdout
    assert JobRun.objects.get(job="showmigrations").status == RunStatus.SUCCEEDED


def test_kill_9_frees_the_lock_and_the_job_runs_again_once_the_lease_expires(
    spawn, manage, raw_connect, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The lock goes with the process; its run row stays alive for at most LEASE seconds (it
    cannot be told from a run whose lock connection died while its body goes on)."""
    observer = raw_connect()
    release = tmp_path / "release"
    victim = spawn("runlocked", "hold_until", str(release))
    wait_for(lambda: running("hold_until"))
    assert lock_held(observer, "hold_until")
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    released = time.monotonic()
    wait_for(lambda: not lock_held(observer, "hold_until"), timeout=5, interval=0.005)
    freed_after = time.monotonic() - released
    assert freed_after < 2
    release.touch()
    # In this process, not a new one: a busy host could take longer than the lease to start it.
    with caplog.at_level(logging.INFO, logger="django_advisory_cron"):
        at_once = registry.get("hold_until").run(str(release))
    assert at_once.status == RunStatus.SKIPPED_LOCKED
    assert "job hold_until skipped: an earlier run is still alive" in caplog.messages
    started = time.monotonic()
    result = manage("runlocked", "-w", "30", "hold_until", str(release))
    assert result.returncode == 0 and "hold_until: ran" in result.stdout, result.stderr
    assert time.monotonic() - started < app_settings.LEASE + 15  # start-up on a busy host
    statuses = dict(JobRun.objects.values_list("pid", "status"))
    assert statuses[victim.pid] == RunStatus.INTERRUPTED
    assert sorted(statuses.values()) == ["interrupted", "succeeded"]


@pytest.mark.parametrize(
    ("signum", "code"), [(signal.SIGTERM, exitcodes.SIGTERM), (signal.SIGINT, exitcodes.SIGINT)]
)
def test_signals_mark_the_run_interrupted_and_release(
    spawn, raw_connect, tmp_path: Path, signum: int, code: int
) -> None:
    observer = raw_connect()
    process = spawn("runlocked", "hold_until", str(tmp_path / "never"))
    wait_for(lambda: running("hold_until"))
    process.send_signal(signum)
    _out, err = process.communicate(timeout=30)
    assert process.returncode == code, err
    assert "interrupted" in err
    run = JobRun.objects.get(job="hold_until")
    assert run.status == RunStatus.INTERRUPTED and run.finished is not None
    assert not lock_held(observer, "hold_until")
