"""A per-tenant job's tenants spread over its ``jitter``: each tenant's run of a tick
(``name@schema``) starts at its own offset, computed from that name and the tick as any job's
(see [jitter][django_advisory_cron.core.jitter]), the same on every replica and in
``runlocked`` (``Job.start_of``). The offsets are whole multiples of ``TENANT_STEP`` seconds
(``core.jitter``), so the tenants that start in the same step are still claimed together: a
tick of T tenants costs a replica at most about ``jitter / TENANT_STEP`` batched claims, not
T. The entries wait here, in the worker, until they start; nothing is claimed or recorded
before.
"""

from __future__ import annotations

import heapq
import itertools
from datetime import datetime

from ..jobs.job import Job


class HeldBack:
    """Tenants' runs due later in their tick's jitter, in the order they start."""

    def __init__(self) -> None:
        self._heap: list[tuple[datetime, int, Job[..., object], datetime]] = []
        self._order = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def hold(self, job: Job[..., object], tick: datetime, start: datetime) -> None:
        """Keep ``job``'s ``tick`` until ``start``."""
        heapq.heappush(self._heap, (start, next(self._order), job, tick))

    def due(self, now: datetime) -> list[tuple[Job[..., object], datetime]]:
        """The runs whose start has come by ``now``, taken out."""
        ready = []
        while self._heap and self._heap[0][0] <= now:
            _start, _order, job, tick = heapq.heappop(self._heap)
            ready.append((job, tick))
        return ready

    def first(self) -> datetime | None:
        """When the first run held starts (``None``: none held)."""
        return self._heap[0][0] if self._heap else None
