"""A job's jitter: each tick starts at its tick plus an offset below the job's ``jitter``, so
that jobs sharing a tick (the thundering herd at 00:00) do not all start at once.

Every replica computes the same offset from the job's name and the tick, with no message
between them: a hash, not a random draw. The tick stays the tick (its identity, its row in
the history, once per tick); only the moment its run starts moves.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from .moments import UTC
from .schedule import Schedule, seconds_text

_NONE = timedelta(0)

#: Seconds: a tenant's run's offset is a whole number of them, so that the worker claims the
#: tenants that start in the same step together (a jitter below it spreads nothing).
TENANT_STEP = 1.0


def step_for(tenant: str | None) -> float | None:
    """The step a run's offset is rounded down to: ``TENANT_STEP`` for a tenant's run of a
    per-tenant job, none for any other. The one place that decides it: the worker,
    ``runlocked`` and the history all ask here, so a tenant's tick starts at the same moment
    whichever of them starts it."""
    return TENANT_STEP if tenant is not None else None


def offset(name: str, tick: datetime, jitter: float | None, step: float | None = None) -> timedelta:
    """The offset of job ``name``'s ``tick`` for a ``jitter`` of that many seconds: from 0
    up to, not including, ``jitter``, to the microsecond (with ``step``, rounded down to a
    whole number of ``step`` seconds); the same in every process, whatever the zone ``tick``
    is written in. No jitter (``None`` or 0): no offset."""
    bound = round((jitter or 0) * 1_000_000)
    if bound <= 0:
        return _NONE
    seed = f"{name}\0{tick.astimezone(UTC).isoformat()}".encode(errors="surrogatepass")
    drawn = int.from_bytes(hashlib.sha256(seed).digest()[:8], "big") % bound
    if step:
        grain = max(1, round(step * 1_000_000))
        drawn -= drawn % grain
    return timedelta(microseconds=drawn)


def offset_seconds(
    name: str, tick: datetime | None, jitter: float | None, step: float | None = None
) -> float | None:
    """``offset`` in seconds, as the history shows it for a run of job ``name`` (``None``: no
    tick, or no jitter). Computed, not stored: the function every replica used."""
    if tick is None or not jitter:
        return None
    return offset(name, tick, jitter, step).total_seconds()


def start_of(
    name: str, tick: datetime, jitter: float | None, step: float | None = None
) -> datetime:
    """When job ``name``'s ``tick`` starts: the tick plus its offset (``step``: see
    ``offset``)."""
    return tick + offset(name, tick, jitter, step)


def jitter_problem(jitter: float | None, schedule: Schedule | None) -> str | None:
    """Why ``jitter`` seconds cannot spread the ticks of ``schedule`` (its offsets must stay
    below the shortest interval between two ticks, or a tick would start after the next one),
    or ``None``."""
    if not jitter or schedule is None:
        return None
    shortest = schedule.min_interval.total_seconds()
    if jitter >= shortest:
        return (
            f"the jitter ({seconds_text(jitter)} s) must be shorter than the shortest interval "
            f"between its ticks ({seconds_text(shortest)} s)"
        )
    return None
