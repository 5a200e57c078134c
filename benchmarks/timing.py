"""Timing one call, for the benchmarks that time calls in this process."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def median_ms(action: Callable[[], Any], repeat: int) -> float:
    """The median of ``repeat`` timed calls of ``action``, in milliseconds, after one warm-up."""
    action()  # warm up
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)
