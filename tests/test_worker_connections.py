"""How many connections a ``cronworker`` holds: one server backend while idle, at most two
while busy, whatever ``--max-concurrency`` is, and at most two client connections behind a
transaction pooler. The jobs' bodies are pure Python, so every connection counted is the
worker's own; each is counted on the worker's side (its sockets to the server) and matched
to the server's ``pg_stat_activity`` by client port."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from django_advisory_cron.core.keys import LockKey
from django_advisory_cron.models import JobRun, RunStatus
from django_advisory_cron.testing import PgBouncer, start_pgbouncer
from tests.jobsapp.job_names import CONNECTION_HASHTEXT as HASHTEXT
from tests.jobsapp.job_names import CONNECTION_HOLDING as HOLDING
from tests.jobsapp.job_names import CONNECTION_OTHER_DATABASE as OTHER_DATABASE
from tests.jobsapp.job_names import CONNECTION_SIGNALS as SIGNALS
from tests.jobsapp.job_names import CONNECTION_TOGETHER as TOGETHER
from tests.jobsapp.job_names import CONNECTION_WAITING as WAITING
from tests.jobsapp.job_names import SECOND_ALIAS
from tests.pooling import bouncer_url, upstream
from tests.waiting import wait_for, workers_present

pytestmark = pytest.mark.usefixtures("transactional_db")

SETTINGS = {"JOBS_MODULE": "connection_tasks", "MAX_SKEW": 0.5, "HEARTBEAT": 0.5, "LEASE": 1.5}
#: The state of an established connection in ``/proc/net/tcp``.
ESTABLISHED = "01"
TICKING = ["conn_tick_every1", "conn_tick_every2", *TOGETHER]


@pytest.fixture
def connection_jobs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(SETTINGS))
    monkeypatch.setenv(SIGNALS, str(tmp_path))
    monkeypatch.setenv(SECOND_ALIAS, "1")
    return tmp_path


def sockets_to(worker: subprocess.Popen[str], port: int) -> set[int]:
    """The local ports of the worker's established TCP connections to ``port`` (read from
    ``/proc``: the sockets among its open files)."""
    inodes = set()
    for fd in Path(f"/proc/{worker.pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("tcp", "tcp6"):
        lines = Path(f"/proc/{worker.pid}/net/{table}").read_text().splitlines()[1:]
        for line in lines:
            fields = line.split()
            local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
            if state == ESTABLISHED and inode in inodes and int(remote.split(":")[1], 16) == port:
                ports.add(int(local.split(":")[1], 16))
    return ports


def backends_of(worker: subprocess.Popen[str], observer: Any) -> int:
    """The server backends the worker holds: its sockets to the server that the server lists."""
    port = int(observer.info.port)
    ports = sorted(sockets_to(worker, port))
    row = observer.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE client_port = ANY(%s) AND pid <> "
        "pg_backend_pid() AND client_addr = '127.0.0.1'",
        (ports,),
    ).fetchone()
    return int(row[0])


def most(count: Any, seconds: float) -> int:
    """The largest of ``count()`` sampled for ``seconds`` (across several ticks)."""
    deadline, largest = time.monotonic() + seconds, 0
    while time.monotonic() < deadline:
        largest = max(largest, count())
        time.sleep(0.01)
    return largest


def ran_a_few_times(names: list[str], times: int = 3) -> bool:
    done = JobRun.objects.filter(job__in=names, status=RunStatus.SUCCEEDED)
    return all(done.filter(job=name).count() >= times for name in names)


def stopped(worker: subprocess.Popen[str]) -> str:
    """Stop the worker; its standard output."""
    worker.send_signal(signal.SIGTERM)
    out, err = worker.communicate(timeout=30)
    assert "Traceback" not in err, err
    return out


def test_an_idle_worker_holds_one_backend(
    spawn: Any, raw_connect: Any, connection_jobs: Path
) -> None:
    """Between ticks (jobs claimed alone at odd seconds, together at even ones) the worker
    holds one backend: its presence, clock, census, run-now LISTEN and claims in one."""
    observer = raw_connect()
    worker = spawn("cronworker", *TICKING, "--grace", "5")
    wait_for(lambda: workers_present(observer) == 1)
    wait_for(lambda: ran_a_few_times(TICKING), timeout=60, interval=0.2)
    assert most(lambda: backends_of(worker, observer), 3.0) == 1
    stopped(worker)


def holding_worker(
    spawn: Any, observer: Any, folder: Path, names: list[str], *options: str
) -> tuple[subprocess.Popen[str], list[Path]]:
    """A cronworker running the holding jobs ``names``, once it is present; the files each
    job's body writes when it starts."""
    worker = spawn("cronworker", *names, *options, "--grace", "5")
    wait_for(lambda: workers_present(observer) == 1)
    return worker, [folder / f"{name}.started" for name in names]


def all_exist(paths: list[Path]) -> None:
    wait_for(lambda: all(path.exists() for path in paths), timeout=60, interval=0.05)


def release_and_stop(folder: Path, worker: subprocess.Popen[str], names: list[str]) -> None:
    """Let the holding jobs end, wait until each succeeded once, stop the worker."""
    (folder / "release").touch()
    done = JobRun.objects.filter(job__in=names, status=RunStatus.SUCCEEDED)
    wait_for(lambda: done.values("job").distinct().count() == len(names), timeout=30)
    stopped(worker)


def test_a_busy_worker_holds_at_most_two_backends(
    spawn: Any, raw_connect: Any, connection_jobs: Path
) -> None:
    """Four session-scope runs at once (``--max-concurrency 4``), some claimed alone and some
    together: every lock on the worker's one claim connection, at most two backends."""
    observer = raw_connect()
    worker, started = holding_worker(
        spawn, observer, connection_jobs, HOLDING, "--max-concurrency", "4"
    )
    all_exist(started)
    assert most(lambda: backends_of(worker, observer), 2.0) <= 2
    release_and_stop(connection_jobs, worker, HOLDING)


@pytest.mark.parametrize("names", [HASHTEXT, OTHER_DATABASE], ids=["hashtext", "other-database"])
def test_runs_of_jobs_keyed_by_hashtext_or_on_another_database_share_a_claim_connection(
    spawn: Any, raw_connect: Any, connection_jobs: Path, names: list[str]
) -> None:
    """Jobs sharing their locks with SQL scripts (``key="hashtext"``) are claimed and held on
    the worker's connection like the others; jobs whose ``using`` is another database alias
    on one claim connection of that alias. Three at once, at most two backends in all."""
    observer = raw_connect()
    worker, started = holding_worker(spawn, observer, connection_jobs, names)
    all_exist(started)
    assert most(lambda: backends_of(worker, observer), 1.0) <= 2
    release_and_stop(connection_jobs, worker, names)


def test_jobs_that_wait_for_their_locks_wait_and_hold_them_on_the_workers_connection(
    spawn: Any, raw_connect: Any, connection_jobs: Path
) -> None:
    """Jobs with ``wait=`` try their locks again on the worker's one connection while
    another process holds them, then run holding them there: still at most two backends."""
    observer = raw_connect()
    script = raw_connect()
    held = LockKey(WAITING[0]).params
    script.execute("SELECT pg_advisory_lock(%(lock_ns)s, %(lock_id)s)", held)
    worker, started = holding_worker(spawn, observer, connection_jobs, WAITING)
    all_exist(started[1:])
    assert not started[0].exists()  # waiting for the script's lock
    assert most(lambda: backends_of(worker, observer), 1.0) <= 2
    script.execute("SELECT pg_advisory_unlock(%(lock_ns)s, %(lock_id)s)", held)
    all_exist(started[:1])
    assert most(lambda: backends_of(worker, observer), 1.0) <= 2
    release_and_stop(connection_jobs, worker, WAITING)


def test_a_run_now_takes_its_lock_on_the_workers_connection(
    spawn: Any, raw_connect: Any, connection_jobs: Path, manage: Any
) -> None:
    """A "run now" is claimed on the worker's one connection like a tick: afterwards the
    worker still holds one backend (no lock connection of its own left idle)."""
    observer = raw_connect()
    worker = spawn("cronworker", "conn_yearly", "--grace", "5")
    wait_for(lambda: workers_present(observer) == 1)
    triggered = manage("cronjob", "trigger", "conn_yearly")
    assert triggered.returncode == 0, triggered.stderr
    ran = JobRun.objects.filter(job="conn_yearly", status=RunStatus.SUCCEEDED, manual=True)
    wait_for(ran.exists, timeout=30)
    assert most(lambda: backends_of(worker, observer), 1.0) == 1
    stopped(worker)


@pytest.fixture
def pgbouncer(django_db_setup: None) -> Any:
    with start_pgbouncer(upstream(), pool_size=3) as bouncer:
        yield bouncer


def test_behind_a_transaction_pooler_a_worker_uses_at_most_two_client_connections(
    spawn: Any, connection_jobs: Path, pgbouncer: PgBouncer
) -> None:
    """Through PgBouncer in transaction mode (scope ``auto``: the runs are claimed together
    and protected by their rows' leases), across several ticks of jobs claimed alone and
    together."""
    worker = spawn("cronworker", *TICKING, "--grace", "5", url=bouncer_url(pgbouncer))
    wait_for(lambda: ran_a_few_times(TICKING), timeout=60, interval=0.2)
    assert most(lambda: len(sockets_to(worker, pgbouncer.port)), 3.0) <= 2
    out = stopped(worker)
    # The jobs due together at even seconds were claimed in one statement there too.
    found = re.search(r"(\d+) claim statement\(s\) took several jobs' ticks at once", out)
    assert found is not None and int(found.group(1)) >= 1, out
