"""A worker whose connection is cut while it sleeps towards a far tick reconnects at once,
instead of being away (``cronjob trigger`` refuses, finding no worker) until its next look.

The worker sleeps on its connection's socket (it LISTENs there): a cut connection wakes it,
and the loop's next pass finds the loss and reconnects, instead of sleeping on until its next
tick or clock refresh (up to 30 s) deaf to requests."""

from __future__ import annotations

import json
import signal
import time
from typing import Any

import pytest

from django_advisory_cron import exitcodes
from django_advisory_cron.models import JobRun, RunStatus
from tests.test_worker_edges import Lines
from tests.waiting import presence_pids, wait_for

pytestmark = pytest.mark.usefixtures("transactional_db")


def test_a_cut_connection_is_reconnected_at_once_and_a_run_now_is_taken(
    spawn: Any, manage: Any, raw_connect: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "schedule_tasks"}))
    observer = raw_connect()
    worker = spawn("cronworker", "code_yearly")
    lines = Lines(worker)
    wait_for(lambda: lines.times("listening for run-now requests (LISTEN/NOTIFY)"))
    (before,) = wait_for(lambda: presence_pids(observer))
    observer.execute("SELECT pg_terminate_backend(%s)", (before,))
    cut = time.monotonic()
    wait_for(lambda: presence_pids(observer) - {before}, timeout=10)
    back = time.monotonic() - cut
    # Back, it listens again: a request is heard at once.
    triggered = manage("cronjob", "trigger", "code_yearly")
    assert triggered.returncode == exitcodes.OK, triggered.stderr
    run = wait_for(
        lambda: JobRun.objects.filter(job="code_yearly", status=RunStatus.SUCCEEDED).first(),
        timeout=10,
    )
    ran = time.monotonic() - cut
    worker.send_signal(signal.SIGTERM)
    err = lines.finish()
    print(f"connection back {back:.2f} s after the cut; the requested run done at {ran:.2f} s")
    assert run.manual and run.tick is None
    assert worker.returncode == exitcodes.SIGTERM, err
    assert "Traceback" not in err
    # One line for the cut, not the driver's three: "stopped listening" when the cut woke its
    # sleep, none when a statement of the worker's met the cut first (a busy machine); the
    # loss itself is said either way.
    assert len([line for line in err.splitlines() if "stopped listening" in line]) <= 1, err
    assert "lost the database" in err, err
    assert not [line for line in err.splitlines() if line.startswith("\t")], err
