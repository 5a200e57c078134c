"""Signal handlers swapped for the length of a block, in the main thread (where Python runs
them), and put back after unless the block installed others meanwhile: how a run marks the
stops that reach its job, and how an async job's body defers them out of the event loop."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from types import FrameType
from typing import Any

from ..exceptions import SIGNAL_ATTRIBUTE, SigintReceived, stopping_signal


@contextmanager
def swapped(signums: Iterable[int], replacement: Callable[[Any], Any | None]) -> Iterator[None]:
    """Replace each signal's handler by what ``replacement`` makes of it (``None``: leave it)
    while the block runs. Elsewhere than the main thread, a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    installed: dict[int, tuple[Any, Any]] = {}
    for signum in signums:
        try:
            handler = signal.getsignal(signum)
        except (OSError, ValueError):  # a signal number this platform cannot ask about
            continue
        ours = replacement(handler)
        if ours is not None:
            signal.signal(signum, ours)
            installed[signum] = (handler, ours)
    try:
        yield
    finally:
        for number, (handler, ours) in installed.items():
            if signal.getsignal(number) is ours:
                signal.signal(number, handler)


def raise_sigint(signum: int, frame: FrameType | None) -> None:
    """A SIGINT handler: raise [SigintReceived][django_advisory_cron.exceptions.SigintReceived]
    (a ``KeyboardInterrupt``) so a run stopped by Ctrl-C is told apart from a job that raised
    ``KeyboardInterrupt`` itself."""
    raise SigintReceived()


#: The signals whose Python handlers, while a job runs in the main thread, stop the run
#: (SIGALRM: a task worker's own timeout, e.g. django-q2's, raised in the job).
STOP_SIGNALS = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGALRM")
    if hasattr(signal, name)
)


#: Stop requests sent to the main thread as SIGTERM and not yet taken there: for each, whether
#: its run's body still runs.
_requests: list[Callable[[], bool]] = []
_requests_lock = threading.Lock()


def ask_main_thread_to_stop(body_running: Callable[[], bool]) -> bool:
    """Tell a run whose body runs in the main thread to stop as a shutdown would, by SIGTERM,
    where a Python handler of SIGTERM runs there; whether it was sent.

    A request that reaches the handler once the body has ended (a lost lock told at the same
    moment ended it first: Python runs the lower-numbered signal's handler first) is dropped
    while the run is recorded, not taken for a shutdown of the process. A shutdown's own
    SIGTERM that arrives in that same instant merges with it (the kernel keeps one pending
    SIGTERM) and goes too: the process ends with the run's own exit code."""
    main = threading.main_thread()
    if main.ident is None or not callable(signal.getsignal(signal.SIGTERM)):
        return False
    with _requests_lock:
        _requests.append(body_running)
    signal.pthread_kill(main.ident, signal.SIGTERM)
    return True


def _late_request() -> bool:
    """Whether the SIGTERM being handled is only stop requests whose bodies have ended."""
    with _requests_lock:
        requests = _requests[:]
        _requests.clear()
    return bool(requests) and not any(running() for running in requests)


def _marking(handler: Callable[[int, FrameType | None], Any]) -> Callable[..., Any]:
    def mark_what_it_raises(signum: int, frame: FrameType | None) -> Any:
        if signum == signal.SIGTERM and _late_request():
            return None
        try:
            return handler(signum, frame)
        except BaseException as raised:
            if stopping_signal(raised) is None:
                setattr(raised, SIGNAL_ATTRIBUTE, signal.Signals(signum).name)
            raise

    return mark_what_it_raises


def signals_stop_runs() -> AbstractContextManager[None]:
    """While a job runs in the main thread: whatever a signal handler raises there is a stop
    from outside (the run is ``interrupted``); what the job's code raises is a failure.

    Python's own SIGINT handler is replaced by
    [raise_sigint][django_advisory_cron.run.handlers.raise_sigint]; another Python handler (a task
    worker's, a server's) runs as before, and what it raises is marked with the signal's name.
    Handlers the job installs itself are left in place. Elsewhere (another thread, which no
    signal handler interrupts) a no-op."""

    def marked(handler: Any) -> Any | None:
        if handler is signal.default_int_handler:
            return raise_sigint
        if callable(handler) and handler is not raise_sigint:
            return _marking(handler)
        return None

    return swapped(STOP_SIGNALS, marked)
