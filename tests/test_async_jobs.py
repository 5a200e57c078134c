"""``async def`` jobs under every runner (``runlocked``, ``cronworker``, django-q2's entry
point), with Django's async ORM in the body, stop signals and timeouts; and ``async with
advisory_lock(...)``, which never blocks the event loop: in one loop, and in a real ASGI
server answering other requests while a view waits for its lock."""

from __future__ import annotations

import asyncio
import importlib
import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from django_advisory_cron import LockKey, advisory_lock, exitcodes
from django_advisory_cron.contrib import django_q as q2
from django_advisory_cron.exceptions import LockScopeError
from django_advisory_cron.models import JobRun, RunStatus
from django_advisory_cron.testing.postgres import free_port
from tests.conftest import manage_env
from tests.jobsapp.models import Marker
from tests.waiting import wait_for, wait_for_workers

pytestmark = pytest.mark.usefixtures("transactional_db")


@pytest.fixture
def async_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = {"JOBS_MODULE": "async_tasks", "MAX_SKEW": 0.5}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))


def test_runlocked_runs_an_async_job_with_the_async_orm(async_jobs: None, manage: Any) -> None:
    done = manage("runlocked", "async_mark", "hello")
    assert done.returncode == exitcodes.OK, done.stderr
    assert "async_mark: ran" in done.stdout
    assert JobRun.objects.get(job="async_mark").status == RunStatus.SUCCEEDED
    assert Marker.objects.get(job="async_mark").note == "hello"


def test_a_stop_signal_and_the_timeout_end_an_async_job_as_a_sync_one(
    async_jobs: None, spawn: Any, manage: Any
) -> None:
    process = spawn("runlocked", "async_hold")
    wait_for(lambda: Marker.objects.filter(job="async_hold").exists())
    process.send_signal(signal.SIGTERM)
    _out, err = process.communicate(timeout=30)
    assert process.returncode == exitcodes.SIGTERM, err
    assert JobRun.objects.get(job="async_hold").status == RunStatus.INTERRUPTED
    slow = manage("runlocked", "async_slow")
    assert slow.returncode == exitcodes.TIMED_OUT, slow.stderr
    assert JobRun.objects.get(job="async_slow").status == RunStatus.TIMED_OUT


def test_a_stop_signal_inside_asgiref_still_ends_the_run_as_interrupted(
    async_jobs: None, manage: Any
) -> None:
    """A SIGTERM handled while asgiref copies a ``sync_to_async`` call's context back: the run
    is interrupted (it was recorded as failed with "Single thread executor already being used,
    would deadlock", and the stop was lost)."""
    stopped = manage("runlocked", "async_stopped_in_asgiref")
    assert stopped.returncode == exitcodes.SIGTERM, stopped.stderr
    assert "deadlock" not in stopped.stderr
    run = JobRun.objects.get(job="async_stopped_in_asgiref")
    assert run.status == RunStatus.INTERRUPTED, run.error


@pytest.mark.slow
def test_cronworker_runs_an_async_job_once_per_tick(
    async_jobs: None, spawn: Any, raw_connect: Any
) -> None:
    workers = [spawn("cronworker", "async_every", "--grace", "5") for _ in range(2)]
    wait_for_workers(raw_connect(), workers)
    wait_for(lambda: JobRun.objects.filter(job="async_every").count() >= 3, timeout=30)
    for worker in workers:
        worker.terminate()
    for worker in workers:
        worker.communicate(timeout=30)
    runs = JobRun.objects.filter(job="async_every")
    ran = [run for run in runs if run.status == RunStatus.SUCCEEDED]
    assert len(ran) >= 3 and len({run.tick for run in runs}) == runs.count()
    assert Marker.objects.filter(job="async_every").count() == len(ran)


def test_django_q2_runs_an_async_job(fresh_registry: None) -> None:
    importlib.reload(importlib.import_module("tests.jobsapp.async_tasks"))
    summary = q2.run_scheduled("async_mark", "from q2")
    assert [run["status"] for run in summary["runs"]] == ["succeeded"], summary
    assert Marker.objects.get(job="async_mark").note == "from q2"


def test_the_async_lock_waits_without_blocking_the_loop(raw_connect: Any) -> None:
    holder = raw_connect()
    holder.execute("SELECT pg_advisory_lock(%(lock_ns)s, %(lock_id)s)", LockKey("async-k").params)

    async def main() -> tuple[bool, int, bool]:
        ticks = 0

        async def ticking() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.02)
                ticks += 1

        ticker = asyncio.create_task(ticking())
        async with advisory_lock("async-k", scope="session", wait=1.0) as waited:
            pass
        seen = ticks
        holder.execute(
            "SELECT pg_advisory_unlock(%(lock_ns)s, %(lock_id)s)", LockKey("async-k").params
        )
        async with advisory_lock("async-k", scope="session", wait=5) as lock:
            taken = lock.acquired
        ticker.cancel()
        return waited.acquired, seen, taken

    waited, ticks, taken = asyncio.run(main())
    assert not waited and taken
    # The loop ran on for the second the lock was waited for: 50 ticks of 20 ms on a quiet
    # machine, fewer when the CPUs are busy (14 with eight test processes on two cores); a
    # wait that blocked the loop would let it tick at most once.
    assert ticks >= 5, ticks


def test_the_async_lock_needs_session_scope() -> None:
    async def main() -> None:
        async with advisory_lock("async-t", scope="transaction"):
            pass

    with pytest.raises(LockScopeError, match="needs session scope"):
        asyncio.run(main())


@pytest.fixture
def asgi_server(db_url: str) -> Iterator[str]:
    """The test project under a real uvicorn (one process, one event loop)."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "tests.asgi:application", "--port", str(port)],
        env=manage_env(db_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return bool(urllib.request.urlopen(f"{url}/async/ping/", timeout=1).status == 200)
        except OSError:
            return False

    wait_for(up, timeout=30, interval=0.1)
    yield url
    process.terminate()
    process.communicate(timeout=30)


def _trying(observer: Any) -> bool:
    row = observer.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'django-advisory-cron'"
        " AND query LIKE %s",
        ("%pg_try_advisory_lock%",),
    ).fetchone()
    return bool(row and row[0])


def _get(url: str) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read()), time.monotonic() - started


@pytest.mark.slow
def test_an_asgi_view_waiting_for_its_lock_lets_other_requests_through(
    asgi_server: str, raw_connect: Any
) -> None:
    holder = raw_connect()
    holder.execute("SELECT pg_advisory_lock(%(lock_ns)s, %(lock_id)s)", LockKey("asgi-held").params)
    with ThreadPoolExecutor(4) as pool:
        waiting = pool.submit(_get, f"{asgi_server}/async/locked/?wait=3")
        # The view is inside its wait once its lock connection has tried the lock.
        wait_for(lambda: _trying(holder), timeout=10)
        pings = [_get(f"{asgi_server}/async/ping/") for _ in range(5)]
        assert not waiting.done()
        answer, waited = waiting.result()
    assert answer == {"acquired": False} and waited >= 3
    assert all(body == {"pong": True} for body, _ in pings)
    assert max(took for _, took in pings) < 1.0, pings
    holder.execute(
        "SELECT pg_advisory_unlock(%(lock_ns)s, %(lock_id)s)", LockKey("asgi-held").params
    )
    answer, _ = _get(f"{asgi_server}/async/locked/?wait=3")
    assert answer == {"acquired": True}
