"""The schedules' migration (the definition rules: tests/unit/test_schedule_definitions.py)."""

from __future__ import annotations

from typing import Any

import psycopg


def test_the_migration_goes_back_and_forth(scratch_database_url: str, manage: Any) -> None:
    """Migration 0010 (the schedules' table, its triggers) is reversible, and its trigger
    stamps a write with the database's clock and notifies the listening workers."""
    for target in ([], ["django_advisory_cron", "0009"], []):
        done = manage("migrate", "-v0", *target, url=scratch_database_url)
        assert done.returncode == 0, done.stderr
    with psycopg.connect(scratch_database_url, autocommit=True) as listener:
        listener.execute("LISTEN django_advisory_cron_schedules")
        with psycopg.connect(scratch_database_url, autocommit=True) as writer:
            written, clock = writer.execute(
                "INSERT INTO django_advisory_cron_schedule (name, override, job, command, args,"
                " kwargs, cron, every, timezone, enabled, catch_up, deliver, description,"
                " changed_by, changed) VALUES ('x', true, '', '', '[]', '{}', '', NULL, '',"
                " true, '', '', '', '', '2000-01-01') RETURNING changed, clock_timestamp()"
            ).fetchone() or (None, None)
        assert written is not None and clock is not None and written.year > 2000
        assert [notice.channel for notice in listener.notifies(timeout=5, stop_after=1)] == [
            "django_advisory_cron_schedules"
        ]
