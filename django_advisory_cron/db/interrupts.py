"""Deferring SIGINT, SIGTERM and SIGALRM around statements that must not be cut in half.

psycopg answers ``KeyboardInterrupt`` during a query by cancelling it; a statement that both
unlocks (not transactional) and updates the run row (transactional) would then release the
lock and roll the row back, handing the tick to another replica. Around such statements the
signals are recorded instead (SIGALRM too: it ends a run that is over its ``timeout``), and
delivered to the previous handler as soon as the statement has returned.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

DEFERRED = (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)


def _nothing() -> None:
    pass


@contextmanager
def deferred_signals() -> Iterator[Callable[[], None]]:
    """Hold the ``DEFERRED`` signals for the block; deliver them afterwards. Main thread only,
    else a no-op (Python runs signal handlers in the main thread alone).

    Yields ``deliver``: calling it inside the block ends the holding there (restores the
    handlers and delivers what was held, which may raise); the block's end then does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield _nothing
        return
    pending: list[int] = []

    def record(signum: int, frame: FrameType | None) -> None:
        pending.append(signum)

    previous: dict[int, Any] = {signum: signal.signal(signum, record) for signum in DEFERRED}
    holding = [True]

    def deliver() -> None:
        if not holding or threading.current_thread() is not threading.main_thread():
            return
        holding.clear()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(pending):
            _deliver(signum, previous[signum])

    try:
        yield deliver
    finally:
        deliver()


def _deliver(signum: int, handler: object) -> None:
    if callable(handler):
        handler(signum, None)
    elif handler == signal.SIG_DFL:
        signal.raise_signal(signum)
