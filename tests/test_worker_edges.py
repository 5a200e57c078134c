"""Edges of ``manage.py cronworker`` in real processes against a real PostgreSQL: a "run now"
during a scheduled run, a schedule that fails at run time, settings errors that ``check``
reports, a database without the app's tables, and reconnecting without spinning."""

from __future__ import annotations

import itertools
import json
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from django_advisory_cron import exitcodes
from django_advisory_cron.models import JobRun, RunStatus
from tests.jobsapp.models import Marker
from tests.waiting import wait_for, workers_present

pytestmark = pytest.mark.usefixtures("transactional_db")


def edge_settings(**extra: object) -> str:
    return json.dumps({"JOBS_MODULE": "worker_edge_tasks", **extra})


@pytest.fixture
def edge_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISORY_CRON_JSON", edge_settings())


class Lines:
    """A process's stderr (or ``stdout``), line by line as it comes, with the time each line
    arrived."""

    def __init__(self, process: subprocess.Popen[str], stdout: bool = False) -> None:
        self.process = process
        self.stream = process.stdout if stdout else process.stderr
        self.seen: list[tuple[float, str]] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.stream is not None
        for line in self.stream:
            self.seen.append((time.monotonic(), line.rstrip("\n")))

    def times(self, text: str) -> list[float]:
        return [at for at, line in list(self.seen) if text in line]

    def text(self) -> str:
        return "\n".join(line for _at, line in list(self.seen))

    def finish(self, timeout: float = 60) -> str:
        self.process.wait(timeout)
        self._thread.join(timeout)
        return self.text()


def test_a_run_now_during_a_scheduled_run_leaves_it_to_finish_within_the_grace(
    edge_jobs: None, spawn: Any, manage: Any, raw_connect: Any
) -> None:
    observer = raw_connect()
    worker = spawn("cronworker", "edge_slow8", "--grace", "25")
    wait_for(lambda: workers_present(observer) == 1)
    scheduled = wait_for(
        lambda: JobRun.objects.filter(
            job="edge_slow8", status=RunStatus.RUNNING, tick__isnull=False
        ).first()
    )
    triggered = manage("cronjob", "trigger", "edge_slow8")
    assert triggered.returncode == exitcodes.OK, triggered.stderr
    wait_for(
        lambda: JobRun.objects.filter(
            job="edge_slow8", tick__isnull=True, status=RunStatus.SKIPPED_LOCKED
        ).exists()
    )
    # The next tick, while the scheduled run goes on: the worker's overlap guard still sees
    # that run (the "run now" did not replace it) and skips the tick itself.
    later = wait_for(
        lambda: JobRun.objects.filter(job="edge_slow8", tick__gt=scheduled.tick).first()
    )
    print(f"the next tick: {later.status}, {later.error!r}")
    assert later.status == RunStatus.SKIPPED_LOCKED and "previous run" in later.error
    assert JobRun.objects.get(pk=scheduled.pk).status == RunStatus.RUNNING
    worker.send_signal(signal.SIGTERM)
    out, err = worker.communicate(timeout=60)
    print(f"cronworker exited {worker.returncode}; stderr:\n{err}")
    assert worker.returncode == exitcodes.SIGTERM, err
    assert "still running after" not in err and "interrupted" not in err
    # The log names when the "run now" was requested (the request row before it was taken).
    assert re.search(r"running edge_slow8 now, as requested by .+ at \d{4}-\d\d-\d\d", err), err
    # The scheduled run finished its body within the grace, and was recorded as such.
    assert JobRun.objects.get(pk=scheduled.pk).status == RunStatus.SUCCEEDED
    assert Marker.objects.filter(job="edge_slow8_done").count() == 1
    assert "(0 of them failed)" in out


def test_a_schedule_that_fails_at_run_time_is_one_line_and_the_other_jobs_run(
    edge_jobs: None, spawn: Any, raw_connect: Any
) -> None:
    observer = raw_connect()
    worker = spawn("cronworker", "edge_never", "edge_every2", "--grace", "2")
    lines = Lines(worker)
    wait_for(lambda: worker.poll() is not None or workers_present(observer) == 1)
    wait_for(
        lambda: worker.poll() is not None or Marker.objects.filter(job="edge_every2").count() >= 2,
    )
    alive = worker.poll() is None
    worker.send_signal(signal.SIGTERM)
    err = lines.finish()
    print(f"cronworker exited {worker.returncode}; stderr:\n{err}")
    assert alive, "the worker exited"
    assert worker.returncode == exitcodes.SIGTERM, err
    assert "Traceback" not in err
    about = [line for line in err.splitlines() if "edge_never" in line]
    assert len(about) == 1, about
    assert "0 0 30 2 *" in about[0] and "manage.py check" in about[0]
    assert not Marker.objects.filter(job="edge_never").exists()


COMMANDS = [
    ("cronworker",),
    ("runlocked", "edge_every2"),
    ("cronjob", "list"),
    ("cronstatus",),
    ("sync_schedules",),
    ("prune_jobruns",),
]


@pytest.mark.parametrize("command", COMMANDS, ids=[command[0] for command in COMMANDS])
def test_a_settings_error_that_check_reports_stops_the_command(
    command: tuple[str, ...], manage: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADVISORY_CRON_JSON", edge_settings(CATCH_UP="everything"))
    check = manage("check")
    assert check.returncode == 1 and "django_advisory_cron.E111" in check.stderr
    result = manage(*command, timeout=30)
    print(f"{command[0]} exited {result.returncode}; stderr:\n{result.stderr}")
    assert result.returncode == exitcodes.CONFIG, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{command[0]}: ")
    assert lines[0] == (
        f"{command[0]}: ADVISORY_CRON['CATCH_UP'] must be one of 'latest', 'all', 'none'"
    )
    assert not JobRun.objects.exists()


def test_cronworker_before_migrate_exits_78_with_one_line(
    edge_jobs: None, spawn: Any, scratch_database_url: str
) -> None:
    worker = spawn("cronworker", "edge_every2", url=scratch_database_url)
    try:
        _out, err = worker.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        worker.kill()
        _out, err = worker.communicate()
        lines = err.splitlines()
        pytest.fail(
            f"cronworker still running after 20 s, {len(lines)} lines of log:\n"
            + "\n".join(lines[:6])
        )
    print(f"cronworker exited {worker.returncode}; stderr:\n{err}")
    assert worker.returncode == exitcodes.CONFIG, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("cronworker: ") and "manage.py migrate" in lines[0]


def test_cronstatus_before_migrate_exits_78_with_one_line(
    edge_jobs: None, manage: Any, scratch_database_url: str
) -> None:
    """As every other command does: a missing table is the site's configuration."""
    status = manage("cronstatus", url=scratch_database_url)
    assert status.returncode == exitcodes.CONFIG, status.stderr
    lines = status.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("cronstatus: ") and "run manage.py migrate" in lines[0]


@pytest.fixture
def table_locked(raw_connect: Any) -> Iterator[Any]:
    """The run history locked away from everyone (an open transaction holds it)."""
    holder = raw_connect()
    holder.autocommit = False
    holder.execute(f"LOCK TABLE {JobRun._meta.db_table} IN ACCESS EXCLUSIVE MODE")
    yield holder
    holder.rollback()


def test_reconnecting_after_each_loss_pauses_longer(
    spawn: Any, raw_connect: Any, table_locked: Any
) -> None:
    # Every statement on the run history gets no answer within 0.2 s: each time the worker
    # cuts its connection as lost, reconnects at once (the database is up) and loses it again.
    worker = spawn(
        "cronworker",
        "edge_every2",
        "--grace",
        "2",
        env={"ADVISORY_CRON_JSON": edge_settings(STATEMENT_TIMEOUT=0.2)},
    )
    lines = Lines(worker)
    started = time.monotonic()
    wait_for(lambda: worker.poll() is not None or len(lines.times("lost the database")) >= 4)
    losses = lines.times("lost the database")
    table_locked.rollback()
    wait_for(lambda: worker.poll() is not None or Marker.objects.filter(job="edge_every2"))
    alive = worker.poll() is None
    worker.send_signal(signal.SIGTERM)
    err = lines.finish()
    print(
        f"losses at {[round(at - started, 2) for at in losses]} s; "
        f"{len(err.splitlines())} lines of log; exited {worker.returncode}"
    )
    assert alive, err
    gaps = [later - earlier for earlier, later in itertools.pairwise(losses[:4])]
    # The pauses grow: 0.5 s, 1 s, 2 s before the next attempt (each attempt also takes its
    # 0.2 s), never an immediate reconnect.
    for gap, pause in zip(gaps, (0.5, 1.0, 2.0), strict=True):
        assert gap >= pause, gaps
    assert worker.returncode == exitcodes.SIGTERM, err
    assert "Traceback" not in err


def test_an_embedded_worker_closed_during_a_run_leaves_it_running_and_holding_its_tick(
    fresh_registry: None,
) -> None:
    """``start_worker(...).close()`` in a process that lives on: a body still running when the
    grace ends keeps its lease and records its own end; it is not marked interrupted (which
    would give its tick to another replica while the body goes on)."""
    from django_advisory_cron import locked_task, start_worker

    release = threading.Event()

    @locked_task(name="embedded_slow", every=2)
    def embedded_slow() -> None:
        release.wait(60)

    worker = start_worker(["embedded_slow"], grace=0.5)
    try:
        run = wait_for(
            lambda: JobRun.objects.filter(job="embedded_slow", status=RunStatus.RUNNING).first()
        )
    finally:
        worker.close(timeout=30)
    assert worker.thread is not None and not worker.thread.is_alive()
    row = JobRun.objects.get(pk=run.pk)
    print(f"after close: {row.status}, lease {row.lease_until}, error {row.error!r}")
    assert row.status == RunStatus.RUNNING and row.lease_until is not None
    release.set()
    wait_for(lambda: JobRun.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED)
