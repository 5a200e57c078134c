"""Taking a lock, waiting with ``wait=``: the attempts, and the pauses between them.

A lock is not waited for on the server (a blocking ``pg_advisory_lock`` would hold its
connection, and no deadline could end it): it is tried, and tried again after a pause that
starts at ``POLL_START`` seconds and doubles up to ``MAX_POLL_INTERVAL``, until it is taken,
the wait is over, or the waiter is stopped. Every lock is taken through
[attempts][django_advisory_cron.lock.polling.attempts], a bare lock and a run alike: the owner
sends each attempt's statement itself, so the lock calls nothing of it; a ``cronworker``'s
run that waits on the claim connection pauses with the same
[Backoff][django_advisory_cron.lock.polling.Backoff].
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from .holder import Holder

#: The first pause between attempts, doubled after each, up to ``MAX_POLL_INTERVAL`` seconds.
POLL_START = 0.02
MAX_POLL_INTERVAL = 0.5


class Backoff:
    """The attempts of a wait of ``wait`` seconds, which ``stop`` cuts short."""

    def __init__(self, wait: float, stop: threading.Event) -> None:
        self.deadline = time.monotonic() + wait
        self.stop = stop
        self.delay = POLL_START

    @property
    def final(self) -> bool:
        """The next attempt is the last: the wait is over, or the waiter was stopped."""
        return self.stop.is_set() or time.monotonic() >= self.deadline

    def pause(self) -> bool:
        """Sleep until the next attempt (at most until the deadline); whether ``stop`` was set
        meanwhile."""
        stopped = self.stop.wait(max(0.0, min(self.delay, self.deadline - time.monotonic())))
        self.delay = min(self.delay * 2, MAX_POLL_INTERVAL)
        return stopped


class Taking(Protocol):
    """What [attempts][django_advisory_cron.lock.polling.attempts] asks of the lock it takes."""

    #: Seconds spent trying again; 0 tries once.
    wait: float
    #: Set when whoever waits gave up (a cancelled task): no attempt follows.
    abandoned: threading.Event
    acquired: bool

    def open(self) -> Holder:
        """Resolve the scope, pick the holder, make it ready."""

    def took(self) -> None:
        """After the last attempt: watch a lock taken."""


@dataclass
class Attempt:
    """One attempt at taking a lock, made by its owner (see
    [attempts][django_advisory_cron.lock.polling.attempts])."""

    #: The last attempt: the wait is over, or the waiter gave up.
    final: bool
    #: Set by the owner when the attempt did not take the lock and found nothing left to wait
    #: for (a run's tick already taken; a lock in a transaction waits on).
    settled: bool = False


def attempts(lock: Taking) -> Iterator[Attempt]:
    """The attempts of taking ``lock``, for up to its ``wait`` seconds: iterating opens the
    lock, and after the last attempt watches a lock taken.

    The owner makes each attempt in the loop's body: inside the holder's ``attempt()``, it
    sends its acquiring statement (a run's claim, so its history rides in the lock's round
    trips) and any follow-up, and sets ``lock.acquired`` from the row. On failure the owner
    releases."""
    holder = lock.open()
    backoff = Backoff(lock.wait, lock.abandoned)
    while True:
        attempt = Attempt(backoff.final)
        yield attempt
        if lock.acquired or attempt.final or (not holder.in_transaction and attempt.settled):
            break
        holder.retreat()
        if backoff.pause():
            break
    lock.took()
