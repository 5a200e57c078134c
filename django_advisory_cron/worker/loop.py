"""The scheduler every replica runs (``manage.py cronworker``): no leader, no queue.

Each worker wakes at every due tick of every scheduled job and runs the job through the
runner *for that tick* (``now=tick``). Every replica does the same; the lock and the
``(job, tick)`` row let exactly one of them run it, and the others record a skip.

The loop ties the worker's parts together, each in a module of its own:

- [clock][django_advisory_cron.worker.clock]: the database's clock, and the sleep between
  wakes;
- [reconnect][django_advisory_cron.worker.reconnect]: the worker's one connection, which also
  claims its runs and holds their locks, reconnected after a loss;
- [timetable][django_advisory_cron.worker.timetable]: which ticks are due, and which missed
  ones run (catch-up);
- [batches][django_advisory_cron.worker.batches]: jobs due together, claimed in one statement
  and shared with the [fleet][django_advisory_cron.worker.fleet] of live workers;
- [dispatch][django_advisory_cron.worker.dispatch]: the runs in pool threads, or in
  [children][django_advisory_cron.worker.children] processes, tracked until they end;
- [requests][django_advisory_cron.worker.requests]: "run now" requests.

The same scheduler runs in a background thread of any process with
[start_worker][django_advisory_cron.worker.loop.start_worker].
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from concurrent.futures import Future
from datetime import datetime
from typing import Any

from django.db import DatabaseError, ProgrammingError, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from ..conf import app_settings
from ..db.connections import warm_while_scheduling
from ..exceptions import DatabaseUnavailable, first_line
from ..jobs import fanout
from ..jobs.job import Job, registry
from ..lock.shared import ClaimConnection
from ..run import history
from ..run.runner import RunResult
from .batches import Batches
from .children import ISOLATIONS, Isolation, child_environment
from .clock import CLOCK_REFRESH, DatabaseClock, Wakeup
from .dispatch import Dispatcher
from .fleet import PRESENCE_NAME, presence_name, worker_identity
from .following import SCHEDULE_POLL, Following
from .narration import RUNS, Narrator
from .reconnect import Attendance
from .requests import REQUEST_POLL, RunRequests
from .spread import HeldBack
from .timetable import Timetable

logger = logging.getLogger("django_advisory_cron")

#: The scheduler thread of [start_worker][django_advisory_cron.worker.loop.start_worker].
SCHEDULER_THREAD = "advisory-cron-scheduler"

#: The start banner lists at most this many jobs (the soonest first).
BANNER_JOBS = 20


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
        everything: bool = False,
        narrator: Narrator | None = None,
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
        #: What it says on stdout (``cronworker``; nothing in a background thread).
        self.narrator = narrator or Narrator()
        self.identity = worker_identity()
        self._stop = threading.Event()
        #: The worker's one connection (its presence): the clock, the live workers, "run now"
        #: requests, and the claims and locks of its runs.
        self._presence = ClaimConnection(
            self.using, presence=presence_name(self.identity), census=PRESENCE_NAME
        )
        self._dispatcher = Dispatcher(
            self.manual_jobs,
            using=self.using,
            claims=self._presence,
            identity=self.identity,
            max_concurrency=max_concurrency,
            isolation=isolation,
            stop=self._stop,
            narrator=self.narrator,
        )
        self.stats = self._dispatcher.stats
        #: Runs still going when the grace ended (recorded interrupted; the process must exit).
        self.abandoned: list[RunResult] = []
        self._timetable = Timetable(self.jobs, self.identity)
        self._batches = Batches(self._dispatcher, self._stop)
        #: Tenants' runs of a per-tenant job with a ``jitter``, until each one's start.
        self._held_back = HeldBack()
        self._attendance = Attendance(self._presence, self.identity, self._stop)
        self._wakeup = Wakeup()
        self._presence.nudge = self._wakeup.nudge
        self._requests = RunRequests(
            self.manual_jobs,
            identity=self.identity,
            wakeup=self._wakeup,
            stop=self._stop,
            start=self._dispatcher.start_manual,
            per_tenant=lambda: [name for name, job in self.manual_jobs.items() if job.per_tenant],
        )
        #: The jobs given, as the database's schedules change them; with ``everything``,
        #: every schedule kept there too.
        self._following = Following(
            {job.name: job for job in given},
            everything=everything,
            jobs=self.jobs,
            manual=self.manual_jobs,
            timetable=self._timetable,
            wakeup=self._wakeup,
            identity=self.identity,
            requests=self._requests,
            narrator=self.narrator,
        )

    @property
    def _running(self) -> dict[str, Future[Any]]:
        """The latest run started per job (for a test that waits for a pass of the loop)."""
        return self._dispatcher.latest

    @property
    def presence_name(self) -> str:
        """The ``application_name`` of this worker's presence connection."""
        return presence_name(self.identity)

    @property
    def listening(self) -> bool:
        """Whether this worker is woken by NOTIFY for "run now" requests (else it polls)."""
        return self._requests.listening

    @property
    def stopped_children(self) -> int:
        """Child processes stopped when the grace ended (they, or this worker, recorded
        them)."""
        return self._dispatcher.children.stopped

    def in_process(self, job: Job[..., object]) -> bool:
        """Whether ``job`` runs in a child process: asked for, or needed to enforce its
        ``timeout`` (a thread cannot be stopped)."""
        return self._dispatcher.in_process(job)

    def check_processes(self) -> None:
        """Raise ``ValueError`` if some job must run in a child process and this process's
        settings cannot be passed on to one (``run()`` checks; call it to check earlier)."""
        if any(self.in_process(job) for job in self.jobs.values()):
            self._dispatcher.children.environment = child_environment()

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
        self._dispatcher.open()
        presence = self._presence
        try:
            attendance = self._attendance
            present = attendance.attend() if not self.persistent else attendance.reattend(None)
            clock = DatabaseClock(presence)
            listened_on: BaseDatabaseWrapper | None = None
            while present and not self._stop.is_set():
                try:
                    with presence.turn() as connection:
                        reconnected = connection is not listened_on
                    if reconnected:
                        # A (re)connected presence: listen again, then read the schedules, so
                        # that a change made in between is heard (one made before is read);
                        # the first pass plans.
                        clock = DatabaseClock(presence)
                        first = self._timetable.upcoming is None
                        if first:
                            # First, so a database without the app's tables is the first
                            # thing this worker says.
                            now = clock.read()
                        self._requests.listen(presence)
                        if first:
                            with presence.turn() as wrapper:
                                self._following.load(wrapper, None)
                            upcoming = self._first_ticks(now)
                            logger.info(
                                "cronworker %s: %s", self.identity, _first_ticks_said(upcoming, now)
                            )
                            self._announce(upcoming, now)
                        else:
                            # Changes made while it was away went unannounced.
                            with presence.turn() as wrapper:
                                self._following.load(wrapper, clock.now())
                        listened_on = connection
                    wait = self._wake(clock)
                    attendance.losses = 0  # a whole pass: the connection works again
                    self._sleep(wait)
                except (DatabaseError, DatabaseUnavailable) as error:
                    if isinstance(error, ProgrammingError) and presence.connected:
                        # The database answered, and refused the statement (a missing table:
                        # migrate has not run): reconnecting cannot fix that.
                        raise
                    # A connection that no longer answers was closed, and the runs whose
                    # locks it held were told they lost them; one that answers is closed
                    # unless it holds runs' locks. Reattending opens another.
                    presence.retire()
                    present = attendance.reattend(error)
        finally:
            self._shut_down()
            self._dispatcher.close()  # the presence too, once the last run on it has ended
            self._wakeup.close()
            # This thread's own Django connections (a pooler probe may have opened one): a
            # scheduler in a background thread must not leave them behind when it stops.
            connections.close_all()

    def _announce(self, upcoming: dict[str, datetime], now: datetime) -> None:
        """Say on stdout what this worker follows, and how it waits."""
        database = connections[self.using].settings_dict
        where = f"{database['NAME']} on {database['HOST'] or 'localhost'}"
        waits = (
            "woken by LISTEN/NOTIFY for run-now requests and schedule changes"
            if self._requests.listening
            else f"polling for run-now requests every {REQUEST_POLL:g} s and schedule changes "
            f"every {SCHEDULE_POLL:g} s (LISTEN is not available here)"
        )
        say = self.narrator.say
        say(
            RUNS,
            f"cronworker {self.identity}: started; {len(upcoming)} scheduled job(s), lock "
            f"database {self.using!r} ({where}); {waits}",
        )
        for shown, (name, tick) in enumerate(sorted(upcoming.items(), key=lambda item: item[1])):
            if shown == BANNER_JOBS:
                say(RUNS, f"  ... and {len(upcoming) - shown} more (manage.py cronjob list)")
                break
            due = f"missed tick {tick}: due now" if tick <= now else f"next tick {tick}"
            say(RUNS, f"  {name}: {self.jobs[name].schedule_text}, {due}")

    def _wake(self, clock: DatabaseClock) -> float:
        """Start the runs that are due (and those asked for); return the seconds until the
        next tick."""
        self._dispatcher.new_wake()
        self._requests.take(self._presence)
        upcoming = self._timetable.upcoming
        assert upcoming is not None
        now = clock.now()
        self._following.follow(self._presence, now, listening=self._requests.listening)
        # A tick is due at its start: the tick plus its job's jitter offset. Jobs whose
        # starts coincide (no jitter, or the same offset) are still claimed together.
        due = [name for name, start in self._timetable.starts().items() if start <= now]
        # Tenants' runs held back by their jitter whose start has come.
        ready = self._held_back.due(now)
        if due or ready:
            together: list[tuple[Job[..., object], datetime]] = []

            def take(job: Job[..., object], ticks: list[datetime]) -> None:
                if len(ticks) == 1 and job.tenant is not None and job.jitter:
                    begins = job.start_of(ticks[0])
                    if begins > now:  # a tenant's offset in the jitter: held until then
                        self._held_back.hold(job, ticks[0], begins)
                        return
                if len(ticks) == 1 and self._batches.claimable(job):
                    together.append((job, ticks[0]))
                else:
                    self._dispatcher.dispatch(job, ticks)

            with self._presence.turn() as connection:
                for job, tick in ready:
                    take(job, [tick])
                for due_job, ticks in self._timetable.due(connection, due, now):
                    # A per-tenant job's tick is one entry per tenant, batched alike.
                    for job in fanout.split(due_job):
                        take(job, ticks)
            if together:
                self._batches.claim(together)
        starts = list(self._timetable.starts().values())
        held = self._held_back.first()
        if held is not None:
            starts.append(held)
        if not starts:
            return CLOCK_REFRESH
        wait = (min(starts) - clock.now()).total_seconds()
        return max(0.0, min(wait, CLOCK_REFRESH))

    def _first_ticks(self, now: datetime) -> dict[str, datetime]:
        """Plan the first tick to wake for, per job, from the database time ``now``."""
        with self._presence.turn() as connection:
            return self._timetable.plan(connection, now)

    def _sleep(self, seconds: float) -> None:
        """Wait until the next tick is due, until stopped, or until a "run now" request is
        announced (or, without LISTEN, until it is time to look for requests)."""
        self._requests.sleep(seconds)

    def _shut_down(self) -> None:
        """Start nothing new; give running jobs ``grace`` seconds; record those still running
        then as interrupted (their locks go with this process, which must then exit), unless
        this worker runs in a thread of a process that goes on (``start_worker``)."""
        self.abandoned = self._dispatcher.drain(self.grace)
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
        with self._dispatcher.lock:  # runs that ended here, interrupted
            self.stats.ran += len(self.abandoned)
            self.stats.failed += len(self.abandoned)
        for result in self.abandoned:
            logger.warning(
                "cronworker: %s (run %s) still running after %g s of grace: recorded as "
                "interrupted",
                result.job,
                result.run_id,
                self.grace,
            )
            result.finish_lost(
                history.INTERRUPTED, f"interrupted: cronworker {self.identity} stopped"
            )


def _first_ticks_said(upcoming: dict[str, datetime], now: datetime) -> str:
    """What the start-up line says of the first ticks: the jobs whose ticks were missed while
    no worker ran (due now), apart from the next tick to come."""
    missed = [tick for tick in upcoming.values() if tick <= now]
    coming = [tick for tick in upcoming.values() if tick > now]
    said = [f"{len(upcoming)} scheduled job(s)"]
    if missed:
        said.append(
            f"{len(missed)} with ticks missed while no cronworker ran (the first at "
            f"{min(missed)}): handled now, as their catch_up says"
        )
    if coming:
        said.append(f"next tick {min(coming)}")
    return ", ".join(said)


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
        everything=names is None,
    )
    worker.thread = threading.Thread(target=worker.run_logged, name=SCHEDULER_THREAD, daemon=True)
    worker.thread.start()
    return worker
