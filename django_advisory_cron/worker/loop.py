"""The scheduler every replica runs (``manage.py cronworker``): no leader, no queue.

Each worker wakes at every due tick of every scheduled job and runs the job through the
runner *for that tick* (``now=tick``). Every replica does the same; the lock and the
``(job, tick)`` row let exactly one of them run it, and the others record a skip. Jobs due
together are claimed in one statement (see [claims][django_advisory_cron.run.claims]), each first
by the live worker it is dealt to (``share_out``), so the wins spread across replicas instead
of going to the fastest one.

A job with ``deliver=`` is not run here: its tick is handed to its deliverer (see
[delivery][django_advisory_cron.run.delivery]), which enqueues it once across the workers.

Time: ticks are judged on the database's clock, as the runner does. The worker reads it once
per wake and sleeps on the monotonic clock in between, so a suspended VM, an NTP step or a
long pause can neither skip the tick it wakes up for nor run one twice.

Missed ticks: at start-up a worker looks up each job's latest recorded tick, and ticks that
passed since then (every replica was down) are missed; so are the ticks a worker slept
through. Which of them run is the job's ``catch_up`` policy, decided by
[catchup][django_advisory_cron.run.catchup] as for django-q2. A job with no recorded tick starts
with its next tick.

Isolation: a run goes to a pool thread, or (``isolation="process"``, and always for a job with
a ``timeout``) to a fresh ``python -m django runlocked JOB --tick ...`` process that a pool
thread waits for: a thread cannot be stopped, a process can. Never ``fork()``: the worker has
threads and open connections. A job whose previous run here is still going when its next
tick comes is not started again; the tick is recorded as skipped (Kubernetes'
``concurrencyPolicy: Forbid``).

A database restart or failover does not stop a worker: it logs the loss once, reconnects with
a growing pause, and carries on from the database's clock. The same scheduler runs in a
background thread of any process with [start_worker][django_advisory_cron.worker.loop.start_worker].
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import math
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from django.conf import settings
from django.db import DatabaseError, ProgrammingError, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from .. import signals
from ..conf import app_settings
from ..db import pooler, sql
from ..db.connections import (
    answer_within,
    ensure_connected,
    unpooled_connection,
    warm_while_scheduling,
)
from ..db.execute import fetch_one
from ..exceptions import DatabaseUnavailable, first_line
from ..models import RunStatus
from ..run import catchup, delivery, history
from ..run.claims import ClaimConnection, can_claim_together
from ..run.history import HOST
from ..run.jobs import Job, registry
from ..run.runner import ClaimedRun, RunResult, claim_together, execute

logger = logging.getLogger("django_advisory_cron")

#: At most this many jobs' ticks are claimed by one statement.
CLAIM_BATCH = 1000

#: Seconds a worker leaves the jobs dealt to other live workers (see ``share_out``) to them
#: before claiming them itself.
SPREAD_DELAY = 0.1

#: Seconds between readings of the live workers, for sharing the jobs due together.
PEERS_REFRESH = 10.0

#: ``application_name`` prefix of a worker's presence connection: a worker is visible in
#: ``pg_stat_activity`` exactly as long as its process lives.
PRESENCE_NAME = "django-advisory-cron worker"

RUN_THREAD = "advisory-cron-run"

#: Seconds between database clock readings while nothing is due (the clock is read at every
#: wake too). Keeps a long sleep from drifting when the host's clock is stepped.
CLOCK_REFRESH = 30.0

#: Seconds between looks for "run now" requests when the worker cannot LISTEN for them.
REQUEST_POLL = 1.0

#: Pauses between attempts to reach the database again after losing it (the last repeats).
RECONNECT_PAUSES = (0.5, 1.0, 2.0, 5.0)

#: The scheduler thread of [start_worker][django_advisory_cron.worker.loop.start_worker].
SCHEDULER_THREAD = "advisory-cron-scheduler"

Isolation = Literal["thread", "process"]
ISOLATIONS: tuple[Isolation, ...] = ("thread", "process")

#: Seconds a child process gets between SIGTERM and SIGKILL. Also how long after its
#: ``timeout`` a child is sent SIGTERM: it stops itself at its timeout (``runlocked`` arms an
#: alarm), so the worker steps in only for a process that did not.
STOP_GRACE = 5.0

#: How often a pool thread waiting for a child process looks at the clock.
WATCH_INTERVAL = 0.1

#: A run that waited longer than this for a free slot (``--max-concurrency``) is logged.
SLOT_WAIT_LOGGED = 1.0

#: Statuses counted as failed in the worker's line at shutdown.
FAILING = (RunStatus.FAILED, RunStatus.LOCK_LOST, RunStatus.TIMED_OUT, RunStatus.INTERRUPTED)


def reconnect_pause(attempt: int) -> float:
    """Seconds to pause before reconnecting attempt ``attempt`` (from 0) in a row."""
    return RECONNECT_PAUSES[min(attempt, len(RECONNECT_PAUSES) - 1)]


def answers(connection: BaseDatabaseWrapper) -> bool:
    """Whether ``connection`` is open and answers a statement."""
    try:
        return connection.connection is not None and connection.is_usable()
    except Exception:
        return False


def worker_identity() -> str:
    return f"{HOST}:{os.getpid()}"


@functools.lru_cache(maxsize=65536)
def _rank(identity: str, name: str) -> bytes:
    """A job's place for one worker (cached: a worker asks at every tick)."""
    return hashlib.sha256(f"{identity}\0{name}".encode()).digest()


def run_order(identity: str, names: Iterable[str]) -> list[str]:
    """The order this worker tries its due jobs in: its own, stable, spread across workers."""
    return sorted(names, key=lambda name: _rank(identity, name))


def share_out(jobs: Iterable[str], workers: Iterable[str], tick: datetime) -> dict[str, str]:
    """Which live worker (by presence name) claims each of ``jobs``, due together at
    ``tick``, first. The jobs, in the order of a hash of their names, are dealt to the
    workers (in name order) in turn, starting at a worker chosen by the tick: every worker
    with the same jobs due computes the same shares, the shares differ by at most one job,
    and with few jobs due the first deal moves round from tick to tick."""
    dealers = sorted(workers)
    start = int.from_bytes(_rank("", tick.isoformat())[:4], "big")
    ordered = sorted(jobs, key=lambda job: _rank("", job))
    return {job: dealers[(start + index) % len(dealers)] for index, job in enumerate(ordered)}


def child_command(job: str, tick: datetime | None, using: str) -> list[str]:
    """The command line of a run in a process of its own: ``runlocked`` for that tick (or a
    manual run, without one), through
    ``python -m django`` (with the worker's settings module and import path in its
    environment: see [child_environment][django_advisory_cron.worker.loop.child_environment])."""
    options = [f"-W{option}" for option in sys.warnoptions]
    return [
        sys.executable,
        *options,
        "-m",
        "django",
        "runlocked",
        # Options first: what follows the job's name is passed to the job.
        *(["--tick", tick.isoformat()] if tick is not None else ["--manual"]),
        "--database",
        using,
        "--verbosity",
        "0",
        job,
    ]


def child_environment() -> dict[str, str]:
    """This process's environment, with its settings module and its import path (``sys.path``,
    which ``manage.py`` or ``--pythonpath`` may have extended), for a child process."""
    module = settings.SETTINGS_MODULE
    if not module:
        raise ValueError(
            "running a job in a process of its own needs a settings module "
            "(DJANGO_SETTINGS_MODULE); settings.configure() cannot be passed on to a child"
        )
    path = os.pathsep.join(entry for entry in sys.path if entry)
    return {**os.environ, "DJANGO_SETTINGS_MODULE": module, "PYTHONPATH": path}


class DatabaseClock:
    """The database server's clock, read once per wake and advanced by the monotonic clock."""

    def __init__(self, connection: BaseDatabaseWrapper) -> None:
        self.connection = connection
        self._base: datetime | None = None
        self._at = 0.0

    def read(self) -> datetime:
        row = fetch_one(self.connection, sql.database_now())
        assert row is not None
        self._base, self._at = row[0], time.monotonic()
        return self._base

    def now(self) -> datetime:
        if self._base is None or time.monotonic() - self._at > CLOCK_REFRESH:
            return self.read()
        return self._base + timedelta(seconds=time.monotonic() - self._at)


class Wakeup:
    """Ends a worker's sleep early: on a notification on its (direct) connection, or when
    [poke][django_advisory_cron.worker.loop.Wakeup.poke] is called (``stop()``, even from a signal
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
    #: Ticks this worker enqueued to a task queue (``deliver=``); counted in ``started``.
    enqueued: int = 0
    #: Ticks not started because the job's previous run here was still going.
    overlapped: int = 0
    #: Statements that claimed several jobs' ticks at once (see ``claims``).
    batches: int = 0


class Worker:
    """One replica's scheduler: see the module docstring."""

    def __init__(
        self,
        jobs: Iterable[Job[..., object]],
        *,
        using: str | None = None,
        max_concurrency: int = 32,
        grace: float = 25.0,
        isolation: Isolation = "thread",
        persistent: bool = False,
    ) -> None:
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation must be 'thread' or 'process', not {isolation!r}")
        given = list(jobs)
        self.jobs = {job.name: job for job in given if job.schedule is not None}
        #: The jobs this worker runs on a "run now" request: every job it was given.
        self.manual_jobs = {job.name: job for job in given}
        self.using = using or app_settings.lock_database
        #: Runs at once, in threads and child processes together.
        self.max_concurrency = max_concurrency
        self.grace = grace
        self.isolation = isolation
        #: Keep trying to reach the database at start instead of raising (a background worker
        #: must not die with its host process's first database hiccup).
        self.persistent = persistent
        self.thread: threading.Thread | None = None
        self.identity = worker_identity()
        self._uid = f"{self.identity}:{id(self)}"  # several workers may share one process
        self.stats = WorkerStats()
        self._stop = threading.Event()
        #: Every run this worker started and that may still be going, per job, whatever
        #: started it (a tick, a catch-up, a "run now", a delivery), with what it is for (named
        #: when a tick overlaps it). Shutdown waits for all of them; done ones are dropped as
        #: they are looked at.
        self._runs: dict[str, dict[Future[Any], str]] = {}
        #: Runs in progress, by pool thread: their rows are finished here if the grace ends.
        self._active: dict[int, RunResult] = {}
        #: Set in this worker's pool threads while they run a job of its (see ``_track``).
        self._mine = threading.local()
        #: Jobs whose schedule failed to give a tick: logged once, not scheduled any more.
        self._unschedulable: set[str] = set()
        #: Connections lost in a row, without a whole pass of the loop in between: how long
        #: to pause before reconnecting (``RECONNECT_PAUSES``).
        self._losses = 0
        #: Runs still going when the grace ended (recorded interrupted; the process must exit).
        self.abandoned: list[RunResult] = []
        #: Child processes stopped when the grace ended (they, or this worker, recorded them).
        self.stopped_children = 0
        #: When shutting down: child processes get SIGTERM at the first, SIGKILL at the second.
        self._terminate_at = math.inf
        self._kill_at = math.inf
        self._child_env: dict[str, str] | None = None
        #: Jobs whose first tick to wake for was missed before this worker started, and the
        #: database time it started at.
        self._missed_at_start: dict[str, datetime] = {}
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor
        #: The worker's own connection (its presence), for the clock, the run history and
        #: "run now" requests.
        self._presence: BaseDatabaseWrapper
        self._wakeup = Wakeup()
        #: Per database alias: the connection that claims several ticks at once.
        self._claims: dict[str, ClaimConnection] = {}
        #: The live workers' presence names, and when they were read (``time.monotonic()``).
        self._peer_names: tuple[str, ...] = ()
        self._peers_read = -math.inf
        #: Whether this worker is woken by NOTIFY for "run now" requests (else it polls).
        self.listening = False
        self._notified = True  # look for requests made while no worker ran
        self._requests_seen = 0.0

    @property
    def _running(self) -> dict[str, Future[Any]]:
        """The latest run started per job (for a test that waits for a pass of the loop)."""
        with self._lock:
            return {name: list(runs)[-1] for name, runs in self._runs.items() if runs}

    @property
    def presence_name(self) -> str:
        """The ``application_name`` of this worker's presence connection."""
        return f"{PRESENCE_NAME} {self.identity}"[:63]

    def in_process(self, job: Job[..., object]) -> bool:
        """Whether ``job`` runs in a child process: asked for, or needed to enforce its
        ``timeout`` (a thread cannot be stopped)."""
        return self.isolation == "process" or job.timeout is not None

    def check_processes(self) -> None:
        """Raise ``ValueError`` if some job must run in a child process and this process's
        settings cannot be passed on to one (``run()`` checks; call it to check earlier)."""
        if any(self.in_process(job) for job in self.jobs.values()):
            self._child_env = child_environment()

    def stop(self) -> None:
        """Ask the loop to stop starting runs (from a signal handler or another thread)."""
        self._stop.set()
        self._wakeup.poke()

    def close(self, timeout: float | None = None) -> None:
        """Stop a worker started by [start_worker][django_advisory_cron.worker.loop.start_worker]
        and wait for its thread: up to ``grace`` seconds for running jobs; those still running
        then go on in this process, holding their locks, and record their own end."""
        self.stop()
        if self.thread is not None:
            self.thread.join(timeout)

    def run(self) -> None:
        """Schedule until [stop][django_advisory_cron.worker.loop.Worker.stop]; then wait up to
        ``grace`` seconds for running jobs.

        Raises [DatabaseUnavailable][django_advisory_cron.exceptions.DatabaseUnavailable] when
        the database cannot be reached at start (unless ``persistent``); a connection lost
        later is reconnected. Lock connections stay warm meanwhile (``LOCK_POOL_SIZE``).
        """
        self.check_processes()
        with warm_while_scheduling():
            self._schedule()

    def run_logged(self) -> None:
        """``run()``, logging in one line why it stopped if it could not go on (a background
        worker has no command to exit with a code)."""
        try:
            self.run()
        except ProgrammingError as error:
            logger.error(
                "cronworker %s: stopped: the database refused its statements (%s); is the "
                "app's table missing? run manage.py migrate, then restart this process",
                self.identity,
                first_line(error),
            )

    def _schedule(self) -> None:
        self._pool = ThreadPoolExecutor(self.max_concurrency, thread_name_prefix=RUN_THREAD)
        signals.job_started.connect(self._track, weak=False, dispatch_uid=self._uid)
        presence: BaseDatabaseWrapper | None = None
        try:
            presence = self._attend() if not self.persistent else self._reattend(None)
            upcoming: dict[str, datetime] | None = None
            clock: DatabaseClock | None = None
            while presence is not None and not self._stop.is_set():
                try:
                    if clock is None or clock.connection is not presence:
                        # A (re)connected presence: listen again; the first pass plans.
                        self._presence = presence
                        clock = DatabaseClock(presence)
                        if upcoming is None:
                            # First, so a database without the app's tables is the first
                            # thing this worker says.
                            upcoming = self._first_ticks(clock.read())
                            logger.info(
                                "cronworker %s: %d scheduled job(s), first tick %s",
                                self.identity,
                                len(upcoming),
                                min(upcoming.values(), default=None),
                            )
                        self._listen(presence)
                    assert upcoming is not None
                    wait = self._wake(clock, upcoming)
                    self._losses = 0  # a whole pass: the connection works again
                    self._sleep(wait)
                except (DatabaseError, DatabaseUnavailable) as error:
                    if isinstance(error, ProgrammingError) and answers(presence):
                        # The database answered, and refused the statement (a missing table:
                        # migrate has not run): reconnecting cannot fix that.
                        raise
                    presence.close()
                    presence = self._reattend(error)
        finally:
            self._shut_down(self._pool)
            for claims in self._claims.values():
                claims.close()
            signals.job_started.disconnect(dispatch_uid=self._uid)
            self._wakeup.close()
            if presence is not None:
                presence.close()
            # This thread's own Django connections (a pooler probe may have opened one): a
            # scheduler in a background thread must not leave them behind when it stops.
            connections.close_all()

    def _wake(self, clock: DatabaseClock, upcoming: dict[str, datetime]) -> float:
        """Start the runs that are due (and those asked for); return the seconds until the
        next tick."""
        self._run_requested(self._presence)
        now = clock.now()
        due = [name for name, tick in upcoming.items() if tick <= now]
        if due:
            now = clock.read()  # the wake's one reading, before deciding
            together: list[tuple[Job[..., object], datetime]] = []
            for name in run_order(self.identity, due):
                job = self.jobs[name]
                try:
                    ticks = self._ticks_due(job, upcoming[name], now)
                    following = self._next_tick(job, now)
                except (DatabaseError, DatabaseUnavailable):
                    raise
                except Exception as error:  # the schedule's own failure: this job alone
                    self._unschedule(job, error)
                    del upcoming[name]
                    continue
                if len(ticks) == 1 and self._claimable(job):
                    together.append((job, ticks[0]))
                elif ticks:
                    self._dispatch(job, ticks)
                upcoming[name] = following
            if together:
                self._dispatch_together(together)
        if not upcoming:
            return CLOCK_REFRESH
        wait = (min(upcoming.values()) - clock.now()).total_seconds()
        return max(0.0, min(wait, CLOCK_REFRESH))

    def _attend(self) -> BaseDatabaseWrapper:
        """Open the presence connection: it names this worker, and it reads the clock."""
        presence = unpooled_connection(self.using, application_name=self.presence_name)
        try:
            ensure_connected(presence)
        except BaseException:
            presence.close()
            raise
        return presence

    def _reattend(self, error: BaseException | None) -> BaseDatabaseWrapper | None:
        """Reach the database again after ``error`` (or at a persistent start), pausing longer
        each time; ``None`` when stopped meanwhile."""
        if error is not None:
            # Pause before the first attempt too, longer after each loss in a row: a database
            # that accepts connections and then fails every pass must not be spun on.
            pause = reconnect_pause(self._losses)
            self._losses += 1
            logger.warning(
                "cronworker %s: lost the database (%s); reconnecting in %g s",
                self.identity,
                first_line(error),
                pause,
            )
            if self._stop.wait(pause):
                return None
        attempt = self._losses
        while not self._stop.is_set():
            try:
                presence = self._attend()
            except (DatabaseError, DatabaseUnavailable) as failure:
                if attempt == 0 and error is None:
                    logger.warning(
                        "cronworker %s: cannot reach the database yet (%s); retrying",
                        self.identity,
                        first_line(failure),
                    )
                self._stop.wait(reconnect_pause(attempt))
                attempt += 1
                continue
            if error is not None or attempt:
                logger.warning("cronworker %s: database reachable again", self.identity)
            return presence
        return None

    def _listen(self, presence: BaseDatabaseWrapper) -> None:
        """LISTEN for "run now" requests on the presence connection, where it can."""
        self.listening = self._wakeup.listen(presence)
        self._notified = True  # requests made while this worker was not listening
        logger.info(
            "cronworker %s: %s",
            self.identity,
            "woken by NOTIFY for run-now requests"
            if self.listening
            else f"looks for run-now requests every {REQUEST_POLL:g} s (cannot LISTEN here)",
        )

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
        except DatabaseError as error:
            if connection.connection is None or not connection.is_usable():
                raise  # the connection is gone: the loop reconnects
            if isinstance(error, ProgrammingError):
                raise  # a missing table: the worker cannot work here (see the loop)
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

    def _first_ticks(self, now: datetime) -> dict[str, datetime]:
        """The first tick to wake for, per job: the first one missed since the job's latest
        recorded tick (then due at once), else the next one."""
        recorded = catchup.recorded_ticks(self._presence, list(self.jobs))
        first = {}
        for name, job in self.jobs.items():
            try:
                missed = catchup.first_missed(job, recorded.get(name), now)
                first[name] = missed or self._next_tick(job, now)
            except (DatabaseError, DatabaseUnavailable):
                raise
            except Exception as error:  # the schedule's own failure: this job alone
                self._unschedule(job, error)
                continue
            if missed is not None:
                self._missed_at_start[name] = now
        return first

    def _unschedule(self, job: Job[..., object], error: Exception) -> None:
        """Stop scheduling ``job``, whose schedule failed to give its ticks; log it once."""
        if job.name in self._unschedulable:
            return
        self._unschedulable.add(job.name)
        schedule = getattr(job.schedule, "expression", None) or job.schedule_text
        logger.error(
            "cronworker %s: job %r is not scheduled: its schedule %r gives no tick (%s); fix "
            "the schedule (manage.py check lists schedule problems) and restart cronworker; "
            "its other jobs run as usual",
            self.identity,
            job.name,
            schedule,
            first_line(error),
        )

    def _ticks_due(self, job: Job[..., object], first: datetime, now: datetime) -> list[datetime]:
        """The ticks of ``job`` to run now, oldest first: ``first`` is the earliest not yet
        started here. When ticks were missed (before this worker started, or slept through),
        the job's catch-up policy decides from the run history."""
        started = self._missed_at_start.pop(job.name, None)
        since: list[datetime] = []
        if started is not None:
            # Missed before this worker started; any tick since then is on time.
            plan = catchup.plan(job, first, started, on_time=False)
            tick = self._next_tick(job, started)
            while tick <= now:
                since.append(tick)
                tick = self._next_tick(job, tick)
        else:
            if self._latest_tick(job, now) > first:
                # Slept through ticks: other replicas may have run some of them meanwhile.
                recorded = catchup.recorded_ticks(self._presence, [job.name]).get(job.name)
                if recorded is not None and recorded >= first:
                    first = self._next_tick(job, recorded)
                    if first > now:
                        return []
            plan = catchup.plan(job, first, now)
        if plan.noteworthy:
            logger.warning("cronworker %s: %s", self.identity, plan.describe())
        return plan.run + since

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

    def _dispatch(self, job: Job[..., object], ticks: list[datetime]) -> None:
        """Start the runs of ``job`` for ``ticks`` (oldest first, one after another: a
        catch-up) without waiting for them; if the job's previous run here is still going,
        record the ticks as skipped instead (no thread, no process). A job with ``deliver=`` is
        handed to its deliverer instead, tick by tick."""
        try:
            deliverer = delivery.deliverer_for(job)
        except delivery.DeliveryError as error:
            logger.error("cronworker: %s: ticks %s not run: %s", job.name, ticks, error)
            return
        if deliverer is not None:
            with self._lock:
                for tick in ticks:
                    try:
                        handing = self._pool.submit(self._deliver_one, deliverer, job, tick)
                    except RuntimeError:  # the interpreter is exiting: start nothing more
                        self._stop.set()
                        return
                    self.stats.started += 1
                    self._add_running(job.name, handing, f"tick {tick.isoformat()}, enqueued")
            return
        with self._lock:
            previous = self._going(job.name)
            if not previous:
                try:
                    future = self._pool.submit(self._run_ticks, job, ticks, time.monotonic())
                except RuntimeError:  # the interpreter is exiting: start nothing more
                    self._stop.set()
                    return
                self.stats.started += len(ticks)
                self._add_running(job.name, future, f"tick {ticks[-1].isoformat()}")
                return
            waiting = not any(future.running() for future in previous)
            what = " and ".join(sorted(previous.values()))
        for tick in ticks:
            self._skip_overlapping(job, tick, waiting, what)

    def _claimable(self, job: Job[..., object]) -> bool:
        """Whether ``job``'s tick can be claimed in a batch with others': it runs in a thread
        here, takes a session lock (two-int key, no waiting) and its previous run here is
        over. Others are claimed one by one."""
        if self.in_process(job) or job.deliver is not None or job.wait:
            return False
        if not can_claim_together(job.key):
            return False
        using = job.using or self.using
        if pooler.resolve_scope(job.scope, using) != "session":
            return False
        with self._lock:
            return not self._going(job.name)

    def _dispatch_together(self, due: list[tuple[Job[..., object], datetime]]) -> None:
        """Claim the ticks of ``due`` in as few statements as possible, then start the
        winners. The jobs dealt to this worker (``share_out``, among the live workers) are
        claimed at once, the others ``SPREAD_DELAY`` seconds later, so the runs are shared
        between the replicas instead of all going to the fastest one, and a job whose worker
        is busy, gone or does not run it still runs.

        One statement per database (per ``CLAIM_BATCH`` jobs; a database with one job due
        claims it alone). Winners beyond ``--max-concurrency`` wait for a free slot holding
        their locks, so the other replicas skip them at once instead of each trying later."""
        peers = self._peers()
        first, later = due, []
        if peers is not None:
            shares = share_out([job.name for job, _tick in due], peers, min(t for _j, t in due))
            first = [(job, tick) for job, tick in due if shares[job.name] == self.presence_name]
            later = [(job, tick) for job, tick in due if shares[job.name] != self.presence_name]
        self._claim_all(first)
        if later and not self._stop.wait(SPREAD_DELAY):
            self._claim_all(later)

    def _claim_all(self, due: list[tuple[Job[..., object], datetime]]) -> None:
        by_alias: dict[str, list[tuple[Job[..., object], datetime]]] = {}
        for job, tick in due:
            by_alias.setdefault(job.using or self.using, []).append((job, tick))
        for alias, jobs in by_alias.items():
            for start in range(0, len(jobs), CLAIM_BATCH):
                self._claim_together(alias, jobs[start : start + CLAIM_BATCH])

    def _peers(self) -> tuple[str, ...] | None:
        """The presence names of the live workers (read every ``PEERS_REFRESH`` seconds, and
        at every tick while this worker saw itself alone, so the workers of a fleet that
        starts together learn of each other at once), or ``None`` when this worker is alone or
        cannot tell (then it claims everything at once)."""
        alone = len(self._peer_names) < 2
        if alone or time.monotonic() - self._peers_read >= PEERS_REFRESH:
            text, params = sql.live_workers(PRESENCE_NAME)
            try:
                with (
                    answer_within(self._presence, app_settings.STATEMENT_TIMEOUT),
                    self._presence.cursor() as cursor,
                ):
                    cursor.execute(text, params)
                    names = tuple(sorted(str(row[0]) for row in cursor.fetchall()))
            except (DatabaseError, DatabaseUnavailable) as error:
                if self._presence.connection is None or not self._presence.is_usable():
                    raise  # the connection is gone: the loop reconnects
                logger.error("cronworker: could not read the live workers: %s", error)
                names = ()
            self._peers_read, self._peer_names = time.monotonic(), names
        names = self._peer_names
        return names if len(names) > 1 and self.presence_name in names else None

    def _claim_together(self, alias: str, batch: list[tuple[Job[..., object], datetime]]) -> None:
        if len(batch) == 1:
            job, tick = batch[0]
            self._dispatch(job, [tick])
            return
        claims = self._claims.get(alias)
        if claims is None:
            claims = self._claims[alias] = ClaimConnection(alias)
        try:
            runs, skipped = claim_together(batch, claims)
        except (DatabaseError, DatabaseUnavailable) as error:
            logger.error(
                "cronworker: could not claim %d jobs together (%s); claiming each alone",
                len(batch),
                first_line(error),
            )
            for job, tick in batch:
                self._dispatch(job, [tick])
            return
        with self._lock:
            self.stats.batches += 1
            self.stats.skipped += len(skipped)
        for claimed in runs:
            self._start_claimed(claimed)

    def _start_claimed(self, claimed: ClaimedRun) -> None:
        """Start a run claimed in a batch; if it cannot start (the worker is stopping), record
        it interrupted and release its lock."""
        name, tick = claimed.job.name, claimed.result.tick
        assert tick is not None
        why = f"cronworker {self.identity} stopped before the run started"

        def abandon_if_cancelled(future: Future[Any]) -> None:
            if future.cancelled():  # the worker stopped before a thread took it
                claimed.abandon(why)

        job = self.jobs[name]
        with self._lock:
            try:
                future = self._pool.submit(self._run_one, job, tick, time.monotonic(), claimed)
            except RuntimeError:  # the interpreter is exiting: start nothing more
                self._stop.set()
            else:
                self.stats.started += 1
                self._add_running(name, future, f"tick {tick.isoformat()}")
                future.add_done_callback(abandon_if_cancelled)
                return
        claimed.abandon(why)

    def _run_ticks(
        self, job: Job[..., object], ticks: list[datetime], submitted: float
    ) -> RunResult | None:
        """Run ``job`` for each of ``ticks`` in turn (stopping early if the worker stops)."""
        result = None
        for number, tick in enumerate(ticks):
            if number and self._stop.is_set():
                break
            result = self._run_one(job, tick, submitted)
        return result

    def _dispatch_manual(self, job: Job[..., object]) -> None:
        """Start a "run now" of ``job``: no tick; under the lock like any run, so it is
        skipped (and recorded) while another run of the job holds it."""
        with self._lock:
            try:
                future = self._pool.submit(self._run_one, job, None, time.monotonic())
            except RuntimeError:  # the interpreter is exiting: start nothing more
                self._stop.set()
                return
            self.stats.started += 1
            self.stats.manual += 1
            self._add_running(job.name, future, "a run-now request")

    def _add_running(self, name: str, future: Future[Any], what: str) -> None:
        """Remember a run this worker started (hold ``self._lock``)."""
        self._runs.setdefault(name, {})[future] = what

    def _going(self, name: str) -> dict[Future[Any], str]:
        """The runs of ``name`` this worker started that are not over (hold ``self._lock``)."""
        runs = self._runs.get(name, {})
        for future in [future for future in runs if future.done()]:
            del runs[future]
        return dict(runs)

    def _skip_overlapping(
        self, job: Job[..., object], tick: datetime, waiting: bool, what: str
    ) -> None:
        """Record ``tick`` as skipped because the job's previous run (for ``what``) is still
        going."""
        previous = f"its previous run ({what})"
        otherwise = (
            f"{previous} is still waiting for a free slot (--max-concurrency "
            f"{self.max_concurrency})"
            if waiting
            else f"{previous} is still going"
        )
        text, params = sql.skip_overlapping(
            job=job.name, host=HOST, pid=os.getpid(), tick=tick, otherwise=otherwise
        )
        try:
            with (
                answer_within(self._presence, app_settings.STATEMENT_TIMEOUT),
                self._presence.cursor() as cursor,
            ):
                cursor.execute(text, params)
                row = cursor.fetchone()
        except (DatabaseError, DatabaseUnavailable) as error:
            logger.error(
                "cronworker: %s: could not record tick %s as skipped: %s", job.name, tick, error
            )
            return
        with self._lock:
            self.stats.overlapped += 1
        logger.warning(
            "cronworker: %s skipped tick %s: %s", job.name, tick, row[0] if row else otherwise
        )

    def _track(self, sender: object, run: RunResult, **kwargs: object) -> None:
        """``job_started`` receiver: remember the runs of this worker's pool threads (not
        those of another worker in the same process)."""
        if getattr(self._mine, "running", False):
            with self._lock:
                self._active[threading.get_ident()] = run

    @contextlib.contextmanager
    def _tracking(self) -> Iterator[None]:
        """Around a job run in this thread: ``_track`` remembers it while it runs."""
        self._mine.running = True
        try:
            yield
        finally:
            self._mine.running = False
            with self._lock:
                self._active.pop(threading.get_ident(), None)

    def _run_one(
        self,
        job: Job[..., object],
        tick: datetime | None,
        submitted: float,
        claimed: ClaimedRun | None = None,
    ) -> RunResult | None:
        """One run: for ``tick``, or a manual run ("run now") when ``tick`` is ``None``; or
        the run ``claimed`` in a batch."""
        waited = time.monotonic() - submitted
        if waited > SLOT_WAIT_LOGGED:
            logger.warning(
                "cronworker: %s (tick %s) waited %.1f s for a free slot (--max-concurrency %d)",
                job.name,
                tick,
                waited,
                self.max_concurrency,
            )
        using = job.using or self.using
        try:
            if self.in_process(job):
                result = self._run_in_process(job, tick, using)
            else:
                try:
                    with self._tracking():
                        if claimed is not None:
                            result = claimed.run()
                        else:
                            result = execute(job, now=tick, using=using, manual=tick is None)
                finally:
                    connections.close_all()  # this pool thread's own connections
        except Exception as error:  # nothing could be recorded (the database is away)
            logger.error(
                "cronworker: job %s, tick %s, did not run: %s", job.name, tick, first_line(error)
            )
            with self._lock:
                self.stats.failed += 1
            return None
        with self._lock:
            if result.ran and result.run_id is not None:
                self.stats.ran += 1
            elif result.skipped:
                self.stats.skipped += 1
            if result.status in FAILING:
                self.stats.failed += 1
        return result

    def _deliver_one(
        self, deliverer: delivery.Deliverer, job: Job[..., object], tick: datetime
    ) -> delivery.Delivery | None:
        try:
            # A queue that runs its tasks at once runs the job in this thread.
            with self._tracking():
                handed = deliverer.deliver(job, tick, using=job.using or self.using)
        except Exception as error:
            logger.error("cronworker: tick %s of %s not enqueued: %s", tick, job.name, error)
            with self._lock:
                self.stats.failed += 1
            return None
        finally:
            connections.close_all()
        with self._lock:
            if handed.enqueued:
                self.stats.enqueued += 1
            else:
                self.stats.skipped += 1
        return handed

    def _run_in_process(
        self, job: Job[..., object], tick: datetime | None, using: str
    ) -> RunResult:
        """Run ``job`` for ``tick`` in a child process and wait for it; return what its row
        says. The child records its own run; this worker records it only if it had to kill
        the child (or something else did)."""
        child = subprocess.Popen(
            child_command(job.name, tick, using),
            env=self._child_env,
            stdin=subprocess.DEVNULL,
            # Its own session: a terminal's Ctrl-C reaches the worker alone, which decides
            # when its children stop; SIGKILL can then take the child's own children too.
            start_new_session=True,
        )
        stopped = self._watch(job, tick, child)
        if stopped is None and child.returncode < 0:
            name = signal.Signals(-child.returncode).name
            stopped = (history.INTERRUPTED, f"interrupted: its process was killed by {name}")
        if stopped is not None:
            status, text = stopped
            history.finish_child(
                using, job=job.name, tick=tick, pid=child.pid, status=status, text=text
            )
        found = history.child_run(using, job=job.name, tick=tick, pid=child.pid)
        if found is None:
            logger.error(
                "cronworker: %s (tick %s): its process exited with code %s without recording a "
                "run; its own output above says why",
                job.name,
                tick,
                child.returncode,
            )
            return RunResult(job.name, RunStatus.FAILED, tick=tick)
        run_id, status = found
        return RunResult(job.name, RunStatus(status), run_id=run_id, tick=tick)

    def _watch(
        self, job: Job[..., object], tick: datetime | None, child: subprocess.Popen[bytes]
    ) -> tuple[str, str] | None:
        """Wait for ``child``. If it is still running ``STOP_GRACE`` s after its timeout, or
        when this worker's grace is ending, send it SIGTERM (it records its end and releases
        its lock), then SIGKILL if it has not exited. Returns the status and text to record
        when it had to be killed, else ``None``."""
        over = time.monotonic() + job.timeout + STOP_GRACE if job.timeout else math.inf
        stopping: tuple[str, str] | None = None
        kill_at = math.inf
        while True:
            try:
                child.wait(WATCH_INTERVAL)
                return None
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if stopping is None and (now >= over or now >= self._terminate_at):
                if now >= over:
                    assert job.timeout is not None
                    stopping = (
                        history.TIMED_OUT,
                        f"stopped after its timeout of {job.timeout:g} s: its process did not "
                        f"stop by itself and was killed by cronworker {self.identity}",
                    )
                    kill_at = now + STOP_GRACE
                else:
                    stopping = (
                        history.INTERRUPTED,
                        f"interrupted: cronworker {self.identity} stopped, and its process was "
                        "killed at the end of the grace",
                    )
                    kill_at = self._kill_at
                    with self._lock:
                        self.stopped_children += 1
                logger.warning(
                    "cronworker: %s (tick %s): sending SIGTERM to its process %d (%s)",
                    job.name,
                    tick,
                    child.pid,
                    "over its timeout" if stopping[0] == history.TIMED_OUT else "shutting down",
                )
                child.send_signal(signal.SIGTERM)
            elif now >= kill_at:
                logger.error(
                    "cronworker: %s (tick %s): its process %d did not stop after SIGTERM; "
                    "killing it",
                    job.name,
                    tick,
                    child.pid,
                )
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)  # its own children too
                child.wait()
                return stopping

    def _shut_down(self, pool: ThreadPoolExecutor) -> None:
        """Start nothing new; give running jobs ``grace`` seconds; record those still running
        then as interrupted (their locks go with this process, which must then exit), unless
        this worker runs in a thread of a process that goes on (``start_worker``).

        Child processes get SIGTERM before the grace ends (``STOP_GRACE`` s before, at most
        half of it), so they record their end and release their locks themselves; those still
        alive when it ends are killed and recorded here."""
        pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + self.grace
        self._kill_at = deadline
        self._terminate_at = deadline - min(STOP_GRACE, self.grace / 2)
        with self._lock:
            running = [(name, future) for name in self._runs for future in self._going(name)]
        for name, future in running:
            # A child killed at the deadline is recorded by its pool thread: wait for that.
            until = deadline + (STOP_GRACE if self.in_process(self.manual_jobs[name]) else 0.0)
            try:
                future.result(timeout=max(0.0, until - time.monotonic()))
            except FutureTimeout:
                pass
            except Exception:  # recorded and logged by the runner
                pass
        with self._lock:
            self.abandoned = [result for result in self._active.values() if result.run_id]
        if self.thread is not None:
            # Started by start_worker: the process lives on, and so do these bodies, their
            # locks and their heartbeats; each records its own end. Marking them interrupted
            # would give their ticks to another replica while they still run.
            for result in self.abandoned:
                logger.warning(
                    "cronworker: %s (run %s) still running after %g s of grace: left to "
                    "finish in this process, holding its lock",
                    result.job,
                    result.run_id,
                    self.grace,
                )
            return
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


def start_worker(
    names: Iterable[str] | None = None,
    *,
    using: str | None = None,
    max_concurrency: int = 32,
    grace: float = 25.0,
    isolation: Isolation = "thread",
) -> Worker:
    """Run the scheduler in a background thread of this process and return its worker.

    For processes that already run (an ASGI lifespan, gunicorn's ``post_fork``): safe to call
    in every process of every replica, since the database lets one of them run each tick.
    ``names`` limits it to those scheduled jobs (default: all). The worker keeps trying while
    the database is unreachable. Call ``close()`` when the process shuts down, so running jobs
    get ``grace`` seconds and are recorded interrupted after that. ``isolation="process"``
    runs each job in a child process, as ``cronworker --isolation process`` does.
    """
    jobs = [registry.get(name) for name in names] if names is not None else registry.all()
    worker = Worker(
        jobs,
        using=using,
        max_concurrency=max_concurrency,
        grace=grace,
        isolation=isolation,
        persistent=True,
    )
    worker.thread = threading.Thread(target=worker.run_logged, name=SCHEDULER_THREAD, daemon=True)
    worker.thread.start()
    return worker
