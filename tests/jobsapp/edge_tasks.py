"""Jobs for the edge-case tests, loaded only where a test asks for them.

Subprocesses load them with ``ADVISORY_CRON_JSON='{"JOBS_MODULE": "edge_tasks"}'``; in the test
process, importing this module registers them (inside the ``fresh_registry`` fixture). They
stay out of ``tasks.py`` so that the admin, cronstatus and django-q2 tests do not see them.
"""

import time

from django.db import transaction

from django_advisory_cron import locked_task

from .tasks import _mark, wait_for_file


@locked_task(name="edge_hold_scheduled", schedule="* * * * *", scope="session")
def edge_hold_scheduled(path: str, timeout: str = "60") -> str:
    """A scheduled job that holds its lock until ``path`` exists."""
    _mark("edge_hold_scheduled")
    wait_for_file(path, float(timeout))
    return "released"


@locked_task(name="edge_hold_every10", every=10, scope="session")
def edge_hold_every10(path: str, timeout: str = "60") -> str:
    """``edge_hold_scheduled`` ticking every ten seconds, for tests about seconds, not minutes."""
    _mark("edge_hold_every10")
    wait_for_file(path, float(timeout))
    return "released"


@locked_task(name="edge_hold_transaction", scope="transaction")
def edge_hold_transaction(path: str, timeout: str = "60") -> str:
    """Writes a marker in the lock's transaction, then holds the lock until ``path`` exists."""
    _mark("edge_hold_transaction")
    wait_for_file(path, float(timeout))
    return "committed"


@locked_task(name="edge_sleep_transaction", scope="transaction")
def edge_sleep_transaction(seconds: str = "2") -> str:
    """Writes a marker in the lock's transaction, then sleeps."""
    _mark("edge_sleep_transaction")
    time.sleep(float(seconds))
    return "committed"


def _explode() -> None:
    raise RuntimeError("on_commit exploded")


@locked_task(name="edge_commit_hook_fails", scope="transaction")
def edge_commit_hook_fails() -> str:
    """Commits, then an on_commit callback raises."""
    _mark("edge_commit_hook_fails")
    transaction.on_commit(_explode)
    return "committed"


@locked_task(name="edge_inner_raise", on_locked="raise")
def edge_inner_raise() -> str:
    """Raises LockNotAcquired when held elsewhere."""
    return "inner ran"


@locked_task(name="edge_calls_held_job")
def edge_calls_held_job() -> str:
    """Calls a job that raises LockNotAcquired because a test holds its lock."""
    _mark("edge_calls_held_job")
    edge_inner_raise()
    return "never"


@locked_task(name="edge_quick_scheduled", schedule="* * * * *", scope="session")
def edge_quick_scheduled() -> str:
    """A fast scheduled job."""
    _mark("edge_quick_scheduled")
    return "done"
