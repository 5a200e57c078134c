"""The watchdog behind every client-side deadline: order, cancelling, and fork()."""

from __future__ import annotations

import os
import threading
import time

from django_advisory_cron.db.deadlines import Watchdog


def test_deadlines_fire_in_order_and_disarmed_ones_never_fire() -> None:
    watchdog = Watchdog()
    fired: list[str] = []
    done = threading.Event()

    def late() -> None:
        fired.append("late")
        done.set()

    watchdog.arm(0.15, late)
    watchdog.arm(0.05, lambda: fired.append("early"))
    cancelled = watchdog.arm(0.1, lambda: fired.append("cancelled"))
    assert watchdog.disarm(cancelled) is False
    assert done.wait(5)
    assert fired == ["early", "late"]


def test_disarm_after_firing_says_so() -> None:
    watchdog = Watchdog()
    done = threading.Event()
    deadline = watchdog.arm(0.01, done.set)
    assert done.wait(5)
    assert watchdog.disarm(deadline) is True


def test_many_cancelled_deadlines_do_not_pile_up() -> None:
    watchdog = Watchdog()
    for _ in range(1000):
        watchdog.disarm(watchdog.arm(60, lambda: None))
    assert len(watchdog._heap) < 200


def test_a_forked_child_gets_a_watchdog_of_its_own() -> None:
    watchdog = Watchdog()
    watchdog.arm(30, lambda: None)  # the parent's thread is running and waiting
    pid = os.fork()
    if pid == 0:  # the child: the parent's thread was not copied, a new one must start
        done = threading.Event()
        watchdog.arm(0.01, done.set)
        os._exit(0 if done.wait(5) else 1)
    started = time.monotonic()
    _pid, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert time.monotonic() - started < 5
