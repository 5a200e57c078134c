"""Lock keys as PostgreSQL sees them: plain SQL's hashtext and what pg_locks shows (the keys
alone: tests/unit/test_keys.py)."""

from __future__ import annotations

from django_advisory_cron import advisory_lock, job_key
from django_advisory_cron.core.keys import LockKey


def test_pg_locks_shows_the_key(raw_connect) -> None:
    """The server reports exactly the (classid, objid, objsubid) we compute."""
    key = LockKey("send_daily_digest")
    observer = raw_connect()
    with advisory_lock(key, scope="session") as lock:
        assert lock.acquired
        row = observer.execute(
            "SELECT classid::bigint, objid::bigint, objsubid FROM pg_locks "
            "WHERE locktype = 'advisory' AND granted"
        ).fetchall()
    assert row == [key.lock_ids]


def test_hashtext_key_interoperates_with_plain_sql(raw_connect) -> None:
    """A script using pg_try_advisory_lock(hashtext(name)) and our hashtext job share a lock."""
    script = raw_connect()
    assert script.execute("SELECT pg_try_advisory_lock(hashtext('nightly'))").fetchone() == (True,)
    with advisory_lock(job_key("nightly", mode="hashtext"), scope="session") as lock:
        assert not lock.acquired
    script.execute("SELECT pg_advisory_unlock(hashtext('nightly'))")
    with advisory_lock(job_key("nightly", mode="hashtext"), scope="session") as lock:
        assert lock.acquired
