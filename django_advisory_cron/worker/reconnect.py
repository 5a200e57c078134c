"""The worker's reconnect policy: it opens the worker's own connection, its presence, and
opens it again after a loss. The presence names the worker (see
[fleet][django_advisory_cron.worker.fleet]), reads the clock, the run history and "run now"
requests, and claims the worker's runs and holds their locks (a
[ClaimConnection][django_advisory_cron.lock.shared.ClaimConnection]): one server connection
per worker.

A database restart or failover does not stop a worker: it logs the loss once, reconnects with
a growing pause, and carries on from the database's clock. A standby that it reaches meanwhile
(a failover not yet done, a connection string that lists it) is no place for locks: the
worker takes none there, runs nothing, says so at every attempt and keeps trying until it
reaches a primary.
"""

from __future__ import annotations

import logging
import threading

from django.db import DatabaseError, connections

from ..db import pooler
from ..exceptions import DatabaseReadOnly, DatabaseUnavailable, ServerIsStandby, first_line
from ..lock.shared import ClaimConnection

logger = logging.getLogger("django_advisory_cron")

#: Pauses between attempts to reach the database again after losing it (the last repeats).
RECONNECT_PAUSES = (0.5, 1.0, 2.0, 5.0)


def reconnect_pause(attempt: int) -> float:
    """Seconds to pause before reconnecting attempt ``attempt`` (from 0) in a row."""
    return RECONNECT_PAUSES[min(attempt, len(RECONNECT_PAUSES) - 1)]


class Attendance:
    """Opens the presence connection ``presence`` of the worker ``identity``, and opens it
    again after a loss until the worker stops."""

    def __init__(self, presence: ClaimConnection, identity: str, stop: threading.Event) -> None:
        self.presence = presence
        self.identity = identity
        self._stop = stop
        #: Connections lost in a row, without a whole pass of the loop in between: how long
        #: to pause before reconnecting (``RECONNECT_PAUSES``).
        self.losses = 0

    def attend(self) -> bool:
        """Open the presence connection (unless open): it names this worker, reads the clock
        and holds its runs' locks. Whether a pooler is in the path is found first, by a probe
        on this thread's own connection, closed at once: the worker keeps no other."""
        alias = self.presence.alias
        try:
            pooler.resolve_scope("auto", alias)
        finally:
            connections[alias].close()
        self.presence.open()
        return True

    def reattend(self, error: BaseException | None) -> bool:
        """Reach the database again after ``error`` (or at a persistent start), pausing longer
        each time; ``False`` when stopped meanwhile."""
        # A read-only database answers: it was not lost, and is not "reachable again".
        read_only = isinstance(error, DatabaseReadOnly)
        if error is not None:
            # Pause before the first attempt too, longer after each loss in a row: a database
            # that accepts connections and then fails every pass must not be spun on.
            pause = reconnect_pause(self.losses)
            self.losses += 1
            logger.warning(
                "cronworker %s: %s; ran nothing, retrying in %g s"
                if read_only
                else "cronworker %s: lost the database (%s); reconnecting in %g s",
                self.identity,
                first_line(error),
                pause,
            )
            if self._stop.wait(pause):
                return False
        attempt = self.losses
        while not self._stop.is_set():
            try:
                self.attend()
            except (DatabaseError, DatabaseUnavailable) as failure:
                pause = reconnect_pause(attempt)
                if isinstance(failure, ServerIsStandby):
                    self._standby(failure, pause)
                elif attempt == 0 and error is None:
                    logger.warning(
                        "cronworker %s: cannot reach the database yet (%s); retrying",
                        self.identity,
                        first_line(failure),
                    )
                self._stop.wait(pause)
                attempt += 1
                continue
            if (error is not None or attempt) and not read_only:
                logger.warning("cronworker %s: database reachable again", self.identity)
            return True
        return False

    def _standby(self, standby: ServerIsStandby, pause: float) -> None:
        """One line per attempt that reached a standby: an operator watching a failover sees
        each one, and that nothing ran."""
        logger.warning(
            "cronworker %s: %s; ran nothing, retrying in %g s",
            self.identity,
            first_line(standby),
            pause,
        )
