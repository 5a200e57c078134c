"""What ``cronworker`` says, in real processes against a real PostgreSQL: on stdout, whatever
``LOGGING`` says, its start, a line per run and (``-v 2``) its skips; a stop line whose counts
add up; a run without a tick (run now) named so, never ``tick None``."""

from __future__ import annotations

import json
import re
import signal
from typing import Any

import pytest

from django_advisory_cron import exitcodes
from django_advisory_cron.models import JobRun, RunStatus
from django_advisory_cron.ops import control
from django_advisory_cron.run.history import HOST
from tests.jobsapp.models import Marker
from tests.test_worker_edges import Lines
from tests.waiting import wait_for, wait_for_workers

pytestmark = pytest.mark.usefixtures("transactional_db")


@pytest.fixture
def worker_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = {"JOBS_MODULE": "worker_tasks", "MAX_SKEW": 0.5}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))


def test_a_run_now_is_said_as_such_never_tick_none(
    worker_jobs: None, spawn: Any, manage: Any, raw_connect: Any
) -> None:
    # One slot, taken by a run now busy for 3 s: a second run now waits for it.
    worker = spawn("cronworker", "yearly_busy", "yearly_manual", "--max-concurrency", "1")
    log = Lines(worker)
    wait_for_workers(raw_connect(), [worker])
    for job in ("yearly_busy", "yearly_manual"):
        triggered = manage("cronjob", "trigger", job)
        assert triggered.returncode == exitcodes.OK, triggered.stderr
        wait_for(lambda: JobRun.objects.filter(job="yearly_busy").exists(), timeout=30)
    wait_for(lambda: Marker.objects.filter(job="yearly_manual").exists(), timeout=30)
    worker.send_signal(signal.SIGTERM)
    said = log.finish() + worker.stdout.read()
    assert "yearly_manual (run now) waited" in said, said
    assert "None" not in said, said
    by_hand = manage("runlocked", "--manual", "yearly_manual")
    assert by_hand.returncode == exitcodes.OK, by_hand.stderr
    assert "None" not in by_hand.stdout + by_hand.stderr


#: Django's default logging, as a new project has: the app's INFO records print nowhere.
DEFAULT_LOGGING = "--settings=tests.settings_default_logging"
BANNER = re.compile(
    r"^cronworker \S+: started; 2 scheduled job\(s\), lock database 'default' \(\S+ on \S+\); "
    r"woken by LISTEN/NOTIFY for run-now requests and schedule changes$"
)
RAN = re.compile(r"^cronworker: every2_0, tick \S+ \S+: succeeded in \d+\.\d s \(run \d+\)$")
PAUSED = re.compile(r"^cronworker: every2_1, tick \S+ \S+: skipped: paused$")


@pytest.mark.parametrize("verbosity", ["0", "1", "2"])
def test_cronworker_says_what_it_does_on_stdout_whatever_logging_says(
    verbosity: str, worker_jobs: None, spawn: Any, raw_connect: Any
) -> None:
    control.pause("every2_1", by="ops")
    worker = spawn("cronworker", DEFAULT_LOGGING, "-v", verbosity, "every2_0", "every2_1")
    out = Lines(worker, stdout=True)
    wait_for_workers(raw_connect(), [worker])
    succeeded = JobRun.objects.filter(job="every2_0", status=RunStatus.SUCCEEDED)
    wait_for(succeeded.exists, timeout=30)
    if verbosity != "0":
        wait_for(lambda: any(RAN.match(line) for line in out.text().splitlines()))
    if verbosity == "2":
        wait_for(lambda: any(PAUSED.match(line) for line in out.text().splitlines()))
    worker.send_signal(signal.SIGTERM)
    said = out.finish().splitlines()
    assert worker.returncode == exitcodes.SIGTERM, said
    assert said[-1].startswith(f"cronworker {HOST}:{worker.pid}: stopped; took up "), said
    if verbosity == "0":
        assert len(said) == 1, said
        return
    assert BANNER.match(said[0]), said
    assert re.match(r"^  every2_\d: every 2s, next tick ", said[1]), said
    assert any(RAN.match(line) for line in said), said
    assert any(PAUSED.match(line) for line in said) == (verbosity == "2"), said


STOPPED = re.compile(
    r"stopped; took up (\d+) tick\(s\) and run-now request\(s\) \((\d+) run-now\): (\d+) ran "
    r"\((\d+) of them failed\), (\d+) skipped \(another replica had them; (\d+) seen claimed "
    r"before trying\), (\d+) paused, "
    r"(\d+) tick\(s\) skipped because the job's previous run was still going, (\d+) not run "
)


def test_the_stop_line_counts_each_tick_once(
    worker_jobs: None, spawn: Any, raw_connect: Any
) -> None:
    """Two workers share four jobs (each runs some ticks and skips the others') and see a
    fifth one paused: each tick taken up is counted once, so the counts add up."""
    control.pause("every2_4", by="ops")
    jobs = [f"every2_{number}" for number in range(5)]
    workers = [spawn("cronworker", *jobs, "-v", "0") for _ in range(2)]
    wait_for_workers(raw_connect(), workers)
    wait_for(lambda: Marker.objects.count() >= 12, timeout=60)  # three ticks' worth
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    skipped = 0
    for worker in workers:
        out, err = worker.communicate(timeout=30)
        assert worker.returncode == exitcodes.SIGTERM, err
        (found,) = STOPPED.findall(out)
        taken, manual, ran, failed, skips, seen, paused, overlapped, not_run = map(int, found)
        assert taken == ran + skips + paused + overlapped + not_run, out
        assert seen <= skips, out
        assert ran == Marker.objects.filter(pid=worker.pid).count() > 0, out
        assert paused > 0 and (manual, failed) == (0, 0), out
        skipped += skips
    assert skipped > 0
