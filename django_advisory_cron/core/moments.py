"""The date-times this app accepts from people (a pause's end, a schedule's start and end, a
tick): those a day inside what Python holds, so that one shows in any time zone and reads back
from the database, whose own range is far wider (a pause ``--until 9999-12-31T23:59-14:00``
was stored as year 10000, which no later read of it could turn into a date-time)."""

from __future__ import annotations

from datetime import datetime, timezone

#: UTC as Python 3.10 spells it (``datetime.UTC`` came in 3.11).
UTC = timezone.utc

EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, tzinfo=UTC)
#: The span, as a refusal says it.
SPAN = f"{EARLIEST.date().isoformat()} to {LATEST.date().isoformat()} (UTC)"


def within(moment: datetime) -> bool:
    """Whether the aware ``moment`` falls within ``EARLIEST`` and ``LATEST``."""
    return EARLIEST <= moment <= LATEST


def tick_said(tick: datetime | None, otherwise: str = "run now") -> str:
    """How a message names the tick a run is for, or ``otherwise`` what the run is when it
    has none (a run now): never ``tick None``."""
    return f"tick {tick}" if tick is not None else otherwise
