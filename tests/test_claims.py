"""Runs claimed together: one statement takes several jobs' locks and ticks on one connection,
which holds those locks while the runs go on in threads of their own (real PostgreSQL, real
threads, ``pg_terminate_backend``; the cronworker processes in test_worker_fleet.py claim
their ticks this way too)."""

from __future__ import annotations

import json
import re
import signal
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from django.db import connections
from django.db.models import Count

from django_advisory_cron import exitcodes, locked_task, signals
from django_advisory_cron.core.keys import job_key
from django_advisory_cron.db import sql
from django_advisory_cron.db.execute import database_now
from django_advisory_cron.jobs.job import Job
from django_advisory_cron.lock.shared import ClaimConnection
from django_advisory_cron.models import JobRun, RunStatus
from django_advisory_cron.ops import control
from django_advisory_cron.run.runner import ClaimedRun, claim_together
from django_advisory_cron.worker.fleet import share_out
from tests.jobsapp.models import Marker
from tests.pglocks import holders
from tests.waiting import wait_for, workers_present

pytestmark = pytest.mark.usefixtures("transactional_db")

NAMES = [f"claims.job{number}" for number in range(4)]


@pytest.fixture
def jobs(fresh_registry: None, settings: Any) -> list[Job[..., Any]]:
    """Four jobs whose bodies write a row and then wait until released by the test."""
    settings.ADVISORY_CRON = {**settings.ADVISORY_CRON, "HEARTBEAT": 0.3, "LEASE": 1.5}
    made = []
    for name in NAMES:

        def body(name: str = name) -> None:
            JobRun.objects.filter(job=name).exists()  # a query: stops here once the lock is lost
            gate.wait(20)
            JobRun.objects.filter(job=name).exists()

        made.append(locked_task(name=name, every=timedelta(minutes=5))(body))
    return made


gate = threading.Event()


@pytest.fixture(autouse=True)
def closed_gate() -> Any:
    gate.clear()
    yield
    gate.set()


def tick_of(job: Job[..., Any]) -> datetime:
    assert job.schedule is not None
    return job.schedule.next_tick(database_now())


def in_thread(run: ClaimedRun) -> None:
    try:
        run.run()
    finally:
        connections.close_all()  # this thread's own


def start(runs: list[ClaimedRun]) -> list[threading.Thread]:
    threads = [threading.Thread(target=in_thread, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    return threads


def claim_and_run(jobs: list[Job[..., Any]], tick: datetime) -> tuple[list[ClaimedRun], list[Any]]:
    """Claim ``tick`` of every job together on a new claim connection, run the winners to
    their end, close the connection."""
    claims = ClaimConnection("default")
    try:
        runs, skipped = claim_together([(job, tick) for job in jobs], claims)
        gate.set()
        for thread in start(runs):
            thread.join(10)
    finally:
        claims.close()
    return runs, skipped


def start_two(
    jobs: list[Job[..., Any]], tick: datetime, claims: ClaimConnection
) -> tuple[list[ClaimedRun], list[threading.Thread]]:
    """Claim ``tick`` of the first two jobs together and start them in threads of their own
    (their bodies wait at the gate); both rows are recorded running."""
    runs, _ = claim_together([(job, tick) for job in jobs[:2]], claims)
    threads = start(runs)
    wait_for(
        lambda: JobRun.objects.filter(job__in=NAMES[:2], status=RunStatus.RUNNING).count() == 2
    )
    return runs, threads


def backend_pid(claims: ClaimConnection) -> int:
    assert claims._connection is not None
    with claims._connection.wrapper.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


@pytest.mark.parametrize("record_skips", [False, True])
def test_one_statement_claims_every_job_and_one_connection_holds_the_locks(
    jobs: list[Job[..., Any]], raw_connect: Any, record_skips: bool, settings: Any
) -> None:
    settings.ADVISORY_CRON = {"RECORD_SKIPS": record_skips}
    observer = raw_connect()
    tick = tick_of(jobs[0])
    first, second, late = (ClaimConnection("default") for _ in range(3))
    try:
        runs, skipped = claim_together([(job, tick) for job in jobs], first)
        assert [run.job.name for run in runs] == NAMES and skipped == []
        pid = backend_pid(first)
        assert {
            name: holders(observer, job.key) for name, job in zip(NAMES, jobs, strict=True)
        } == {name: [pid] for name in NAMES}
        threads = start(runs)
        # A replica claiming the same tick meanwhile: every job skipped, nothing held.
        others, lost = claim_together([(job, tick) for job in jobs], second)
        assert others == [] and [r.status for r in lost] == [RunStatus.SKIPPED_LOCKED] * 4
        assert all(holders(observer, job.key) == [pid] for job in jobs)
        gate.set()
        for thread in threads:
            thread.join(10)
        assert [run.result.status for run in runs] == [RunStatus.SUCCEEDED] * 4
        assert all(holders(observer, job.key) == [] for job in jobs)
        # A replica that comes after the runs ended: the ticks are taken; its locks are
        # released by the same statement (which records its skips with RECORD_SKIPS).
        none, done = claim_together([(job, tick) for job in jobs], late)
        assert none == [] and [r.status for r in done] == [RunStatus.SKIPPED_TICK] * 4
        assert all(holders(observer, job.key) == [] for job in jobs)
    finally:
        for claims in (first, second, late):
            claims.close()
    for name in NAMES:
        statuses = sorted(
            JobRun.objects.filter(job=name, tick=tick).values_list("status", flat=True)
        )
        skips = ["skipped_locked", "skipped_tick"] if record_skips else []
        assert statuses == sorted(["succeeded", *skips])


def test_a_paused_job_is_skipped_and_recorded_while_the_others_run(
    jobs: list[Job[..., Any]], settings: Any
) -> None:
    settings.ADVISORY_CRON = {"RECORD_SKIPS": True}
    control.pause(NAMES[1], by="ops", reason="migrating")
    tick = tick_of(jobs[0])
    runs, skipped = claim_and_run(jobs, tick)
    assert [run.job.name for run in runs] == [NAMES[0], *NAMES[2:]]
    (paused,) = skipped
    assert paused.status == RunStatus.SKIPPED_PAUSED and "migrating" in (paused.paused or "")
    row = JobRun.objects.get(job=NAMES[1], tick=tick)
    assert row.status == RunStatus.SKIPPED_PAUSED and "by ops" in row.error


def test_a_dead_run_is_marked_interrupted_and_its_tick_claimed_again(
    jobs: list[Job[..., Any]],
) -> None:
    """A run row left ``running`` by a process that died, its lease expired: the batch marks
    it interrupted and runs the tick (the follow-up claim of a tick the same statement gave
    back)."""
    tick = tick_of(jobs[0])
    JobRun.objects.create(
        job=NAMES[0],
        tick=tick,
        host="gone",
        pid=1,
        status=RunStatus.RUNNING,
        started=database_now() - timedelta(seconds=60),
        lease_until=database_now() - timedelta(seconds=5),
    )
    runs, skipped = claim_and_run(jobs, tick)
    assert skipped == [] and len(runs) == 4 and runs[0].result.interrupted_runs == 1
    statuses = dict(JobRun.objects.filter(job=NAMES[0]).values_list("host", "status"))
    assert statuses["gone"] == RunStatus.INTERRUPTED
    assert list(statuses.values()).count(RunStatus.SUCCEEDED) == 1


def test_losing_the_claim_connection_stops_every_run_it_held(
    jobs: list[Job[..., Any]], raw_connect: Any
) -> None:
    told: list[str] = []

    def receiver(sender: Job[..., Any], **kwargs: Any) -> None:
        told.append(sender.name)

    signals.lock_lost.connect(receiver, weak=False, dispatch_uid="claims-test")
    tick = tick_of(jobs[0])
    claims = ClaimConnection("default")
    try:
        runs, threads = start_two(jobs, tick, claims)
        raw_connect().execute("SELECT pg_terminate_backend(%s)", (backend_pid(claims),))
        # The heartbeat finds the connection dead: both rows are marked at once.
        wait_for(
            lambda: (
                JobRun.objects.filter(job__in=NAMES[:2], status=RunStatus.LOCK_LOST).count() == 2
            ),
            timeout=10,
        )
        gate.set()
        for thread in threads:
            thread.join(10)
        assert [run.result.status for run in runs] == [RunStatus.LOCK_LOST] * 2
        assert sorted(told) == NAMES[:2]
        # The next claim opens a new connection.
        again = tick + timedelta(minutes=5)
        more, _ = claim_together([(job, again) for job in jobs[:2]], claims)
        for thread in start(more):
            thread.join(10)
        assert [run.result.status for run in more] == [RunStatus.SUCCEEDED] * 2
    finally:
        signals.lock_lost.disconnect(dispatch_uid="claims-test")
        claims.close()
    rows = JobRun.objects.filter(job__in=NAMES[:2], tick=tick)
    assert {row.status for row in rows} == {RunStatus.LOCK_LOST}
    assert all("lock lost" in row.error for row in rows)


def test_racing_replicas_claiming_together_run_each_tick_once(
    jobs: list[Job[..., Any]],
) -> None:
    """Eight threads, each a replica with its own claim connection, claim the same ticks of
    the four jobs at once, twenty times: each tick runs once, and no job ever runs twice at
    the same time (an in-memory counter would see it)."""
    gate.set()
    running: dict[str, int] = dict.fromkeys(NAMES, 0)
    overlaps: list[str] = []
    guard = threading.Lock()
    schedule = jobs[0].schedule
    assert schedule is not None
    first = schedule.next_tick(database_now())
    ticks = [first + timedelta(minutes=5 * number) for number in range(20)]

    def enter(sender: Job[..., Any], **kwargs: Any) -> None:
        with guard:
            running[sender.name] += 1
            if running[sender.name] > 1:
                overlaps.append(sender.name)

    def leave(sender: Job[..., Any], **kwargs: Any) -> None:
        with guard:
            running[sender.name] -= 1

    signals.job_started.connect(enter, weak=False, dispatch_uid="claims-enter")
    signals.job_finished.connect(leave, weak=False, dispatch_uid="claims-leave")
    barrier = threading.Barrier(8)

    def replica() -> None:
        claims = ClaimConnection("default")
        try:
            for tick in ticks:
                barrier.wait(10)
                runs, _ = claim_together([(job, tick) for job in jobs], claims)
                for run in runs:
                    run.run()
        finally:
            claims.close()
            connections.close_all()

    try:
        threads = [threading.Thread(target=replica) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        signals.job_started.disconnect(dispatch_uid="claims-enter")
        signals.job_finished.disconnect(dispatch_uid="claims-leave")
    assert overlaps == []
    for name in NAMES:
        ran = JobRun.objects.filter(job=name, status=RunStatus.SUCCEEDED)
        assert sorted(tick for tick in ran.values_list("tick", flat=True) if tick) == ticks


def two_full_ticks(names: list[str], observer: Any) -> None:
    """Wait until every job in ``names`` has run two two-second ticks from now on."""
    (now,) = observer.execute("SELECT now()").fetchone()
    beyond = now + timedelta(seconds=3)
    wait_for(
        lambda: (
            JobRun.objects.filter(job__in=names, status=RunStatus.SUCCEEDED, tick__gte=beyond)
            .values("job")
            .distinct()
            .count()
            == len(names)
        ),
        timeout=60,
        interval=0.2,
    )


def test_cronworkers_claim_their_ticks_together(
    spawn: Any, raw_connect: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three cronworker processes with twenty jobs each second tick: one claim statement per
    worker per tick, and every tick of every job once."""
    fleet = {"JOBS_MODULE": "worker_tasks", "MAX_SKEW": 0.5, "HEARTBEAT": 0.5, "LEASE": 1.5}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(fleet))
    names = [f"every2_{number}" for number in range(20)]
    workers = [spawn("cronworker", *names, "--grace", "5") for _ in range(3)]
    observer = raw_connect()
    wait_for(lambda: workers_present(observer) == 3)
    two_full_ticks(names, observer)  # each worker claims its share of each tick at once
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    outputs = [worker.communicate(timeout=30) for worker in workers]
    observer.close()
    for out, err in outputs:
        assert "Traceback" not in err, err
        found = re.search(r"(\d+) claim statement\(s\) took several jobs' ticks at once", out)
        assert found is not None, out
        assert int(found.group(1)) >= 2  # a tick every 2 s for about 7 s
    ran = JobRun.objects.filter(job__in=names, status=RunStatus.SUCCEEDED)
    per_tick: dict[tuple[str, datetime | None], int] = {}
    for job, tick in ran.values_list("job", "tick"):
        per_tick[(job, tick)] = per_tick.get((job, tick), 0) + 1
    assert per_tick and set(per_tick.values()) == {1}


def test_the_jobs_due_together_are_shared_out_evenly_and_alike_by_every_worker() -> None:
    """Every worker computes the same shares from the same live workers, whatever order it
    reads them in; the shares differ by at most one job; with few jobs due, the first deal
    moves round from tick to tick."""
    workers = [f"worker host{number}:1" for number in range(3)]
    tick = datetime(2026, 12, 3, 12, 0, tzinfo=timezone.utc)
    for count in (2, 5, 20, 301):
        jobs = [f"job{number}" for number in range(count)]
        shares = share_out(jobs, workers, tick)
        assert shares == share_out(list(reversed(jobs)), list(reversed(workers)), tick)
        per_worker = Counter(shares.values())
        assert max(per_worker.values()) - min(per_worker.get(w, 0) for w in workers) <= 1
    firsts = Counter(
        share_out(["a", "b"], workers, tick + timedelta(seconds=2 * number))["a"]
        for number in range(60)
    )
    assert set(firsts) == set(workers), firsts


def test_the_look_before_a_claim_finds_the_ticks_no_run_has_taken() -> None:
    """The read a worker takes before claiming the others' share answers, in order, the
    job-ticks that a claim could still take: no row; only rows that do not take a tick (a
    skip, an interrupted run); a ``running`` row whose lease has expired (the claim marks it
    dead). A live ``running`` row and a finished run take their tick, a ``lock_lost`` one
    whatever its lease."""
    now = database_now()
    tick = now.replace(microsecond=0)
    rows: dict[str, list[tuple[str, datetime | None]]] = {
        "look.none": [],
        "look.live": [(RunStatus.RUNNING, now + timedelta(seconds=30))],
        "look.dead": [(RunStatus.RUNNING, now - timedelta(seconds=5))],
        "look.done": [(RunStatus.SUCCEEDED, None)],
        "look.skips": [(RunStatus.SKIPPED_LOCKED, None), (RunStatus.INTERRUPTED, None)],
        "look.lost": [(RunStatus.LOCK_LOST, now - timedelta(seconds=5))],
    }
    for job, statuses in rows.items():
        for status, lease in statuses:
            JobRun.objects.create(
                job=job, tick=tick, host="h", pid=1, status=status, started=now, lease_until=lease
            )
    due = [(job, tick) for job in rows] + [("look.done", tick + timedelta(seconds=1))]
    claims = ClaimConnection("default")
    try:
        answer = claims.read(sql.unclaimed_ticks(due))
    finally:
        claims.close()
    assert [due[n - 1][0] for (n,) in answer] == [
        "look.none",
        "look.dead",
        "look.skips",
        "look.done",
    ]


def test_a_job_dealt_to_a_worker_that_does_not_run_it_still_runs_each_tick(
    spawn: Any, raw_connect: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers with different jobs: the jobs only the second one runs are claimed by it
    after ``SPREAD_DELAY`` when they were dealt to the first; each tick runs once."""
    fleet = {"JOBS_MODULE": "worker_tasks", "MAX_SKEW": 0.5, "HEARTBEAT": 0.5, "LEASE": 1.5}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(fleet))
    names = [f"every2_{number}" for number in range(20)]
    workers = [
        spawn("cronworker", *names[:10], "--grace", "5"),
        spawn("cronworker", *names, "--grace", "5"),
    ]
    observer = raw_connect()
    wait_for(lambda: workers_present(observer) == 2)
    two_full_ticks(names, observer)
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    for worker in workers:
        _out, err = worker.communicate(timeout=30)
        assert "Traceback" not in err, err
    ran = JobRun.objects.filter(job__in=names, status=RunStatus.SUCCEEDED)
    per_job = Counter(ran.values_list("job", flat=True))
    assert set(per_job) == set(names), per_job  # every job ran, the second worker's too
    assert not ran.values("job", "tick").annotate(n=Count("id")).filter(n__gt=1).exists()
    late = ran.filter(job__in=names[10:]).values_list("tick", "started")
    # Claimed after SPREAD_DELAY, well within the tick (a busy host adds some delay).
    assert all(tick and (started - tick).total_seconds() < 3 for tick, started in late), late


def test_a_run_whose_row_was_closed_under_it_stops_and_gives_its_lock_back(
    jobs: list[Job[..., Any]], raw_connect: Any
) -> None:
    """Another process closed one run's row (as a replica does with a lease it found expired):
    the heartbeat reports that run lost, the run stops at its next query, and its lock is
    released on the shared connection, which goes on holding the other run's lock."""
    observer = raw_connect()
    tick = tick_of(jobs[0])
    claims = ClaimConnection("default")
    try:
        runs, threads = start_two(jobs, tick, claims)
        JobRun.objects.filter(job=NAMES[0], tick=tick).update(status=RunStatus.INTERRUPTED)
        pid = backend_pid(claims)
        wait_for(lambda: runs[0].lock.lost, timeout=5)  # the next beat finds it
        gate.set()
        threads[0].join(10)
        assert runs[0].result.status == RunStatus.LOCK_LOST
        wait_for(lambda: holders(observer, jobs[0].key) == [], timeout=5)
        threads[1].join(10)
        assert runs[1].result.status == RunStatus.SUCCEEDED
        assert holders(observer, jobs[1].key) == [] and backend_pid(claims) == pid
    finally:
        claims.close()


def test_runs_claimed_beyond_max_concurrency_are_recorded_when_the_worker_stops(
    spawn: Any, raw_connect: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three jobs claimed together by a worker that runs one at a time, stopped at once: the
    runs still waiting for a slot are recorded interrupted ("stopped before the run started"),
    their bodies never ran, no row is left running and no lock is left held."""
    fleet = {"JOBS_MODULE": "worker_tasks", "MAX_SKEW": 0.5, "HEARTBEAT": 0.5, "LEASE": 1.5}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(fleet))
    names = ["every2_slow", "every2_work", "every2_1"]
    worker = spawn("cronworker", *names, "--max-concurrency", "1", "--grace", "1")
    claimed = JobRun.objects.filter(job__in=names).exclude(status__startswith="skipped")
    wait_for(lambda: claimed.count() >= 3, timeout=15)
    worker.send_signal(signal.SIGTERM)
    _out, err = worker.communicate(timeout=30)
    assert worker.returncode == exitcodes.SIGTERM, err
    assert "Traceback" not in err, err
    assert not claimed.filter(status=RunStatus.RUNNING).exists()
    waiting = claimed.filter(error__contains="stopped before the run started")
    assert waiting.exists(), list(claimed.values_list("job", "status", "error"))
    for row in waiting:
        assert row.status == RunStatus.INTERRUPTED
        assert not Marker.objects.filter(job=row.job).exists()  # its body never ran
    observer = raw_connect()
    assert all(holders(observer, job_key(name)) == [] for name in names)


@contextmanager
def finishes_waiting(
    jobs: list[Job[..., Any]], tick: datetime, claims: ClaimConnection
) -> Iterator[tuple[list[ClaimedRun], list[threading.Thread]]]:
    """Claim ``tick`` of every job together on ``claims`` and start the runs; then, holding
    the connection's turn, let them end: inside the block every run's finish waits for the
    connection, together; they go once it ends."""
    runs, _ = claim_together([(job, tick) for job in jobs], claims)
    threads = start(runs)
    wait_for(lambda: JobRun.objects.filter(job__in=NAMES, status=RunStatus.RUNNING).count() == 4)
    with claims.turn():
        gate.set()
        wait_for(lambda: len(claims._finishing) == len(runs))
        yield runs, threads


def test_finishes_that_meet_on_the_claim_connection_commit_as_one(
    jobs: list[Job[..., Any]], raw_connect: Any
) -> None:
    """Runs claimed together that end while their connection is busy finish together: one
    statement, one transaction writes every row (one ``xmin``), and every lock is released."""
    observer = raw_connect()
    tick = tick_of(jobs[0])
    claims = ClaimConnection("default")
    try:
        with finishes_waiting(jobs, tick, claims) as (runs, threads):
            pass
        for thread in threads:
            thread.join(10)
        assert [run.result.status for run in runs] == [RunStatus.SUCCEEDED] * 4
        assert all(holders(observer, job.key) == [] for job in jobs)
    finally:
        claims.close()
    written = observer.execute(
        "SELECT count(DISTINCT xmin::text), count(*) FROM django_advisory_cron_jobrun "
        "WHERE job = ANY(%s) AND tick = %s AND status = 'succeeded'",
        (NAMES, tick),
    ).fetchone()
    assert written == (1, 4)


def test_finishes_waiting_together_when_the_connection_dies_are_each_a_lost_lock(
    jobs: list[Job[..., Any]], raw_connect: Any
) -> None:
    """The claim connection is cut while four runs' finishes wait for it together: the
    statement that would finish them fails, and each run is what one whose finish failed
    alone is, a lost lock, recorded through a fresh connection and told; none stays running."""
    told: list[str] = []

    def receiver(sender: Job[..., Any], **kwargs: Any) -> None:
        told.append(sender.name)

    signals.lock_lost.connect(receiver, weak=False, dispatch_uid="claims-batch-lost")
    observer = raw_connect()
    tick = tick_of(jobs[0])
    claims = ClaimConnection("default")
    try:
        with finishes_waiting(jobs, tick, claims) as (runs, threads):
            observer.execute("SELECT pg_terminate_backend(%s)", (backend_pid(claims),))
        for thread in threads:
            thread.join(10)
        assert [run.result.status for run in runs] == [RunStatus.LOCK_LOST] * 4
        wait_for(lambda: sorted(told) == NAMES)
        assert all(holders(observer, job.key) == [] for job in jobs)
    finally:
        signals.lock_lost.disconnect(dispatch_uid="claims-batch-lost")
        claims.close()
    rows = JobRun.objects.filter(job__in=NAMES, tick=tick)
    assert sorted(rows.values_list("status", flat=True)) == [RunStatus.LOCK_LOST] * 4
