"""What a ``cronworker`` says on its stdout, whatever ``LOGGING`` says: its start (the jobs it
follows, their next ticks, how it waits), a line per run, and at ``-v 2`` its skips and
schedule changes. Its log records say the same for those who ship logs.

The lines are written by a thread of their own from a bounded queue, so a stdout that nobody
reads (a full pipe, a stalled log collector) never holds up the scheduler or a run's thread:
lines beyond ``BACKLOG`` are dropped, and counted.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

#: ``-v 0``: errors only (failed runs); the command adds its stop line.
ERRORS = 0
#: ``-v 1`` (the default): the start banner and one line per run.
RUNS = 1
#: ``-v 2``: also each skip and each schedule change.
DETAILS = 2

#: Lines waiting to be written, at most.
BACKLOG = 10_000


class Narrator:
    """Writes the lines of a worker's ``verbosity`` with ``write`` (``None``: says nothing, as
    a worker in a background thread of another process does)."""

    def __init__(self, write: Callable[[str], None] | None = None, verbosity: int = RUNS) -> None:
        self.verbosity = verbosity if write is not None else -1
        #: Lines dropped because the queue was full (stdout not read).
        self.dropped = 0
        self._write = write
        self._lines: queue.Queue[str | None] = queue.Queue(BACKLOG)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def say(self, level: int, line: str) -> None:
        """Write ``line`` if the verbosity asks for ``level``; never blocks."""
        if level > self.verbosity:
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="advisory-cron-stdout", daemon=True
                )
                self._thread.start()
        try:
            self._lines.put_nowait(line)
        except queue.Full:
            with self._lock:
                self.dropped += 1

    def close(self, timeout: float) -> None:
        """Write what is queued, waiting at most ``timeout`` seconds for it."""
        if self._thread is None:
            return
        deadline = time.monotonic() + timeout
        try:
            self._lines.put(None, timeout=timeout)
        except queue.Full:
            return
        self._thread.join(max(0.0, deadline - time.monotonic()))

    def _run(self) -> None:
        assert self._write is not None
        while (line := self._lines.get()) is not None:
            try:
                self._write(line)
            except (OSError, ValueError):  # stdout closed: the worker goes on all the same
                with self._lock:
                    self.dropped += 1
