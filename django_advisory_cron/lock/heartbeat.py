"""A daemon thread that keeps asking a session lock's connection whether it still holds the lock.

A session lock lives exactly as long as its server connection. If that connection dies while
the job runs (``pg_terminate_backend``, a PostgreSQL restart, a network failure) the lock is
gone and another replica may take it. Every ``interval`` seconds the thread sends one statement
on the lock connection itself (for a job run it also renews the run's lease, in the same round
trip); a false answer, an error or no answer within ``deadline`` seconds is a loss, reported
once through ``on_lost``. The job's own connections are never touched.

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
from django.db.backends.base.base import BaseDatabaseWrapper

from ..db.connections import answer_within
from ..db.deadlines import Deadline, watchdog
from ..db.sql import Statement
from ..exceptions import LockLost, first_line

logger = logging.getLogger("django_advisory_cron")


class Heartbeat:
    """Watches one lock connection from a daemon thread."""

    def __init__(
        self,
        connection: BaseDatabaseWrapper,
        statement: Callable[[], Statement],
        *,
        interval: float,
        deadline: float,
        on_lost: Callable[[BaseException], None],
        name: str,
    ) -> None:
        self.connection = connection
        self.statement = statement
        self.interval = float(interval)
        self.deadline = float(deadline)
        self.on_lost = on_lost
        self.beats = 0
        self._stop = threading.Event()
        self._guard = threading.Lock()
        self._pending: Deadline | None = None
        self._name = name
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
            self._report(failure)

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

    def check(self) -> None:
        """Raise if the lock connection died, is silent, or no longer holds the lock."""
        sql, params = self.statement()
        with answer_within(self.connection, self.deadline), self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        self.beats += 1
        if not row or not row[0]:
            raise LockLost("the lock is no longer held by its connection")

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
                self.check()
            except Exception as error:
                if self._stop.is_set():
                    return  # the lock is being released; its owner handles errors
                self._report(error)
                return
            if self._stop.wait(self.interval):
                return

    def _report(self, error: BaseException) -> None:
        try:
            self.on_lost(error)
        except Exception:
            logger.exception("handling a lost lock failed")


def lost_text(error: BaseException) -> str:
    """One line for the run's error text."""
    return f"lock lost while the job ran: {first_line(error)}"
