"""One watchdog thread per process that acts when a deadline passes.

Every statement of ours gets a client-side deadline; a ``threading.Timer`` each would start a
thread per statement, on the path whose cost is meant to be a round trip. One daemon thread
keeps the deadlines in a heap instead. After ``fork()`` the child starts its own thread (the
parent's is not copied) and forgets the parent's deadlines.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import time
from collections.abc import Callable


class Deadline:
    """One armed deadline; ``fired`` once its action has been started."""

    __slots__ = ("action", "cancelled", "fired", "when")

    def __init__(self, when: float, action: Callable[[], None]) -> None:
        self.when = when
        self.action = action
        self.fired = False
        self.cancelled = False


class Watchdog:
    """Runs each armed action once its deadline passes, unless disarmed first."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Deadline]] = []
        self._cancelled = 0
        self._order = itertools.count()
        self._pid = 0
        if hasattr(os, "register_at_fork"):
            # The parent's thread may hold the lock at fork time: the child gets a fresh one.
            os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self._cond = threading.Condition()
        self._pid, self._heap, self._cancelled = 0, [], 0

    def arm(self, seconds: float, action: Callable[[], None]) -> Deadline:
        deadline = Deadline(time.monotonic() + seconds, action)
        with self._cond:
            if self._pid != os.getpid():  # first use, or a forked child without the thread
                self._pid, self._heap, self._cancelled = os.getpid(), [], 0
                threading.Thread(
                    target=self._run, name="advisory-cron-deadlines", daemon=True
                ).start()
            # The thread sleeps until the earliest deadline at most: only an earlier one needs
            # to wake it (statements arm 30 s deadlines back to back; a wake each would cost a
            # context switch per statement).
            wake = not self._heap or deadline.when < self._heap[0][0]
            heapq.heappush(self._heap, (deadline.when, next(self._order), deadline))
            if wake:
                self._cond.notify()
        return deadline

    def disarm(self, deadline: Deadline) -> bool:
        """Cancel ``deadline``; return whether its action had already started."""
        with self._cond:
            if not deadline.fired and not deadline.cancelled:
                deadline.cancelled = True
                self._cancelled += 1
                if self._cancelled > 64 and self._cancelled * 2 > len(self._heap):
                    self._heap = [entry for entry in self._heap if not entry[2].cancelled]
                    heapq.heapify(self._heap)
                    self._cancelled = 0
            return deadline.fired

    def _run(self) -> None:
        pid = os.getpid()
        while True:
            with self._cond:
                if self._pid != pid:
                    return
                while self._heap and self._heap[0][2].cancelled:
                    heapq.heappop(self._heap)
                    self._cancelled -= 1
                if not self._heap:
                    self._cond.wait()
                    continue
                delay = self._heap[0][0] - time.monotonic()
                if delay > 0:
                    self._cond.wait(delay)
                    continue
                deadline = heapq.heappop(self._heap)[2]
                deadline.fired = True
            deadline.action()


watchdog = Watchdog()
