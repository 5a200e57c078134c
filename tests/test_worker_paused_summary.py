"""The line a ``cronworker`` prints when it stops counts a paused job's skipped ticks apart
from the ticks another replica had.

A real worker runs alone, so no other replica can have any tick: every skip it makes is a
pause, and its log says so once per tick. Once with the paused job due alone (claimed by
itself), once with it due together with a running job (claimed in one statement with it).
"""

from __future__ import annotations

import json
import re
import signal
import threading
from typing import Any

import pytest

from django_advisory_cron import exitcodes
from django_advisory_cron.models import JobRun, RunStatus
from django_advisory_cron.ops import control
from tests.waiting import wait_for

pytestmark = pytest.mark.usefixtures("transactional_db")

SUMMARY = re.compile(
    r"stopped; took up \d+ tick\(s\) and run-now request\(s\) \(0 run-now\): (\d+) ran \(0 of "
    r"them failed\), 0 skipped \(another replica had them; 0 seen claimed before trying\), "
    r"(\d+) paused,"
)


@pytest.fixture
def worker_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = {"JOBS_MODULE": "worker_tasks", "MAX_SKEW": 0.5}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))


@pytest.mark.parametrize(
    "jobs", [["every2_0"], ["every2_0", "every2_1"]], ids=["alone", "claimed-together"]
)
def test_a_paused_jobs_skips_are_counted_as_paused(
    jobs: list[str], worker_jobs: None, spawn: Any
) -> None:
    control.pause("every2_0", by="ops", reason="disk full")
    worker = spawn("cronworker", *jobs, "--grace", "5")
    log: list[str] = []

    def read_log() -> None:
        for line in worker.stderr:
            log.append(line)

    reader = threading.Thread(target=read_log)
    reader.start()
    skips = "job every2_0 skipped at tick"
    wait_for(lambda: sum(skips in line for line in log) >= 2, timeout=60)
    worker.send_signal(signal.SIGTERM)
    out = worker.stdout.read()
    assert worker.wait(timeout=30) == exitcodes.SIGTERM, "".join(log)
    reader.join()
    (counts,) = SUMMARY.findall(out)
    ran = JobRun.objects.filter(pid=worker.pid, status=RunStatus.SUCCEEDED).count()
    assert counts == (str(ran), str(sum(skips in line for line in log))), out
    assert (ran > 0) == (len(jobs) > 1), out
