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
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

DEFERRED = (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)


@contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold the ``DEFERRED`` signals for the block; deliver them afterwards. Main thread only,
    else a no-op (Python runs signal handlers in the main thread alone)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def record(signum: int, frame: FrameType | None) -> None:
        pending.append(signum)

    previous: dict[int, Any] = {signum: signal.signal(signum, record) for signum in DEFERRED}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(pending):
            _deliver(signum, previous[signum])


def _deliver(signum: int, handler: object) -> None:
    if callable(handler):
        handler(signum, None)
    elif handler == signal.SIG_DFL:
        signal.raise_signal(signum)
