"""Lease scope (issue 36, item 4): ``cronworker`` replicas behind PgBouncer in transaction
mode claim jobs of scope ``auto`` together on their one connection, each lock taken in the
claim's own transaction, each run protected by its row's lease. Two real replicas through a
real PgBouncer: each (job, tick) runs once, a run longer than its interval is never joined
by a second one, and a replica stopped (SIGSTOP) past its lease loses its run to the other
replica, learning it when it wakes instead of recording the run as its own."""

from __future__ import annotations

import itertools
import json
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from django_advisory_cron.core.statuses import TICK_TAKING, RunStatus
from django_advisory_cron.models import JobRun
from django_advisory_cron.testing import PgBouncer, start_pgbouncer
from tests.jobsapp.job_names import LEASE_SCOPE_FOLDER as LEASE_FOLDER
from tests.jobsapp.job_names import LEASE_SCOPE_TICKING as LEASE_TICKING
from tests.pooling import bouncer_url, upstream
from tests.test_worker_edges import Lines
from tests.waiting import wait_for, workers_present

pytestmark = [pytest.mark.usefixtures("transactional_db"), pytest.mark.slow]

SETTINGS = {"JOBS_MODULE": "lease_scope_tasks", "MAX_SKEW": 0.5, "HEARTBEAT": 0.5, "LEASE": 1.5}
TOOK = [status.value for status in TICK_TAKING]


@pytest.fixture
def pgbouncer(django_db_setup: None) -> Iterator[PgBouncer]:
    with start_pgbouncer(upstream(), pool_size=4) as bouncer:
        yield bouncer


@pytest.fixture
def lease_jobs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(SETTINGS))
    monkeypatch.setenv(LEASE_FOLDER, str(tmp_path))
    return tmp_path


def stop(worker: subprocess.Popen[str]) -> tuple[str, str]:
    """Stop the worker (SIGTERM); its output and errors, with no traceback among them."""
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
    out, err = worker.communicate(timeout=60)
    assert "Traceback" not in err, err
    return out, err


@pytest.mark.usefixtures("lease_jobs")
def test_two_replicas_run_each_tick_once_and_never_overlap_a_run(
    spawn: Any, raw_connect: Any, pgbouncer: PgBouncer
) -> None:
    names = [*LEASE_TICKING, "lease_long"]
    url = bouncer_url(pgbouncer)
    workers = [spawn("cronworker", *names, "--grace", "10", url=url) for _ in range(2)]
    observer = raw_connect()
    wait_for(lambda: workers_present(observer) == 2, timeout=60)
    done = JobRun.objects.filter(status=RunStatus.SUCCEEDED)
    try:
        wait_for(
            lambda: (
                all(worker.poll() is None for worker in workers)
                and done.filter(job="lease_long").count() >= 3
                and all(done.filter(job=name).count() >= 5 for name in LEASE_TICKING)
            ),
            timeout=90,
            interval=0.2,
        )
    finally:
        outputs = [stop(worker) for worker in workers]
        print(outputs)  # shown when the test fails
    took = JobRun.objects.filter(status__in=TOOK, tick__isnull=False)
    ticks = list(took.values_list("job", "tick"))
    assert len(ticks) == len(set(ticks))  # each (job, tick) once across both replicas
    long_runs = list(
        done.filter(job="lease_long").order_by("started").values_list("started", "finished")
    )
    for (_started, finished), (next_started, _finished) in itertools.pairwise(long_runs):
        assert finished is not None and next_started >= finished  # never two at once
    # Its ticks that came while it ran were refused, each saying a run goes on: by the
    # replica running it, or by the other's claim, which found its row's lease live.
    refused = JobRun.objects.filter(job="lease_long", status=RunStatus.SKIPPED_LOCKED)
    assert refused.exists()
    for error in refused.values_list("error", flat=True):
        assert re.search(r"is still running|still alive|lock is held", error), error
    assert took.values("pid").distinct().count() == 2  # the runs were shared out
    batched = [
        int(found.group(1))
        for out, _err in outputs
        if (found := re.search(r"(\d+) claim statement\(s\) took several jobs' ticks", out))
    ]
    assert sum(batched) >= 1, outputs
    for row in took.filter(status=RunStatus.SUCCEEDED).values("lease_until")[:5]:
        assert row["lease_until"] is None  # a finished run's lease is over


def test_a_replica_stopped_past_its_lease_loses_the_run_to_the_other(
    spawn: Any, raw_connect: Any, pgbouncer: PgBouncer, lease_jobs: Path
) -> None:
    url = bouncer_url(pgbouncer)
    observer = raw_connect()
    first = spawn("cronworker", "lease_hold", "--grace", "10", url=url)
    said = Lines(first)
    wait_for(lambda: workers_present(observer) == 1, timeout=60)
    started = lease_jobs / f"{first.pid}.started"
    wait_for(started.exists, timeout=60)
    held = JobRun.objects.get(job="lease_hold", status=RunStatus.RUNNING)
    assert held.lease_until is not None  # the row's lease protects the run
    first.send_signal(signal.SIGSTOP)  # its heartbeat stops renewing the lease
    try:
        second = spawn("cronworker", "lease_hold", "--grace", "10", url=url)
        wait_for((lease_jobs / f"{second.pid}.started").exists, timeout=60)
    finally:
        first.send_signal(signal.SIGCONT)
    held.refresh_from_db()
    # The other replica's claim found the lease run out and ended the row.
    assert held.status == RunStatus.INTERRUPTED, held.status
    taken_over = JobRun.objects.get(job="lease_hold", status=RunStatus.RUNNING)
    assert taken_over.pid == second.pid
    assert taken_over.tick is not None and held.tick is not None and taken_over.tick > held.tick
    # Woken, the first learns at its next beat that its lease is gone, and says so (its body
    # goes on until released: it makes no query).
    wait_for(lambda: said.times("lease could not be renewed"), timeout=30)
    (lease_jobs / "release").touch()
    wait_for(
        lambda: JobRun.objects.filter(pk=taken_over.pk, status=RunStatus.SUCCEEDED).exists(),
        timeout=30,
    )
    first.send_signal(signal.SIGTERM)
    first_errors = said.finish()
    assert "Traceback" not in first_errors, first_errors
    stop(second)
    held.refresh_from_db()
    assert held.status == RunStatus.INTERRUPTED  # never recorded as the first's own success
    assert "lease_hold" in first_errors, first_errors
