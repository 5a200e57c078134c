"""N threads and N OS processes race for one job: exactly one runs, the others skip at once."""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any, cast

import pytest
from django.db import connection

from django_advisory_cron import locked_task
from django_advisory_cron.core.scopes import Scope
from django_advisory_cron.models import JobRun, RunStatus
from tests.jobsapp.models import Marker

pytestmark = pytest.mark.usefixtures("transactional_db")

RACERS = 5
ROUNDS = 20
#: Rounds of real processes: each runs five Django commands, so fewer than the threads'
#: (which race the lock itself 20 times per scope). Three show the outcome repeat, each round
#: on a lock the previous round's winner released.
PROCESS_ROUNDS = 3


@pytest.mark.parametrize("scope", ["session", "transaction"])
@pytest.mark.usefixtures("fresh_registry")
def test_threads_race_one_job(scope: str) -> None:
    """5 threads, each with its own connection, start together; the winner holds until all
    the others have returned, so every loser really meets a held lock."""
    runs: list[int] = []
    losers_done = threading.Semaphore(0)

    @locked_task(name=f"threaded_{scope}", scope=cast(Scope, scope))
    def threaded(round_number: int) -> None:
        runs.append(round_number)
        for _ in range(RACERS - 1):
            assert losers_done.acquire(timeout=30), "a loser never returned"

    for round_number in range(ROUNDS):
        barrier = threading.Barrier(RACERS)
        statuses: list[str] = []

        def racer(
            round_number: int = round_number,
            barrier: threading.Barrier = barrier,
            statuses: list[str] = statuses,
        ) -> None:
            try:
                barrier.wait()
                result = threaded.run(round_number)
                statuses.append(result.status)
                if result.skipped:
                    losers_done.release()
            finally:
                connection.close()

        threads = [threading.Thread(target=racer) for _ in range(RACERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(statuses) == ["skipped_locked"] * (RACERS - 1) + ["succeeded"]
    assert runs == list(range(ROUNDS))
    # One row per round: the losers wrote nothing.
    recorded = JobRun.objects.filter(job=f"threaded_{scope}")
    assert list(recorded.values_list("status", flat=True)) == [RunStatus.SUCCEEDED] * ROUNDS


def result(future: Future[CompletedProcess[str]]) -> CompletedProcess[str]:
    return future.result(timeout=60)


def test_processes_race_one_job(manage: Any, tmp_path: Path) -> None:
    """5 real ``manage.py runlocked`` processes per round, 3 rounds: one runs, four skip
    with exit 0 while the winner still holds the lock. The processes are forked from a warm
    starter (tests/warm_start.py), so they start within milliseconds of each other."""
    started = time.monotonic()
    with ThreadPoolExecutor(RACERS) as pool:
        for round_number in range(PROCESS_ROUNDS):
            release = tmp_path / f"release-{round_number}"
            racing = [
                pool.submit(manage, "runlocked", "hold_until", str(release)) for _ in range(RACERS)
            ]
            try:
                deadline = time.monotonic() + 60
                while sum(future.done() for future in racing) < RACERS - 1:
                    assert time.monotonic() < deadline, "losers did not skip in time"
                    time.sleep(0.02)
            finally:  # the winner waits for it, failure or not
                release.touch()
            outputs = [(done.returncode, done.stdout, done.stderr) for done in map(result, racing)]
            assert [code for code, _, _ in outputs] == [0] * RACERS, outputs
            ran = [out for _, out, _ in outputs if ": ran" in out]
            skipped = [out for _, out, _ in outputs if "skipped, locked by another process" in out]
            assert (len(ran), len(skipped)) == (1, RACERS - 1), outputs
    elapsed = time.monotonic() - started
    assert Marker.objects.filter(job="hold_until").count() == PROCESS_ROUNDS
    runs = JobRun.objects.filter(job="hold_until")
    assert list(runs.values_list("status", flat=True)) == [RunStatus.SUCCEEDED] * PROCESS_ROUNDS
    print(f"\n{PROCESS_ROUNDS} rounds x {RACERS} processes: {elapsed:.1f} s")


def test_pids_of_racing_processes_are_recorded(spawn, tmp_path: Path, monkeypatch) -> None:
    """With ``RECORD_SKIPS`` each racer's row carries its own pid."""
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"RECORD_SKIPS": True}))
    release = tmp_path / "release"
    processes = [spawn("runlocked", "hold_until", str(release)) for _ in range(3)]
    while sum(process.poll() is not None for process in processes) < 2:
        time.sleep(0.02)
    release.touch()
    for process in processes:
        process.communicate(timeout=60)
    pids = set(JobRun.objects.values_list("pid", flat=True))
    assert pids == {process.pid for process in processes}
    assert os.getpid() not in pids
