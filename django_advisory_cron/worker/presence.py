"""The worker's own connection, its presence: it names the worker (see
[fleet][django_advisory_cron.worker.fleet]), reads the clock, the run history and "run now"
requests.

A database restart or failover does not stop a worker: it logs the loss once, reconnects with
a growing pause, and carries on from the database's clock.
"""

from __future__ import annotations

import logging
import threading

from django.db import DatabaseError
from django.db.backends.base.base import BaseDatabaseWrapper

from ..db.connections import ensure_connected, unpooled_connection
from ..exceptions import DatabaseUnavailable, first_line
from .fleet import presence_name

logger = logging.getLogger("django_advisory_cron")

#: Pauses between attempts to reach the database again after losing it (the last repeats).
RECONNECT_PAUSES = (0.5, 1.0, 2.0, 5.0)


def reconnect_pause(attempt: int) -> float:
    """Seconds to pause before reconnecting attempt ``attempt`` (from 0) in a row."""
    return RECONNECT_PAUSES[min(attempt, len(RECONNECT_PAUSES) - 1)]


def answers(connection: BaseDatabaseWrapper) -> bool:
    """Whether ``connection`` is open and answers a statement."""
    try:
        return connection.connection is not None and connection.is_usable()
    except Exception:
        return False


class Attendance:
    """Opens the presence connection of the worker ``identity``, and opens it again after a
    loss until the worker stops."""

    def __init__(self, using: str, identity: str, stop: threading.Event) -> None:
        self.using = using
        self.identity = identity
        self._stop = stop
        #: Connections lost in a row, without a whole pass of the loop in between: how long
        #: to pause before reconnecting (``RECONNECT_PAUSES``).
        self.losses = 0

    def attend(self) -> BaseDatabaseWrapper:
        """Open the presence connection: it names this worker, and it reads the clock."""
        presence = unpooled_connection(self.using, application_name=presence_name(self.identity))
        try:
            ensure_connected(presence)
        except BaseException:
            presence.close()
            raise
        return presence

    def reattend(self, error: BaseException | None) -> BaseDatabaseWrapper | None:
        """Reach the database again after ``error`` (or at a persistent start), pausing longer
        each time; ``None`` when stopped meanwhile."""
        if error is not None:
            # Pause before the first attempt too, longer after each loss in a row: a database
            # that accepts connections and then fails every pass must not be spun on.
            pause = reconnect_pause(self.losses)
            self.losses += 1
            logger.warning(
                "cronworker %s: lost the database (%s); reconnecting in %g s",
                self.identity,
                first_line(error),
                pause,
            )
            if self._stop.wait(pause):
                return None
        attempt = self.losses
        while not self._stop.is_set():
            try:
                presence = self.attend()
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
