"""What a run costs: round trips and time of a full job run against a bare try-lock + unlock.

Run on demand: ``python benchmarks/bench_runner.py [--runs N]``. Uses DATABASE_URL or starts a
throwaway PostgreSQL. Every number is printed next to a baseline measured in the same run.

Round trips are counted by Django's execute wrappers on every connection the run opens,
plus the statements Django itself sends when a connection is set up.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.django_setup import setup

STATEMENTS: Counter[str] = Counter()


def count_statements(execute: Callable[..., Any], sql: str, *args: Any) -> Any:
    STATEMENTS["statements"] += 1
    return execute(sql, *args)


def count_every_statement() -> None:
    from django.db.backends.signals import connection_created

    connection_created.connect(
        lambda sender, connection, **kw: connection.execute_wrappers.append(count_statements),
        weak=False,
    )


def timed(label: str, func: Callable[[], Any], runs: int) -> tuple[float, float]:
    """Median milliseconds per call, and statements per call."""
    func()  # warm up
    STATEMENTS.clear()
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        func()
        samples.append((time.perf_counter() - started) * 1000)
    per_call = STATEMENTS["statements"] / runs
    return statistics.median(samples), per_call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=300)
    options = parser.parse_args()
    server, _url = setup()
    count_every_statement()
    try:
        report(options.runs)
    finally:
        if server is not None:
            server.stop()


def report(runs: int) -> None:
    import pglock
    from django.db import connection

    from django_advisory_cron import locked_task
    from django_advisory_cron.keys import job_key
    from django_advisory_cron.lockconn import open_lock_connection

    key = job_key("bench")
    params = key.params

    @locked_task(name="bench", scope="session")
    def bench_session() -> None:
        """A no-op job: the run's own cost is what is measured."""

    @locked_task(name="bench_xact", scope="transaction")
    def bench_xact() -> None:
        """The same in transaction scope."""

    lock_connection = open_lock_connection("default")

    def raw_try_unlock() -> None:
        with lock_connection.cursor() as cursor:
            cursor.execute(f"SELECT pg_try_advisory_lock({key.sql})", params)
            cursor.execute(f"SELECT pg_advisory_unlock({key.sql})", params)

    def raw_on_django_connection() -> None:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT pg_try_advisory_lock({key.sql})", params)
            cursor.execute(f"SELECT pg_advisory_unlock({key.sql})", params)

    def raw_connect_try_unlock() -> None:
        fresh = open_lock_connection("default")
        with fresh.cursor() as cursor:
            cursor.execute(f"SELECT pg_try_advisory_lock({key.sql})", params)
            cursor.execute(f"SELECT pg_advisory_unlock({key.sql})", params)
        fresh.close()

    def pglock_advisory() -> None:
        with pglock.advisory("bench", timeout=0, side_effect=pglock.Return):
            pass

    connection.close()
    connection.ensure_connection()
    rows = [
        ("bare try-lock + unlock, open connection", raw_try_unlock),
        ("bare connect + try-lock + unlock + close", raw_connect_try_unlock),
        ("bare try-lock + unlock, Django's connection", raw_on_django_connection),
        ("django-pglock advisory(timeout=0)", pglock_advisory),
        ("run, session scope (own lock connection)", bench_session.run),
        ("run, transaction scope", bench_xact.run),
    ]
    results = [(label, *timed(label, func, runs)) for label, func in rows]  # type: ignore[arg-type]
    # A loser: the lock is held elsewhere, the whole skip is one statement.
    holder = open_lock_connection("default")
    with holder.cursor() as cursor:
        cursor.execute(f"SELECT pg_advisory_lock({key.sql})", params)
    results.append(("skip (locked elsewhere), session scope", *timed("", bench_session.run, runs)))
    holder.close()
    lock_connection.close()

    base_ms = results[0][1]
    connect_ms, connect_statements = results[1][1], results[1][2]
    print(f"{runs} runs each; median ms per call; statements counted by Django wrappers\n")
    print(f"{'':45} {'ms':>8} {'x bare':>8} {'x conn':>8} {'stmts':>6}")
    for label, ms, statements in results:
        print(f"{label:45} {ms:8.2f} {ms / base_ms:8.2f} {ms / connect_ms:8.2f} {statements:6.1f}")
    session_statements = results[4][2]
    print(
        f"\nextra round trips of a session-scope run over bare connect + try-lock + unlock: "
        f"{session_statements - connect_statements:+.1f}"
    )


if __name__ == "__main__":
    main()
