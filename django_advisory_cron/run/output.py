"""A run's captured output: what its job logged, and a wrapped command's stdout and stderr,
kept with the run, bounded in size.

Capture is per job (``@locked_task(capture=...)``; on for management commands). The records
of the job's loggers from ``CAPTURE_LEVEL`` (INFO) up are copied as the run's own thread emits
them, even where the project's logging drops them (Django's default logging drops INFO): the
captured logger's records are made for that thread from that level, copied, and handed on
only if the project's configuration would have handled them, so its logging prints exactly
what it did.
Records of a child logger (``payments.stripe`` under a captured ``payments``) are not copied:
name it too. A command's output still reaches the process's stdout and stderr as well. At
most ``CAPTURE_LIMIT`` characters are kept: the beginning and the end, with a marker saying
how much was cut from the middle. A run that captures nothing sends nothing more: the output
rides on the statement that finishes the run.
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


class _Gate(logging.Filter):
    """Installed on a captured logger while some run captures it: the runs' threads get the
    records they capture made (from their ``CAPTURE_LEVEL`` up, even where the project's
    logging drops them), and copied to their output; the project's handlers still get exactly
    what its configuration lets through, from every thread.

    A filter, not a handler: a logger with a handler more would no longer fall back to
    Python's last-resort handler, which would change what the job's logging prints. The
    logger's ``isEnabledFor`` is answered here while installed (for this logger only, not its
    children, whose records the project's configuration alone decides).
    """

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__()
        self.logger = logger
        #: The outputs capturing this logger, per thread, each with the level it captures from.
        self.outputs: dict[int, list[tuple[Output, int]]] = {}
        self.formatter = logging.Formatter(FORMAT)

    def configured(self, level: int) -> bool:
        """Whether the project's logging configuration handles ``level`` on this logger."""
        return logging.Logger.isEnabledFor(self.logger, level)

    def is_enabled_for(self, level: int) -> bool:
        if self.configured(level):
            return True
        outputs = self.outputs.get(threading.get_ident(), ())
        wanted = any(level >= least for _output, least in outputs)
        return wanted and not self.logger.disabled and not _disabled(level)

    def filter(self, record: logging.LogRecord) -> bool:
        configured = self.configured(record.levelno)
        outputs = self.outputs.get(threading.get_ident(), ())
        kept = [output for output, least in outputs if configured or record.levelno >= least]
        if kept:
            line = self.formatter.format(record) + "\n"
            for output in kept:
                output.write(line)
        return configured or not outputs


def _disabled(level: int) -> bool:
    """Whether ``logging.disable()`` turned ``level`` off everywhere."""
    return logging.root.manager.disable >= level


#: The gates installed, per logger name (guarded by ``_gates_lock``).
_gates: dict[str, _Gate] = {}
_gates_lock = threading.Lock()


def _open_gate(name: str, output: Output, level: int) -> None:
    with _gates_lock:
        gate = _gates.get(name)
        if gate is None:
            gate = _gates[name] = _Gate(logging.getLogger(name))
            gate.logger.addFilter(gate)
            setattr(gate.logger, "isEnabledFor", gate.is_enabled_for)  # noqa: B010
        gate.outputs.setdefault(threading.get_ident(), []).append((output, level))


def _close_gate(name: str, output: Output) -> None:
    with _gates_lock:
        gate = _gates[name]
        thread = threading.get_ident()
        gate.outputs[thread] = [kept for kept in gate.outputs[thread] if kept[0] is not output]
        if not gate.outputs[thread]:
            del gate.outputs[thread]
        if not gate.outputs:
            del _gates[name]
            gate.logger.removeFilter(gate)
            del gate.logger.__dict__["isEnabledFor"]


def uncapturable(name: str, level: int) -> str | None:
    """Why the records of the logger ``name`` cannot be captured, if they cannot (without
    making the logger, which a later logging configuration could then disable)."""
    logger = logging.root.manager.loggerDict.get(name)
    if isinstance(logger, logging.Logger) and logger.disabled:
        return f"logger {name!r} is disabled by the project's logging configuration"
    if _disabled(level):
        return f"logging.disable() turned off records of level {logging.getLevelName(level)}"
    return None


@contextmanager
def captured(loggers: Sequence[str] | None, limit: int, level: int) -> Iterator[Output | None]:
    """Capture the records of ``loggers`` (``None``: capture nothing, yield ``None``) from
    ``level`` up (and those the project's logging handles) that this thread emits, and what a
    wrapped command prints, while the block runs. A logger that cannot be captured is said at
    the top of the output."""
    if loggers is None:
        yield None
        return
    output = Output(limit)
    names = list(dict.fromkeys(loggers))
    for name in names:
        why = uncapturable(name, level)
        if why is not None:
            output.write(f"(not captured: {why})\n")
    for name in names:
        _open_gate(name, output, level)
    _current.output = output
    try:
        yield output
    finally:
        _current.output = None
        for name in names:
            _close_gate(name, output)


def call_command_captured(command: str, *args: Any, **options: Any) -> Any:
    """``call_command``, its stdout and stderr also written to the run's captured output
    (when the run captures)."""
    output: Output | None = getattr(_current, "output", None)
    if output is not None:
        options.setdefault("stdout", _Tee(sys.stdout, output))
        options.setdefault("stderr", _Tee(sys.stderr, output))
    return call_command(command, *args, **options)
