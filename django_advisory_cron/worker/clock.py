"""The worker's sense of time: the database server's clock, and the sleep between wakes.

Ticks are judged on the database's clock, as the runner does. The worker learns it from the
answers to its claims (each brings the server's clock) and advances it on the monotonic clock
in between; it reads the clock itself only after ``CLOCK_TRUST`` seconds without a claim, or
when the host's clock jumped against the monotonic one (a VM suspended and resumed, an NTP
step), so that neither can skip the tick it wakes up for or run one twice. It sleeps on a
[Wakeup][django_advisory_cron.worker.clock.Wakeup], which a notification or ``stop()`` ends
early. Both use the worker's one connection, in turn with its runs and its heartbeat.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import time
from datetime import datetime, timedelta
from typing import Any

from ..conf import app_settings
from ..db import pooler, sql
from ..db.execute import rows_within
from ..exceptions import first_line
from ..lock.shared import ClaimConnection, Sighting

logger = logging.getLogger("django_advisory_cron")

#: A worker's longest sleep: it looks at its timetable (and its "run now" requests, when it
#: cannot LISTEN for them) at least this often.
CLOCK_REFRESH = 30.0

#: Seconds a reading of the database's clock (or a claim's answer) is advanced on the
#: monotonic clock before the worker reads it again: the two drift apart by milliseconds at
#: most in that time (both follow NTP); a jump is caught by ``CLOCK_JUMP``.
CLOCK_TRUST = 300.0

#: Seconds the host's clock may move apart from the monotonic one between readings before
#: the worker reads the database's clock again: a VM resumed after a suspension (its
#: monotonic clock stood still), or an NTP step.
CLOCK_JUMP = 1.0


class DatabaseClock:
    """The database server's clock, as the latest claim on ``connection`` or the latest
    reading saw it, advanced by the monotonic clock."""

    def __init__(self, connection: ClaimConnection) -> None:
        self.connection = connection
        self._base: datetime | None = None
        self._at = 0.0  # time.monotonic() of _base
        self._wall = 0.0  # time.time() then

    def read(self) -> datetime:
        """Read the clock (with the live workers and pending requests: see
        [look][django_advisory_cron.lock.shared.ClaimConnection.look])."""
        return self._rebase(self.connection.look())

    def _rebase(self, seen: Sighting) -> datetime:
        self._base, self._at = seen.now, seen.at
        self._wall = time.time() - (time.monotonic() - seen.at)
        return self._base

    def now(self) -> datetime:
        seen = self.connection.sighting
        if seen is not None and seen.at > self._at:
            self._rebase(seen)
        elapsed = time.monotonic() - self._at
        if (
            self._base is None
            or elapsed > CLOCK_TRUST
            or abs(time.time() - self._wall - elapsed) > CLOCK_JUMP
        ):
            return self.read()
        return self._base + timedelta(seconds=elapsed)


#: What [poke][django_advisory_cron.worker.clock.Wakeup.poke] and
#: [nudge][django_advisory_cron.worker.clock.Wakeup.nudge] write to end or check a sleep.
POKE, NUDGE = b"\0", b"\1"


class Wakeup:
    """Ends a worker's sleep early: on a notification on its (direct) connection, or when
    [poke][django_advisory_cron.worker.clock.Wakeup.poke] is called (``stop()``, even from a
    signal handler). Without a listening connection it only wakes on ``poke``.

    The connection is shared with the worker's runs and heartbeat: a notification that
    arrives during their statements waits in the driver, and their
    [nudge][django_advisory_cron.worker.clock.Wakeup.nudge] makes the sleep look."""

    def __init__(self) -> None:
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)
        self.raw: Any = None
        self._connection: ClaimConnection | None = None
        #: The channels notified since each was last asked about (``heard``).
        self._heard: set[str] = set()

    def listen(self, connection: ClaimConnection) -> bool:
        """LISTEN for "run now" requests on ``connection``; ``False`` when it cannot be used
        (a pooler in the path, or a driver without ``notifies(timeout=...)``)."""
        self.raw = None
        if pooler.transaction_pooled(connection.alias):
            return False
        with connection.turn() as wrapper:
            raw = wrapper.connection
            if raw is None or not hasattr(raw, "notifies"):
                return False
            for statement in sql.listen():
                rows_within(wrapper, statement, app_settings.STATEMENT_TIMEOUT)
        self.raw, self._connection = raw, connection
        return self._drain() is not None

    def heard(self, channel: str) -> bool:
        """Whether ``channel`` was notified since the last time this was asked."""
        if channel in self._heard:
            self._heard.discard(channel)
            return True
        return False

    def poke(self) -> None:
        self._send(POKE)

    def nudge(self) -> None:
        """Make a sleep look for notifications the driver received meanwhile, and sleep on."""
        if self.raw is not None:
            self._send(NUDGE)

    def _send(self, byte: bytes) -> None:
        with contextlib.suppress(OSError):  # already closed, or the buffer is full
            self._writer.send(byte)

    def _drain(self) -> bool | None:
        """Whether notifications arrived (``None``: the connection cannot be listened on)."""
        assert self._connection is not None
        try:
            with self._connection.turn():
                channels = {notice.channel for notice in self.raw.notifies(timeout=0)}
            self._heard |= channels
            return bool(channels)
        except Exception as error:  # a driver too old for timeout=, or a broken connection
            logger.warning(
                "cronworker: stopped listening for run-now requests: %s", first_line(error)
            )
            self.raw = None
            return None

    def sleep(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; ``True`` when woken by a notification."""
        deadline = time.monotonic() + seconds
        waiting: list[Any] = [self._reader]
        while True:
            if self.raw is not None:
                drained = self._drain()
                if drained is None:
                    # It stopped listening (most often: the connection was cut, which woke
                    # this sleep): the loop's next pass finds out and reconnects now, rather
                    # than at the next tick.
                    return False
                if drained:
                    return True
                waiting = [self._reader, self.raw]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            try:
                ready = select.select(waiting, [], [], remaining)[0]
            except (OSError, ValueError):  # the connection was closed under the sleep
                return False
            if self._reader in ready:
                received = b""
                with contextlib.suppress(BlockingIOError):
                    while chunk := self._reader.recv(64):
                        received += chunk
                if POKE in received or self.raw is None:
                    return False
                continue  # nudged: look at the driver's notifications, and sleep on
            if not ready:
                return False

    def close(self) -> None:
        self._reader.close()
        self._writer.close()
