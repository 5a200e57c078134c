"""What a tick does when it comes while a run of its job is going: the overlap policies, by
Temporal's names, the bound on ``allow_all``'s concurrent runs and on the ticks a buffering
policy keeps waiting. Pure: the claim acts on them (a job allowed N runs at once has N lock
keys, its slots, in ``core/keys``; a buffered tick waits as a row of
its own, see [overlap][django_advisory_cron.jobs.overlap])."""

from __future__ import annotations

from typing import Literal

Overlap = Literal[
    "skip", "buffer_one", "buffer_all", "allow_all", "cancel_other", "terminate_other"
]
#: The policies built, the default first.
OVERLAPS: tuple[Overlap, ...] = (
    "skip",
    "buffer_one",
    "buffer_all",
    "allow_all",
    "cancel_other",
    "terminate_other",
)
#: The policies whose ticks that find their job busy wait for it, oldest first.
BUFFERS: tuple[Overlap, ...] = ("buffer_one", "buffer_all")

#: ``cancel_other``: how long a new tick's run waits for the run it asked to stop to end before
#: it terminates it as ``terminate_other`` does (seconds; as long as a ``cronworker`` child
#: process gets between SIGTERM and SIGKILL at shutdown).
CANCEL_GRACE = 5.0

#: ``buffer_all``'s bound: how many ticks of one job may wait at once; a tick that finds this
#: many waiting is skipped, and its row says why.
MAX_BUFFERED = 20

#: ``allow_all``'s runs at once when ``max_concurrent`` is not given, and its bounds (each
#: allowed run is a lock key a claim may try).
DEFAULT_CONCURRENT = 2
MAX_CONCURRENT = 32


def overlap_policy(value: object) -> Overlap:
    """The policy ``value`` names (``None`` or ``""``: ``"skip"``). Raises ``ValueError``, in
    one line, for another."""
    if value is None or value == "":
        return "skip"
    for policy in OVERLAPS:
        if value == policy:
            return policy
    built = f"{', '.join(map(repr, OVERLAPS[:-1]))} or {OVERLAPS[-1]!r}"
    raise ValueError(f"overlap must be {built}, not {value!r}")


def concurrent_runs(value: object) -> int | None:
    """``max_concurrent`` as a job holds it (``None``: not given). Raises ``ValueError``, in
    one line with the bounds, for what is no whole number from 1 to ``MAX_CONCURRENT``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CONCURRENT:
        raise ValueError(
            f"max_concurrent must be a whole number from 1 to {MAX_CONCURRENT}, not {value!r}"
        )
    return value


def slots(overlap: str, max_concurrent: int | None) -> int:
    """How many runs of a job may go at once under its policy."""
    if overlap != "allow_all":
        return 1
    return DEFAULT_CONCURRENT if max_concurrent is None else max_concurrent


def waiting_bound(overlap: str) -> int:
    """How many ticks of a job may wait at once for its run going to end (0: none wait)."""
    return {"buffer_one": 1, "buffer_all": MAX_BUFFERED}.get(overlap, 0)


def combination_problem(overlap: str, max_concurrent: int | None) -> str | None:
    """Why ``max_concurrent`` cannot go with ``overlap`` (one line), or ``None``: it bounds
    ``allow_all``'s runs at once, and the buffering policies run one at a time."""
    if max_concurrent is not None and overlap in (*BUFFERS, "cancel_other"):
        return (
            f"max_concurrent goes with overlap 'allow_all' only; overlap {overlap!r} runs one "
            "tick at a time: remove max_concurrent or use 'allow_all'"
        )
    return None
