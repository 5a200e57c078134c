"""The scheduler every replica runs (``manage.py cronworker``): no leader, no queue.

Each worker wakes at every due tick of every scheduled job and runs the job through the
runner *for that tick* (``now=tick``). Every replica does the same; the lock and the
``(job, tick)`` row let exactly one of them run it, and the others record a skip. Workers try
their due jobs in an order of their own (a hash of the worker's identity and the job's name),
so the wins spread across replicas instead of going to the fastest one.

A job with ``deliver=`` is not run here: its tick is handed to its deliverer (see
[delivery][django_advisory_cron.delivery]), which enqueues it once across the workers.

Time: ticks are judged on the database's clock, as the runner does. The worker reads it once
per wake and sleeps on the monotonic clock in between, so a suspended VM, an NTP step or a
long pause can neither skip the tick it wakes up for nor run one twice: after a pause, the
latest tick that passed runs once (the others are missed, and the history shows the gap).
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from . import delivery, history, signals, sql
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


@dataclass
class WorkerStats:
    """What this worker did, for its line at shutdown."""

    started: int = 0
    ran: int = 0
    skipped: int = 0
    failed: int = 0
    #: Ticks this worker enqueued to a task queue (``deliver=``); counted in ``started``.
    enqueued: int = 0


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
        self.jobs = {job.name: job for job in jobs if job.schedule is not None}
        self.using = using or app_settings.lock_database
        self.max_concurrency = max_concurrency
        self.grace = grace
        self.identity = worker_identity()
        self.stats = WorkerStats()
        self._stop = threading.Event()
        self._running: dict[str, Future[object]] = {}
        #: Runs in progress, by pool thread: their rows are finished here if the grace ends.
        self._active: dict[int, RunResult] = {}
        #: Runs still going when the grace ended (recorded interrupted; the process must exit).
        self.abandoned: list[RunResult] = []
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor

    def stop(self) -> None:
        """Ask the loop to stop starting runs (from a signal handler or another thread)."""
        self._stop.set()

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
            now = clock.read()
            upcoming = {name: self._next_tick(job, now) for name, job in self.jobs.items()}
            logger.info(
                "cronworker %s: %d scheduled job(s), first tick %s",
                self.identity,
                len(upcoming),
                min(upcoming.values(), default=None),
            )
            while not self._stop.is_set():
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
            presence.close()

    def _sleep(self, seconds: float) -> None:
        """Wait until the next tick is due, or until stopped."""
        self._stop.wait(seconds)

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
        """Start one run of ``job`` for ``tick`` (or its delivery) without waiting for it."""
        try:
            deliverer = delivery.deliverer_for(job)
        except delivery.DeliveryError as error:
            logger.error("cronworker: tick %s not run: %s", tick, error)
            return
        if deliverer is not None:
            with self._lock:
                self.stats.started += 1
                self._running[job.name] = self._pool.submit(self._deliver_one, deliverer, job, tick)
            return
        with self._lock:
            previous = self._running.get(job.name)
            if previous is not None and not previous.done():
                # Its last run (here) is still going: the runner would skip anyway; say why.
                logger.info("cronworker: %s's previous run still runs at tick %s", job.name, tick)
            self.stats.started += 1
            self._running[job.name] = self._pool.submit(self._run_one, job, tick)

    def _track(self, sender: object, run: RunResult, **kwargs: object) -> None:
        """``job_started`` receiver: remember the runs of this worker's pool threads."""
        if threading.current_thread().name.startswith(RUN_THREAD):
            with self._lock:
                self._active[threading.get_ident()] = run

    def _run_one(self, job: Job[..., object], tick: datetime) -> RunResult:
        try:
            result = execute(job, now=tick, using=job.using or self.using)
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

    def _deliver_one(
        self, deliverer: delivery.Deliverer, job: Job[..., object], tick: datetime
    ) -> delivery.Delivery | None:
        try:
            handed = deliverer.deliver(job, tick, using=job.using or self.using)
        except Exception as error:
            logger.error("cronworker: tick %s of %s not enqueued: %s", tick, job.name, error)
            with self._lock:
                self.stats.failed += 1
            return None
        finally:
            with self._lock:
                self._active.pop(threading.get_ident(), None)
            connections.close_all()
        with self._lock:
            if handed.enqueued:
                self.stats.enqueued += 1
            else:
                self.stats.skipped += 1
        return handed

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
