"""Runs in a process of their own: ``isolation="process"``, and always for a job with a
``timeout`` (a thread cannot be stopped, a process can).

The child is a fresh ``python -m django runlocked JOB --tick ...``: never ``fork()``, since the
worker has threads and open connections. The child records its own run; the worker records it
only when it had to kill the child (past its timeout, or at the end of the worker's grace).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from typing import Literal

from django.conf import settings

from ..core.moments import tick_said
from ..jobs.job import Job
from ..run import history
from ..run.runner import RunResult

logger = logging.getLogger("django_advisory_cron")

Isolation = Literal["thread", "process"]
ISOLATIONS: tuple[Isolation, ...] = ("thread", "process")

#: Seconds a child process gets between SIGTERM and SIGKILL. Also how long after its
#: ``timeout`` a child is sent SIGTERM: it stops itself at its timeout (``runlocked`` arms an
#: alarm), so the worker steps in only for a process that did not.
STOP_GRACE = 5.0

#: How often a pool thread waiting for a child process looks at the clock.
WATCH_INTERVAL = 0.1


def in_process(job: Job[..., object], isolation: Isolation) -> bool:
    """Whether ``job`` runs in a child process: asked for, or needed to enforce its
    ``timeout`` (a thread cannot be stopped). A tenant's run of a per-tenant job
    (``name@schema``) always runs in a thread: it is made by the worker for its tick."""
    if job.tenant is not None:
        return False
    return isolation == "process" or job.timeout is not None


def child_command(job: str, tick: datetime | None, using: str) -> list[str]:
    """The command line of a run in a process of its own: ``runlocked`` for that tick (or a
    manual run, without one), through ``python -m django`` (with the worker's settings module
    and import path in its environment: see
    [child_environment][django_advisory_cron.worker.children.child_environment])."""
    options = [f"-W{option}" for option in sys.warnoptions]
    return [
        sys.executable,
        *options,
        "-m",
        "django",
        "runlocked",
        # Options first: what follows the job's name is passed to the job.
        *(["--tick", tick.isoformat()] if tick is not None else ["--manual"]),
        "--database",
        using,
        "--verbosity",
        "0",
        job,
    ]


def child_environment() -> dict[str, str]:
    """This process's environment, with its settings module and its import path (``sys.path``,
    which ``manage.py`` or ``--pythonpath`` may have extended), for a child process."""
    module = settings.SETTINGS_MODULE
    if not module:
        raise ValueError(
            "running a job in a process of its own needs a settings module "
            "(DJANGO_SETTINGS_MODULE); settings.configure() cannot be passed on to a child"
        )
    path = os.pathsep.join(entry for entry in sys.path if entry)
    return {**os.environ, "DJANGO_SETTINGS_MODULE": module, "PYTHONPATH": path}


class Children:
    """The child processes of one worker's runs, each waited for by a pool thread."""

    def __init__(self, identity: str) -> None:
        self.identity = identity
        #: The environment children start with (``child_environment()``, read before the
        #: first one starts).
        self.environment: dict[str, str] | None = None
        #: Child processes stopped when the grace ended (they, or this worker, recorded them).
        self.stopped = 0
        #: When shutting down: child processes get SIGTERM at the first, SIGKILL at the second.
        self._terminate_at = math.inf
        self._kill_at = math.inf
        self._lock = threading.Lock()

    def stop_by(self, deadline: float, grace: float) -> None:
        """The worker's grace ends at ``deadline`` (``time.monotonic()``): children get
        SIGTERM ``STOP_GRACE`` s before it (at most half the grace), SIGKILL at it."""
        self._kill_at = deadline
        self._terminate_at = deadline - min(STOP_GRACE, grace / 2)

    def run(self, job: Job[..., object], tick: datetime | None, using: str) -> RunResult:
        """Run ``job`` for ``tick`` in a child process and wait for it; return what its row
        says. The child records its own run; this worker records it only if it had to kill
        the child (or something else did)."""
        child = subprocess.Popen(
            child_command(job.name, tick, using),
            env=self.environment,
            stdin=subprocess.DEVNULL,
            # Its own session: a terminal's Ctrl-C reaches the worker alone, which decides
            # when its children stop; SIGKILL can then take the child's own children too.
            start_new_session=True,
        )
        stopped = self._watch(job, tick, child)
        if stopped is None and child.returncode < 0:
            name = signal.Signals(-child.returncode).name
            stopped = (history.INTERRUPTED, f"interrupted: its process was killed by {name}")
        if stopped is not None:
            status, text = stopped
            history.finish_child(
                using, job=job.name, tick=tick, pid=child.pid, status=status, text=text
            )
        result = history.child_run(using, job=job.name, tick=tick, pid=child.pid)
        if result.run_id is None:
            logger.error(
                "cronworker: %s (%s): its process exited with code %s without recording a "
                "run; its own output above says why",
                job.name,
                tick_said(tick),
                child.returncode,
            )
        return result

    def _watch(
        self, job: Job[..., object], tick: datetime | None, child: subprocess.Popen[bytes]
    ) -> tuple[str, str] | None:
        """Wait for ``child``. If it is still running ``STOP_GRACE`` s after its timeout, or
        when this worker's grace is ending, send it SIGTERM (it records its end and releases
        its lock), then SIGKILL if it has not exited. Returns the status and text to record
        when it had to be killed, else ``None``."""
        over = time.monotonic() + job.timeout + STOP_GRACE if job.timeout else math.inf
        stopping: tuple[str, str] | None = None
        kill_at = math.inf
        while True:
            try:
                child.wait(WATCH_INTERVAL)
                return None
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if stopping is None and (now >= over or now >= self._terminate_at):
                if now >= over:
                    assert job.timeout is not None
                    stopping = (
                        history.TIMED_OUT,
                        f"stopped after its timeout of {job.timeout:g} s: its process did not "
                        f"stop by itself and was killed by cronworker {self.identity}",
                    )
                    kill_at = now + STOP_GRACE
                else:
                    stopping = (
                        history.INTERRUPTED,
                        f"interrupted: cronworker {self.identity} stopped, and its process was "
                        "killed at the end of the grace",
                    )
                    kill_at = self._kill_at
                    with self._lock:
                        self.stopped += 1
                logger.warning(
                    "cronworker: %s (%s): sending SIGTERM to its process %d (%s)",
                    job.name,
                    tick_said(tick),
                    child.pid,
                    "over its timeout" if stopping[0] == history.TIMED_OUT else "shutting down",
                )
                child.send_signal(signal.SIGTERM)
            elif now >= kill_at:
                logger.error(
                    "cronworker: %s (%s): its process %d did not stop after SIGTERM; killing it",
                    job.name,
                    tick_said(tick),
                    child.pid,
                )
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)  # its own children too
                child.wait()
                return stopping
