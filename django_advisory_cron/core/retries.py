"""Retries within a tick: how many, which failures, and how long to wait before each.

A failed attempt is retried by the process that holds the tick, under the same lock and in
the same run row, after a back-off that doubles with each attempt (from ``backoff`` seconds,
at most ``backoff_max``), with jitter so that jobs failing together (a database restart) do
not retry in step. The runner decides whether there is room for the next attempt before the
job's next tick and its ``max_lateness``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """``retries`` more attempts after a failure that is one of ``retry_on``."""

    retries: int
    backoff: float = 1.0
    backoff_max: float = 300.0
    retry_on: tuple[type[BaseException], ...] = (Exception,)

    def delay(self, failed: int, draw: float | None = None) -> float:
        """Seconds to wait after the ``failed``-th failed attempt (1 for the first): the
        exponential back-off, capped, times a jitter between 0.5 and 1 (``draw`` in [0, 1),
        random by default)."""
        jitter = random.random() if draw is None else draw
        # 2.0 ** 1024 overflows a float; by then any back-off is at its cap (the product may
        # be infinite, never an error).
        doubled: float = self.backoff * 2.0 ** min(failed - 1, 1023)
        return min(doubled, self.backoff_max) * (0.5 + jitter / 2)

    def retries_after(self, failed: int, error: BaseException) -> bool:
        """Whether the ``failed``-th failed attempt, which raised ``error``, is retried (room
        before the next tick aside)."""
        return failed <= self.retries and isinstance(error, self.retry_on)


def policy_problem(
    retries: object, backoff: object, backoff_max: object, retry_on: object
) -> str | None:
    """Why these ``@locked_task`` retry options are not a policy, or ``None``."""
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        return f"retries must be a whole number >= 0, not {retries!r}"
    for name, value in (("retry_backoff", backoff), ("retry_backoff_max", backoff_max)):
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not 0 < value < math.inf
        ):
            return f"{name} must be a number of seconds > 0, not {value!r}"
    classes = retry_on if isinstance(retry_on, tuple) else (retry_on,)
    if not classes or not all(
        isinstance(cls, type) and issubclass(cls, BaseException) for cls in classes
    ):
        return f"retry_on must be an exception class or a tuple of them, not {retry_on!r}"
    return None
