"""Runs' finishes that met on one worker's claim connection, sent as one statement.

A ``cronworker``'s runs claimed together share one connection, on which their statements take
turns (see [shared][django_advisory_cron.lock.shared]). Runs claimed at one tick tend to end
together, and each finish is a commit the server waits on the disk for: sent one by one, the
last run of a tick waits for every other's commit before its own. Finishes waiting for the
connection at the same moment go as one ``finish_runs`` instead: one round trip and one commit
for them all, each row finished and each lock released as its own ``finish_run`` would.
"""

from __future__ import annotations

from collections.abc import Sequence

from .queries import QUERIES
from .sql import Statement

#: What the finishes sent together must have alike: they end in one statement.
_ALIKE = ("transaction", "shared", "synchronous_commit")


def joins(statement: Statement) -> bool:
    """Whether ``statement`` is a run's finish on a connection other runs share, which may go
    with others (a skip's or an unlock's goes alone)."""
    text, params = statement
    return text == QUERIES["finish_run"] and bool(params["shared"])


def finish_runs(statements: Sequence[Statement]) -> Statement | None:
    """One statement for the ``finish_run`` statements ``statements`` (each one that
    [joins][django_advisory_cron.db.finishes.joins]), one row per run, in order: the unlock's
    answer, as each one's first column. ``None`` when they cannot go together (their scope or
    ``synchronous_commit`` differ: a setting changed between them)."""
    params = [dict(each) for _text, each in statements]
    if any(each[name] != params[0][name] for each in params for name in _ALIKE):
        return None
    return QUERIES["finish_runs"], {
        "ids": [each["id"] for each in params],
        "statuses": [each["status"] for each in params],
        "errors": [each["error"] for each in params],
        "attempts": [each["attempts"] for each in params],
        "outputs": [each["output"] for each in params],
        "lock_ns": [each["lock_ns"] for each in params],
        "lock_ids": [each["lock_id"] for each in params],
        "lock_names": [each["lock_name"] for each in params],
        "transaction": params[0]["transaction"],
        "synchronous_commit": params[0]["synchronous_commit"],
    }
