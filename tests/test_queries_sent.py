"""The statements of ``db/queries.sql`` on a real server: PostgreSQL plans every one against the
migrated tables, and what the code sends while runs are claimed, run, skipped and finished is
one of them, verbatim (tests/unit/test_queries.py checks them against the models)."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import FrameType
from typing import Any

import psycopg
import pytest
from django.db import connection
from django.test import override_settings

from django_advisory_cron import advisory_lock, control, registry
from django_advisory_cron.core.keys import LockKey, job_key
from django_advisory_cron.db.queries import QUERIES
from django_advisory_cron.models import RunStatus

pytestmark = pytest.mark.usefixtures("transactional_db", "fresh_registry")

PACKAGE = Path(sys.modules["django_advisory_cron"].__file__ or "").parent
TICK = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)


#: The statements a migration runs (0016 installs the claim function, 0027 again, 0031 turns
#: its JIT off, 0032 adds the index it probes, 0033 the census function), not the code.
MIGRATIONS = {
    "create_claim",
    "drop_claim",
    "drop_claim_without_slots",
    "drop_claim_with_slots",
    "claim_without_jit",
    "claim_with_jit",
    "create_interrupted_tick_index",
    "drop_interrupted_tick_index",
    "create_census",
    "drop_census",
}


@pytest.mark.parametrize(
    "name", sorted(name for name in QUERIES if "listen" not in name and name not in MIGRATIONS)
)
def test_postgresql_plans_every_statement_against_the_migrated_tables(name: str) -> None:
    """An unknown table, column or function, or a type that does not fit, is refused here (the
    claim function's statement is planned by its first call: the claims below make it)."""
    text = QUERIES[name]
    params = {param: None for param in re.findall(r"%\((\w+)\)s", text)}
    if name.startswith("probe_"):
        text, params = text % {param: 0 for param in params}, {}
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {text}", params)
        assert cursor.fetchall()


def sender(frame: FrameType | None) -> str:
    """The file that sent a statement: the first caller past the driver and Django's cursor
    wrappers; ``""`` for a statement Django's ORM compiled (a job's own, or a query set's)."""
    files = []
    while frame is not None:
        files.append(Path(frame.f_code.co_filename).as_posix())
        frame = frame.f_back
    if any("/django/db/models/" in name for name in files):
        return ""
    return next(name for name in files if not re.search(r"/psycopg/|/django/db/backends/", name))


@pytest.fixture
def ours() -> Iterator[list[str]]:
    """Every statement the package itself sends, on any connection, as the driver is given
    it (not the ORM's, not a test's own)."""
    sent: list[str] = []
    execute = psycopg.Cursor.execute

    def recording(self: Any, query: Any, params: Any = None, **options: Any) -> Any:
        if sender(sys._getframe(1)).startswith(PACKAGE.as_posix() + "/"):
            sent.append(str(query))
        return execute(self, query, params, **options)

    psycopg.Cursor.execute = recording  # type: ignore[method-assign]
    try:
        yield sent
    finally:
        psycopg.Cursor.execute = execute  # type: ignore[method-assign]


@override_settings(ADVISORY_CRON={"LOCK_POOL_SIZE": 0, "RECORD_SKIPS": True})
def test_every_statement_sent_is_one_of_the_files_verbatim(
    ours: list[str], raw_connect: Any
) -> None:
    job = registry.get("quick_scheduled")
    at = [TICK + timedelta(minutes=5 * n) for n in range(5)]
    assert job.run(now=at[0]).status == RunStatus.SUCCEEDED
    assert job.run(now=at[0] + timedelta(seconds=3)).status == RunStatus.SKIPPED_TICK
    assert job.run(now=at[1], scope="transaction").status == RunStatus.SUCCEEDED
    assert job.run(now=at[1], scope="transaction").status == RunStatus.SKIPPED_TICK
    holder = raw_connect()
    holder.execute("SELECT pg_advisory_lock(%(lock_ns)s, %(lock_id)s)", LockKey(job.name).params)
    assert job.run(now=at[2]).status == RunStatus.SKIPPED_LOCKED
    holder.close()
    control.pause(job.name, reason="maintenance")
    assert job.run(now=at[3]).status == RunStatus.SKIPPED_PAUSED
    control.resume(job.name)
    control.request_run(job.name, by="ops")
    with advisory_lock("a report") as lock:
        assert lock.acquired
    with advisory_lock(job_key("hashed report", "hashtext")) as lock:
        assert lock.acquired
    statements = set(QUERIES.values())
    assert ours and [text for text in ours if text not in statements] == []
    names = {name for name, text in QUERIES.items() if text in ours}
    assert {"claim_runs", "finish_run", "skip_tick", "try_lock_session"} <= names
    assert "unlock" in names
