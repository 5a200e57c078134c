"""Signal handlers swapped for the length of a block, in the main thread (where Python runs
them), and put back after unless the block installed others meanwhile: how a run marks the
stops that reach its job, and how an async job's body defers them out of the event loop."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any


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
