"""A run's captured output: what its job logged, and a wrapped command's stdout and stderr,
kept with the run, bounded in size.

Capture is per job (``@locked_task(capture=...)``; on for management commands). The records
are copied from the job's loggers as they handle them (a filter added for the run, for the
run's own thread only, that lets every record through): levels, handlers and propagation stay
the job's own, so its logging does exactly what it did. Records of a child logger
(``payments.stripe`` under a captured ``payments``) are not copied: name it too. A command's
output still reaches the process's stdout and stderr as well. At most ``CAPTURE_LIMIT``
characters are kept: the beginning and the end, with a marker saying how much was cut from
the middle. A run that captures nothing sends nothing more: the output rides on the statement
that finishes the run.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

from django.core.management import call_command

#: How a captured log record is written.
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_current = threading.local()


class Output:
    """Text written to it, at most ``limit`` characters kept: the first half, and the last
    characters written, with what was cut between them counted."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._head: list[str] = []
        self._head_size = 0
        self._tail: deque[str] = deque()
        self._tail_size = 0
        self.cut = 0
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        written = len(text)
        with self._lock:
            room = self.limit // 2 - self._head_size
            if room > 0:
                self._head.append(text[:room])
                self._head_size += len(text[:room])
                text = text[room:]
            if text:
                self._tail.append(text)
                self._tail_size += len(text)
                self._trim()
        return written

    def _trim(self) -> None:
        keep = self.limit - self.limit // 2
        while self._tail_size > keep:
            first = self._tail[0]
            excess = self._tail_size - keep
            if len(first) <= excess:
                self._tail.popleft()
                self._tail_size -= len(first)
                self.cut += len(first)
            else:
                self._tail[0] = first[excess:]
                self._tail_size -= excess
                self.cut += excess

    def text(self) -> str:
        """What was kept, with a marker where the middle was cut."""
        with self._lock:
            marker = f"\n[... {self.cut:,} characters cut ...]\n" if self.cut else ""
            return "".join(self._head) + marker + "".join(self._tail)


class _Tee:
    """A stream that writes to ``stream`` and to ``output``."""

    def __init__(self, stream: TextIO, output: Output) -> None:
        self._stream = stream
        self._output = output

    def write(self, text: str) -> int:
        self._output.write(text)
        return self._stream.write(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return False


class _RunFilter(logging.Filter):
    """Copies the records of one thread (the run's) to ``output``, and lets every record
    through. A filter, not a handler: a logger with a handler more would no longer fall back
    to Python's last-resort handler, which would change what the job's logging prints."""

    def __init__(self, output: Output, thread: int) -> None:
        super().__init__()
        self.output = output
        self.thread = thread
        self.formatter = logging.Formatter(FORMAT)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.thread == self.thread:
            self.output.write(self.formatter.format(record) + "\n")
        return True


@contextmanager
def captured(loggers: Sequence[str] | None, limit: int) -> Iterator[Output | None]:
    """Capture the records of ``loggers`` (``None``: capture nothing, yield ``None``) that
    this thread emits, and what a wrapped command prints, while the block runs."""
    if loggers is None:
        yield None
        return
    output = Output(limit)
    copier = _RunFilter(output, threading.get_ident())
    targets = [logging.getLogger(name) for name in loggers]
    for target in targets:
        target.addFilter(copier)
    _current.output = output
    try:
        yield output
    finally:
        _current.output = None
        for target in targets:
            target.removeFilter(copier)


def call_command_captured(command: str, *args: Any, **options: Any) -> Any:
    """``call_command``, its stdout and stderr also written to the run's captured output
    (when the run captures)."""
    output: Output | None = getattr(_current, "output", None)
    if output is not None:
        options.setdefault("stdout", _Tee(sys.stdout, output))
        options.setdefault("stderr", _Tee(sys.stderr, output))
    return call_command(command, *args, **options)
