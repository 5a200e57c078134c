"""The scheduler every replica runs (``manage.py cronworker``): no leader, no queue.

Each worker wakes at every due tick of every scheduled job and runs the job through the
runner *for that tick* (``now=tick``). Every replica does the same; the lock and the
``(job, tick)`` row let exactly one of them run it, and the others record a skip. Workers try
their due jobs in an order of their own (a hash of the worker's identity and the job's name),
so the wins spread across replicas instead of going to the fastest one.

"Run now": an operator's request (``manage.py cronjob trigger``, the admin) is claimed by one
worker in one statement and run as a manual run (no tick, under the lock). Workers LISTEN for
the request's NOTIFY on their presence connection and claim within milliseconds; where that
connection goes through a pooler (LISTEN needs one server session) or the driver cannot wait
for notifications, they look for requests every ``REQUEST_POLL`` seconds instead.

Time: ticks are judged on the database's clock, as the runner does. The worker reads it once
per wake and sleeps on the monotonic clock in between, so a suspended VM, an NTP step or a
long pause can neither skip the tick it wakes up for nor run one twice: after a pause, the
latest tick that passed runs once (the others are missed, and the history shows the gap).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import select
import socket
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from . import history, pooler, signals, sql
from .conf import app_settings
from .history import HOST
from .jobs import Job
from .lockconn import answer_within, ensure_connected, unpooled_connection
from .runner import RunResult, execute

logger = logging.getLogger("django_advisory_cron")

#: ``application_name`` prefix of a worker's presence connection: a worker is visible in
#: ``pg_stat_activity`` exactly as long as its process lives.
PRESENCE_NAME = "django-advisory-cron worker"

RUN_THREAD = "advisory-cron-run"

#: Seconds between database clock readings while nothing is due (the clock is read at every
#: wake too). Keeps a long sleep from drifting when the host's clock is stepped.
CLOCK_REFRESH = 30.0

#: Seconds between looks for "run now" requests when the worker cannot LISTEN for them.
REQUEST_POLL = 1.0


def worker_identity() -> str:
    return f"{HOST}:{os.getpid()}"


def run_order(identity: str, names: Iterable[str]) -> list[str]:
    """The order this worker tries its due jobs in: its own, stable, spread across workers."""

    def rank(name: str) -> bytes:
        return hashlib.sha256(f"{identity}\0{name}".encode()).digest()

    return sorted(names, key=rank)


class DatabaseClock:
    """The database server's clock, read once per wake and advanced by the monotonic clock."""

    def __init__(self, connection: BaseDatabaseWrapper) -> None:
        self.connection = connection
        self._base: datetime | None = None
        self._at = 0.0

    def read(self) -> datetime:
        text, params = sql.database_now()
        with (
            answer_within(self.connection, app_settings.STATEMENT_TIMEOUT),
            self.connection.cursor() as cursor,
        ):
            cursor.execute(text, params)
            row = cursor.fetchone()
        assert row is not None
        self._base, self._at = row[0], time.monotonic()
        return self._base

    def now(self) -> datetime:
        if self._base is None or time.monotonic() - self._at > CLOCK_REFRESH:
            return self.read()
        return self._base + timedelta(seconds=time.monotonic() - self._at)


class Wakeup:
    """Ends a worker's sleep early: on a notification on its (direct) connection, or when
    [poke][django_advisory_cron.worker.Wakeup.poke] is called (``stop()``, even from a signal
    handler). Without a listening connection it only wakes on ``poke``."""

    def __init__(self) -> None:
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)
        self.raw: Any = None

    def listen(self, connection: BaseDatabaseWrapper) -> bool:
        """LISTEN for "run now" requests on ``connection``; ``False`` when it cannot be used
        (a pooler in the path, or a driver without ``notifies(timeout=...)``)."""
        if pooler.resolve_scope("auto", connection.alias) == "transaction":
            return False
        raw = connection.connection
        if raw is None or not hasattr(raw, "notifies"):
            return False
        text, params = sql.listen()
        with (
            answer_within(connection, app_settings.STATEMENT_TIMEOUT),
            connection.cursor() as cursor,
        ):
            cursor.execute(text, params)
        self.raw = raw
        return self._drain() is not None

    def poke(self) -> None:
        with contextlib.suppress(OSError):  # already closed, or the buffer is full of pokes
            self._writer.send(b"\0")

    def _drain(self) -> bool | None:
        """Whether notifications arrived (``None``: the connection cannot be listened on)."""
        try:
            return bool(list(self.raw.notifies(timeout=0)))
        except Exception as error:  # a driver too old for timeout=, or a broken connection
            logger.warning("cronworker: stopped listening for run-now requests: %s", error)
            self.raw = None
            return None

    def sleep(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; ``True`` when woken by a notification."""
        deadline = time.monotonic() + seconds
        waiting: list[Any] = [self._reader]
        while True:
            if self.raw is not None:
                if self._drain():
                    return True
                waiting = [self._reader] if self.raw is None else [self._reader, self.raw]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            ready = select.select(waiting, [], [], remaining)[0]
            if self._reader in ready:
                with contextlib.suppress(BlockingIOError):
                    while self._reader.recv(64):
                        pass
                return False
            if not ready:
                return False

    def close(self) -> None:
        self._reader.close()
        self._writer.close()


@dataclass
class WorkerStats:
    """What this worker did, for its line at shutdown."""

    started: int = 0
    #: Runs started on a "run now" request (included in ``started``).
    manual: int = 0
    ran: int = 0
    skipped: int = 0
    failed: int = 0


class Worker:
    """One replica's scheduler: see the module docstring."""

    def __init__(
        self,
        jobs: Iterable[Job[..., object]],
        *,
        using: str | None = None,
        max_concurrency: int = 32,
        grace: float = 25.0,
    ) -> None:
        given = list(jobs)
        self.jobs = {job.name: job for job in given if job.schedule is not None}
        #: The jobs this worker runs on a "run now" request: every job it was given.
        self.manual_jobs = {job.name: job for job in given}
        self.using = using or app_settings.lock_database
        self.max_concurrency = max_concurrency
        self.grace = grace
        self.identity = worker_identity()
        self.stats = WorkerStats()
        self._stop = threading.Event()
        self._running: dict[str, Future[RunResult]] = {}
        #: Runs in progress, by pool thread: their rows are finished here if the grace ends.
        self._active: dict[int, RunResult] = {}
        #: Runs still going when the grace ended (recorded interrupted; the process must exit).
        self.abandoned: list[RunResult] = []
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor
        self._wakeup = Wakeup()
        #: Whether this worker is woken by NOTIFY for "run now" requests (else it polls).
        self.listening = False
        self._notified = True  # look for requests made while no worker ran
        self._requests_seen = 0.0

    def stop(self) -> None:
        """Ask the loop to stop starting runs (from a signal handler or another thread)."""
        self._stop.set()
        self._wakeup.poke()

    def run(self) -> None:
        """Schedule until [stop][django_advisory_cron.worker.Worker.stop]; then wait up to
        ``grace`` seconds for running jobs."""
        presence = unpooled_connection(
            self.using, application_name=f"{PRESENCE_NAME} {self.identity}"[:63]
        )
        ensure_connected(presence)
        clock = DatabaseClock(presence)
        self._pool = ThreadPoolExecutor(self.max_concurrency, thread_name_prefix=RUN_THREAD)
        signals.job_started.connect(self._track, weak=False, dispatch_uid=self.identity)
        try:
            self.listening = self._wakeup.listen(presence)
            now = clock.read()
            upcoming = {name: self._next_tick(job, now) for name, job in self.jobs.items()}
            logger.info(
                "cronworker %s: %d scheduled job(s), first tick %s",
                self.identity,
                len(upcoming),
                min(upcoming.values(), default=None),
            )
            logger.info(
                "cronworker %s: %s",
                self.identity,
                "woken by NOTIFY for run-now requests"
                if self.listening
                else f"looks for run-now requests every {REQUEST_POLL:g} s (cannot LISTEN here)",
            )
            while not self._stop.is_set():
                self._run_requested(presence)
                now = clock.now()
                due = [name for name, tick in upcoming.items() if tick <= now]
                if due:
                    now = clock.read()  # the wake's one reading, before deciding
                    for name in run_order(self.identity, due):
                        job = self.jobs[name]
                        for tick in self._ticks_due(job, upcoming[name], now):
                            self._dispatch(job, tick)
                        upcoming[name] = self._next_tick(job, now)
                if not upcoming:
                    self._sleep(CLOCK_REFRESH)
                    continue
                wait = (min(upcoming.values()) - clock.now()).total_seconds()
                self._sleep(max(0.0, min(wait, CLOCK_REFRESH)))
        finally:
            self._shut_down(self._pool)
            signals.job_started.disconnect(dispatch_uid=self.identity)
            self._wakeup.close()
            presence.close()

    def _sleep(self, seconds: float) -> None:
        """Wait until the next tick is due, until stopped, or until a "run now" request is
        announced (or, without LISTEN, until it is time to look for requests)."""
        seconds = min(seconds, self._requests_seen + self._request_interval - time.monotonic())
        if self.listening:
            if self._wakeup.sleep(max(0.0, seconds)):
                self._notified = True
            self.listening = self._wakeup.raw is not None
        else:
            self._stop.wait(max(0.0, seconds))

    @property
    def _request_interval(self) -> float:
        return CLOCK_REFRESH if self.listening else REQUEST_POLL

    def _run_requested(self, connection: BaseDatabaseWrapper) -> None:
        """Claim and start the pending "run now" requests of this worker's jobs. Only one
        worker gets each request. Listening, it looks when notified (and every
        ``CLOCK_REFRESH`` seconds in case a notification was missed); else every
        ``REQUEST_POLL`` seconds."""
        waited = time.monotonic() - self._requests_seen
        if not self._notified and waited < self._request_interval - 0.01:
            return
        self._notified, self._requests_seen = False, time.monotonic()
        text, params = sql.claim_run_requests(sorted(self.manual_jobs))
        try:
            with (
                answer_within(connection, app_settings.STATEMENT_TIMEOUT),
                connection.cursor() as cursor,
            ):
                cursor.execute(text, params)
                claimed = cursor.fetchall()
        except DatabaseError as error:  # e.g. the state table is not migrated yet
            logger.error("cronworker: could not look for run-now requests: %s", error)
            return
        for name, requested, by in claimed:
            logger.info(
                "cronworker %s: running %s now, as requested by %s at %s",
                self.identity,
                name,
                by or "someone",
                requested,
            )
            self._dispatch_manual(self.manual_jobs[name])

    def _ticks_due(self, job: Job[..., object], first: datetime, now: datetime) -> list[datetime]:
        """The ticks of ``job`` to run now: ``first`` is the earliest not yet started here.
        After a pause several ticks may have passed: the latest runs, once."""
        return [max(first, self._latest_tick(job, now))]

    @staticmethod
    def _next_tick(job: Job[..., object], now: datetime) -> datetime:
        schedule = job.schedule
        assert schedule is not None
        return schedule.next_tick(now)

    @staticmethod
    def _latest_tick(job: Job[..., object], now: datetime) -> datetime:
        schedule = job.schedule
        assert schedule is not None
        return schedule.previous_tick(now)

    def _dispatch(self, job: Job[..., object], tick: datetime) -> None:
        """Start one run of ``job`` for ``tick`` without waiting for it."""
        with self._lock:
            previous = self._running.get(job.name)
            if previous is not None and not previous.done():
                # Its last run (here) is still going: the runner would skip anyway; say why.
                logger.info("cronworker: %s's previous run still runs at tick %s", job.name, tick)
            self.stats.started += 1
            self._running[job.name] = self._pool.submit(self._run_one, job, tick)

    def _dispatch_manual(self, job: Job[..., object]) -> None:
        """Start a "run now" of ``job``: no tick; under the lock like any run, so it is
        skipped (and recorded) while another run of the job holds it."""
        with self._lock:
            self.stats.started += 1
            self.stats.manual += 1
            self._running[job.name] = self._pool.submit(self._run_one, job, None)

    def _track(self, sender: object, run: RunResult, **kwargs: object) -> None:
        """``job_started`` receiver: remember the runs of this worker's pool threads."""
        if threading.current_thread().name.startswith(RUN_THREAD):
            with self._lock:
                self._active[threading.get_ident()] = run

    def _run_one(self, job: Job[..., object], tick: datetime | None) -> RunResult:
        """One run: for ``tick``, or a manual run when ``tick`` is ``None``."""
        try:
            result = execute(job, now=tick, using=job.using or self.using, manual=tick is None)
        finally:
            with self._lock:
                self._active.pop(threading.get_ident(), None)
            connections.close_all()  # this pool thread's own connections, used by the job
        with self._lock:
            if result.ran:
                self.stats.ran += 1
            elif result.skipped:
                self.stats.skipped += 1
            if result.error is not None:
                self.stats.failed += 1
        return result

    def _shut_down(self, pool: ThreadPoolExecutor) -> None:
        """Start nothing new; give running jobs ``grace`` seconds; record those still running
        then as interrupted (their locks go with this process, which must then exit)."""
        pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + self.grace
        with self._lock:
            running = [future for future in self._running.values() if not future.done()]
        for future in running:
            try:
                future.result(timeout=max(0.0, deadline - time.monotonic()))
            except FutureTimeout:
                pass
            except Exception:  # recorded and logged by the runner
                pass
        with self._lock:
            self.abandoned = [result for result in self._active.values() if result.run_id]
        for result in self.abandoned:
            logger.warning(
                "cronworker: %s (run %s) still running after %g s of grace: recorded as "
                "interrupted",
                result.job,
                result.run_id,
                self.grace,
            )
            assert result.record is not None
            result.record.finish_lost(
                history.INTERRUPTED, f"interrupted: cronworker {self.identity} stopped"
            )
