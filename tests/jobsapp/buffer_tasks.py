"""Jobs for the buffering overlap tests (tests/test_buffer.py), loaded with
``ADVISORY_CRON_JSON='{"JOBS_MODULE": "buffer_tasks", ...}'`` in the worker processes. Each
body records its start and its end (a marker each, with one token, and the tick it ran for in
its run row), so that the test sees when each ran, whichever process ran it."""

import os
import signal
import time
import uuid

from django.db import connection

from django_advisory_cron import locked_task
from django_advisory_cron.exceptions import Terminated

from .models import Marker


def body(name: str, seconds: float = 0.0, release: bool = False) -> None:
    """Run ``seconds`` (or, with ``release``, until the test writes a "release" marker for
    ``name``), between a start and an end marker."""
    token = uuid.uuid4().hex
    Marker.objects.create(job=name, pid=os.getpid(), note=f"start {token}")
    deadline = time.monotonic() + (60 if release else seconds)
    while time.monotonic() < deadline:
        if release and Marker.objects.filter(job=name, note="release").exists():
            break
        time.sleep(0.05)
    Marker.objects.create(job=name, pid=os.getpid(), note=f"end {token}")


@locked_task(name="buffer_one_every", every=1, overlap="buffer_one")
def buffer_one_every() -> None:
    """Each run lasts longer than two intervals: a tick waits during each, later ones skip."""
    body("buffer_one_every", 2.3)


@locked_task(name="buffer_all_every", every=1, overlap="buffer_all")
def buffer_all_every() -> None:
    """Each run lasts longer than its interval: the ticks queue up, and run in turn."""
    body("buffer_all_every", 1.6)


@locked_task(name="buffer_held", every=2, overlap="buffer_one")
def buffer_held() -> None:
    """Runs until the test releases it (or forever, if its process is killed first)."""
    body("buffer_held", release=True)


@locked_task(name="buffer_manual", every=3600, overlap="buffer_one")
def buffer_manual() -> None:
    """Started by ``runlocked --tick``: runs until the test releases it."""
    body("buffer_manual", release=True)


def stoppable(name: str) -> None:
    """Run until the test releases it, or until asked to stop: then record what stopped it
    (a marker "saw <what> <token>", written after the stop request, which a body's next query
    raises only once) and stop."""
    token = uuid.uuid4().hex
    Marker.objects.create(job=name, pid=os.getpid(), note=f"start {token}")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if Marker.objects.filter(job=name, note="release").exists():
                break
            time.sleep(0.05)
    except BaseException as stop:
        if isinstance(stop, Terminated):  # a signal may have cut a query short: a new connection
            connection.close()
        Marker.objects.create(job=name, pid=os.getpid(), note=f"saw {type(stop).__name__} {token}")
        raise
    finally:
        Marker.objects.create(job=name, pid=os.getpid(), note=f"end {token}")


@locked_task(name="cancel_every", every=3, overlap="cancel_other")
def cancel_every() -> None:
    """Each tick's run goes on until the next tick's asks it to stop."""
    stoppable("cancel_every")


@locked_task(name="cancel_manual", overlap="cancel_other")
def cancel_manual() -> None:
    """No schedule: started by ``runlocked``, it runs until released or asked to stop."""
    stoppable("cancel_manual")


@locked_task(name="cancel_stubborn", overlap="cancel_other")
def cancel_stubborn() -> None:
    """Started by ``runlocked``: notes the stop request (SIGTERM) and goes on regardless, until
    released or stopped harder."""
    token = uuid.uuid4().hex
    Marker.objects.create(job="cancel_stubborn", pid=os.getpid(), note=f"start {token}")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if Marker.objects.filter(job="cancel_stubborn", note="release").exists():
                break
            time.sleep(0.05)
        except Terminated:
            # The signal may have cut a query of the loop's short: that connection is left
            # mid-statement, so note it on a new one.
            connection.close()
            Marker.objects.create(job="cancel_stubborn", pid=os.getpid(), note=f"saw {token}")


@locked_task(name="cancel_both_late", overlap="cancel_other")
def cancel_both_late() -> None:
    """Started by ``runlocked``: holds SIGTERM and SIGUSR1 off until both are pending (the new
    run's stop request, then, after the grace, its lost lock), then lets them in at once.
    Python runs the lower-numbered one first: the lost lock ends the body, and the stop
    request's SIGTERM arrives only once the body has ended. The new run returns at once."""
    if Marker.objects.filter(job="cancel_both_late").exists():
        return
    both = {signal.SIGTERM, signal.SIGUSR1}
    signal.pthread_sigmask(signal.SIG_BLOCK, both)
    Marker.objects.create(job="cancel_both_late", pid=os.getpid(), note="start")
    deadline = time.monotonic() + 60
    while both - signal.sigpending():
        if time.monotonic() > deadline:
            raise AssertionError(f"still waiting for {both - signal.sigpending()}")
        time.sleep(0.02)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, both)
    time.sleep(5)  # the lost lock raises here


@locked_task(name="buffer_body")
def buffer_body(name: str) -> None:
    """What the schedules kept in the database call: a run longer than a 1 s interval."""
    body(name, 1.6)
