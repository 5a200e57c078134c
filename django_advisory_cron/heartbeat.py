"""A daemon thread that keeps asking a session lock's connection whether it still holds the lock.

A session lock lives exactly as long as its server connection. If that connection dies while
the job runs (``pg_terminate_backend``, a PostgreSQL restart, a network failure) the lock is
gone and another replica may take it. Every ``interval`` seconds the thread sends one statement
on the lock connection itself (for a job run it also renews the run's lease, in the same round
trip); a false answer, an error or no answer within ``deadline`` seconds is a loss, reported
once through ``on_lost``. The job's own connections are never touched.

Transaction-scoped locks need no heartbeat: they live on the job's own connection, so the
job's next query fails when it dies.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from .exceptions import LockLost
from .lockconn import answer_within
from .sql import Statement

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
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching; waits for a check in flight (at most its deadline). Idempotent."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(self.deadline + 1)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

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
        while not self._stop.wait(self.interval):
            try:
                self.check()
            except Exception as error:
                if self._stop.is_set():
                    return  # the lock is being released; its owner handles errors
                try:
                    self.on_lost(error)
                except Exception:
                    logger.exception("handling a lost lock failed")
                return


def lost_text(error: BaseException) -> str:
    """One line for the run's error text."""
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return f"lock lost while the job ran: {first}"
