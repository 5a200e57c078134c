"""A daemon thread that keeps asking a session lock's connection whether it still holds its locks.

A session lock lives exactly as long as its server connection. If that connection dies while
the job runs (``pg_terminate_backend``, a PostgreSQL restart, a network failure) the lock is
gone and another replica may take it. Every ``HEARTBEAT`` seconds the thread runs one check:
one statement on the lock connection itself, which for job runs also renews their leases in
the same round trip (one run's lock, or every run claimed together on one connection). An
error, or no answer within [beat_deadline][django_advisory_cron.lock.heartbeat.beat_deadline],
is a loss, reported once through ``on_lost``. The job's own connections are never touched.

A beat the server refuses as a write (a server switched read-only) is not a loss: the server
answered, so the session and the locks it holds are alive. The leases go unrenewed until writes
are accepted again, which lets no one else in: a claim takes a run over only when it gets the
run's lock as well. The spell is logged once, at its start and at its end.

The thread is started only when the first beat is due: most locks are released sooner, and
starting a thread per lock would cost more than the lock's own round trips. Until then the
process's one deadline thread ([deadlines][django_advisory_cron.db.deadlines]) holds the start.

Transaction-scoped locks need no heartbeat: they live on the job's own connection, so the
job's next query fails when it dies.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.db import connections

from ..conf import app_settings
from ..db.deadlines import Deadline, watchdog
from ..exceptions import DatabaseReadOnly, first_line

logger = logging.getLogger("django_advisory_cron")


def beat_deadline() -> float:
    """Seconds a heartbeat waits for its answer: a beat with no answer counts as a loss early
    enough for the holder to stop before its lease runs out (the lease outlasts three
    heartbeats)."""
    return max(app_settings.HEARTBEAT, app_settings.LEASE - 2 * app_settings.HEARTBEAT)


class Heartbeat:
    """Runs ``check`` from a daemon thread every ``HEARTBEAT`` seconds, from the first interval
    on, while it returns true (false: nothing is left to watch); what it raises is a loss."""

    def __init__(
        self,
        check: Callable[[], bool],
        *,
        on_lost: Callable[[BaseException], None],
        name: str,
    ) -> None:
        self.check = check
        self.interval = float(app_settings.HEARTBEAT)
        self.deadline = beat_deadline()
        self.on_lost = on_lost
        self.beats = 0
        self._stop = threading.Event()
        self._guard = threading.Lock()
        self._pending: Deadline | None = None
        self._name = name
        #: The server refused the last beat as a write: the spell is logged once.
        self._refused = False
        #: Made when the first beat is due: a lock released sooner never makes one.
        self._thread: threading.Thread | None = None

    def start(self) -> Heartbeat:
        """Watch from the first beat on: the thread starts ``interval`` seconds from now."""
        with self._guard:
            self._pending = watchdog.arm(self.interval, self._launch)
        return self

    def _launch(self) -> None:
        """On the deadline thread: start the beating thread, unless stopped meanwhile."""
        with self._guard:
            self._pending = None
            if self._stop.is_set():
                return
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            try:
                self._thread.start()
            except RuntimeError as error:  # no thread can be started: the lock is unwatched
                self._stop.set()
                failure: BaseException | None = error
            else:
                failure = None
        if failure is not None:
            report_lost(self.on_lost, failure)

    def stop(self) -> None:
        """Stop watching; waits for a check in flight (at most its deadline). Idempotent."""
        with self._guard:
            self._stop.set()
            if self._pending is not None:
                watchdog.disarm(self._pending)
        thread = self._thread
        if thread is not None and thread.is_alive() and thread is not threading.current_thread():
            thread.join(self.deadline + 1)

    @property
    def running(self) -> bool:
        """Watching: its first beat is pending, or its thread is alive (a check in flight
        after ``stop()`` when the join timed out)."""
        with self._guard:
            waiting = self._pending is not None and not self._stop.is_set()
        return waiting or (self._thread is not None and self._thread.is_alive())

    def _run(self) -> None:
        try:
            self._beat()
        finally:
            # lock_lost receivers may have used the ORM in this thread: close what they opened.
            connections.close_all()

    def _beat(self) -> None:
        # Started when the first beat is due: check at once, then every ``interval``.
        while not self._stop.is_set():
            try:
                going = self.check()
            except DatabaseReadOnly as error:
                going = True
                if not self._refused:
                    logger.warning(
                        "%s; the locks are still held and their jobs go on, their leases "
                        "renewed once writes are accepted again",
                        first_line(error),
                    )
                self._refused = True
            except Exception as error:
                if self._stop.is_set():
                    return  # the lock is being released; its owner handles errors
                report_lost(self.on_lost, error)
                return
            else:
                if self._refused:
                    logger.warning("the database accepts writes again: the leases are renewed")
                self._refused = False
            self.beats += 1
            if not going or self._stop.wait(self.interval):
                return


def report_lost(on_lost: Callable[[BaseException], None], error: BaseException) -> None:
    """Tell ``on_lost`` of a loss; what it raises is logged, so the next loss is still told."""
    try:
        on_lost(error)
    except Exception:
        logger.exception("handling a lost lock failed")


def lost_text(error: BaseException) -> str:
    """One line for the run's error text."""
    return f"lock lost while the job ran: {first_line(error)}"
