"""A claim is never JIT-compiled.

The claim function keeps a generic plan of its statement (it is planned once per connection).
A generic plan is costed without the call's values, from the run table's statistics, so its
estimate grows with the history and can pass ``jit_above_cost`` (100,000 by default; 4 jobs
with a million rows did), and a server with JIT (Debian's and most distributions' packages)
then compiled the statement on every call: about 100 ms of the server's CPU for every run and
skip (a run of a no-op job took 110 to 170 ms instead of 2.5 ms).

The test makes any statement worth compiling (``jit_above_cost = 0`` for the test database)
and reads the plans ``auto_explain`` logs while a job runs and skips through its public entry
point: the run's finish is compiled (so JIT was on), its claims never are."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest
from django.db import connection

from django_advisory_cron import registry
from django_advisory_cron.db.connections import close_lock_connections
from django_advisory_cron.models import RunStatus

pytestmark = pytest.mark.usefixtures("transactional_db", "fresh_registry")

TICK = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)

#: For the test database's new connections: every statement is worth compiling, and every
#: plan (a function's statements too) is logged with what JIT did for it.
SETTINGS = {
    "session_preload_libraries": "auto_explain",
    "auto_explain.log_min_duration": "0",
    "auto_explain.log_analyze": "on",
    "auto_explain.log_nested_statements": "on",
    "jit": "on",
    "jit_above_cost": "0",
}


@pytest.fixture
def plans_logged(raw_connect: Any, postgres_server: Any) -> Iterator[Any]:
    """The test database's new connections log their plans; returns a function reading the
    plans logged since, each as ``(statement, plan)``."""
    if postgres_server is None:
        pytest.skip("reads the server's log: needs the suite's own throwaway server")
    admin = raw_connect()
    if not admin.execute("SELECT pg_jit_available()").fetchone()[0]:
        pytest.skip("this PostgreSQL has no JIT (built without LLVM, or jit_provider missing)")
    try:
        admin.execute("LOAD 'auto_explain'")
    except psycopg.Error as error:  # a contrib module: skipped where it is not installed
        pytest.skip(f"auto_explain cannot be loaded: {error}")
    name = connection.settings_dict["NAME"]
    database = admin.execute("SELECT quote_ident(%s)", [name]).fetchone()[0]
    for setting, value in SETTINGS.items():
        admin.execute(f"ALTER DATABASE {database} SET {setting} = '{value}'")
    # The connections to come read the settings at login: the lock connections, and
    # Django's (a transaction-scope claim goes there).
    close_lock_connections()
    connection.close()
    start = postgres_server.logfile.stat().st_size

    def plans() -> list[tuple[str, str]]:
        with postgres_server.logfile.open(encoding="utf-8", errors="replace") as log:
            log.seek(start)
            text = log.read()
        entries = re.split(r"^\S.*?LOG:\s+duration: [\d.]+ ms\s+plan:\n", text, flags=re.M)
        found = []
        for entry in entries[1:]:
            query = re.search(r"Query Text: (.*)", entry)
            found.append((query.group(1).strip() if query else "", entry))
        return found

    try:
        yield plans
    finally:
        for setting in SETTINGS:
            admin.execute(f"ALTER DATABASE {database} RESET {setting}")
        close_lock_connections()
        connection.close()


def test_a_claim_is_never_jit_compiled_where_every_other_statement_is(plans_logged: Any) -> None:
    job = registry.get("quick_scheduled")
    assert job.run(now=TICK).status == RunStatus.SUCCEEDED
    assert job.run(now=TICK + timedelta(seconds=3)).status == RunStatus.SKIPPED_TICK
    assert job.run(now=TICK + timedelta(minutes=5), scope="transaction").status == (
        RunStatus.SUCCEEDED
    )
    plans = plans_logged()
    claims = [plan for query, plan in plans if query.startswith("WITH i AS (")]
    finishes = [plan for query, plan in plans if query.startswith("WITH w AS (UPDATE")]
    assert len(claims) >= 3, [query for query, _plan in plans]
    assert finishes and all("JIT:" in plan for plan in finishes), finishes  # JIT was on
    assert [plan for plan in claims if "JIT:" in plan] == []


def test_migration_0031_turns_jit_off_for_a_claim_function_installed_before_it(
    manage: Any, raw_connect: Any
) -> None:
    """A database migrated before 0031 has the claim function without the setting (0031 undone
    takes it away, as 0027 installed it then); 0031 gives it."""
    observer = raw_connect()

    def settings() -> list[str]:
        row = observer.execute(
            "SELECT proconfig FROM pg_proc WHERE proname = 'django_advisory_cron_claim'"
        ).fetchone()
        assert row is not None
        return sorted(row[0] or [])

    assert settings() == ["jit=off", "plan_cache_mode=force_generic_plan"]
    try:
        back = manage("migrate", "django_advisory_cron", "0030")
        assert back.returncode == 0, back.stderr
        assert settings() == ["plan_cache_mode=force_generic_plan"]
    finally:
        forth = manage("migrate", "django_advisory_cron")
    assert forth.returncode == 0, forth.stderr
    assert settings() == ["jit=off", "plan_cache_mode=force_generic_plan"]
