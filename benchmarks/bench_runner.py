"""What a run costs, as ratios against a bare try-lock + unlock measured in the same run.

Run on demand: ``python benchmarks/bench_runner.py [--runs N] [--processes N]``. Uses
DATABASE_URL or starts a throwaway PostgreSQL. Every in-process row is a median of ``--runs``
calls after a warm-up call, so session-scope rows run on a warm lock connection; the last row
compares a ``runlocked`` process for a no-op job with the same no-op command run bare.

Statements are counted by Django's execute wrappers on every connection the run opens, plus
the statements Django itself sends when a connection is set up.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.django_setup import setup  # noqa: E402

STATEMENTS: Counter[str] = Counter()

#: (label, goal as "x bare", or None when the row is for reference only)
Row = tuple[str, float, float, "float | None"]


def count_statements(execute: Callable[..., Any], sql: str, *args: Any) -> Any:
    STATEMENTS["statements"] += 1
    return execute(sql, *args)


def count_every_statement() -> None:
    from django.db.backends.signals import connection_created

    connection_created.connect(
        lambda sender, connection, **kw: connection.execute_wrappers.append(count_statements),
        weak=False,
    )


def timed(funcs: list[Callable[[], Any]], runs: int) -> list[tuple[float, float]]:
    """Median milliseconds per call, and statements per call, of each function.

    The functions take turns, call by call, so a load change on a shared machine affects
    every row alike and the ratios stay comparable."""
    samples: list[list[float]] = [[] for _ in funcs]
    statements = [0] * len(funcs)
    for func in funcs:
        func()  # warm up (and warm the lock connection)
    for _ in range(runs):
        for index, func in enumerate(funcs):
            STATEMENTS.clear()
            started = time.perf_counter()
            func()
            samples[index].append((time.perf_counter() - started) * 1000)
            statements[index] += STATEMENTS["statements"]
    return [
        (statistics.median(values), count / runs)
        for values, count in zip(samples, statements, strict=True)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument(
        "--processes", type=int, default=10, help="runs of each process (0 skips the row)"
    )
    options = parser.parse_args()
    server, url = setup()
    count_every_statement()
    try:
        rows = in_process(options.runs)
        process_row = processes(url, options.processes) if options.processes else None
    finally:
        if server is not None:
            server.stop()
    print_table(options.runs, rows, process_row, options.processes)


def in_process(runs: int) -> list[Row]:
    import pglock
    from django.db import connection

    from django_advisory_cron import advisory_lock, locked_task
    from django_advisory_cron.core.keys import job_key
    from django_advisory_cron.db.connections import open_lock_connection

    key = job_key("bench")
    params = key.params

    @locked_task(name="bench", scope="session")
    def bench_session() -> None:
        """A no-op job: the run's own cost is what is measured."""

    @locked_task(name="bench_skip", scope="session")
    def bench_skip() -> None:
        """Never runs: its lock is held elsewhere for the whole benchmark."""

    @locked_task(name="bench_xact", scope="transaction")
    def bench_xact() -> None:
        """The same in transaction scope."""

    lock_connection = open_lock_connection("default")

    def bare() -> None:
        with lock_connection.cursor() as cursor:
            cursor.execute(f"SELECT pg_try_advisory_lock({key.sql})", params)
            cursor.execute(f"SELECT pg_advisory_unlock({key.sql})", params)

    def bare_connect() -> None:
        fresh = open_lock_connection("default")
        with fresh.cursor() as cursor:
            cursor.execute(f"SELECT pg_try_advisory_lock({key.sql})", params)
            cursor.execute(f"SELECT pg_advisory_unlock({key.sql})", params)
        fresh.close()

    def session_lock() -> None:
        with advisory_lock("bench-lock", scope="session"):
            pass

    def pglock_advisory() -> None:
        with pglock.advisory("bench", timeout=0, side_effect=pglock.Return):
            pass

    connection.close()
    connection.ensure_connection()
    # A loser: the lock is held elsewhere; the whole skip is one statement.
    holder = open_lock_connection("default")
    skip_key = job_key("bench_skip")
    with holder.cursor() as cursor:
        cursor.execute(f"SELECT pg_advisory_lock({skip_key.sql})", skip_key.params)
    rows: list[tuple[str, Callable[[], Any], float | None]] = [
        ("bare try-lock + unlock, open connection", bare, None),
        ("bare connect + try-lock + unlock + close", bare_connect, None),
        ("django-pglock advisory(timeout=0)", pglock_advisory, None),
        ("advisory_lock() session scope, empty body", session_lock, 1.05),
        ("@locked_task run, session scope", bench_session.run, 1.3),
        ("skip (locked elsewhere), session scope", bench_skip.run, 0.6),
        ("@locked_task run, transaction scope", bench_xact.run, 2.0),
    ]
    # The connecting row takes its turns apart from the others: each call starts a server
    # backend and leaves one exiting behind it, which would slow whichever row came next.
    apart = [index for index, (_label, func, _goal) in enumerate(rows) if func is bare_connect]
    together = timed(
        [func for index, (_l, func, _g) in enumerate(rows) if index not in apart], runs
    )
    alone = timed([bare_connect], runs)
    results = [alone.pop(0) if index in apart else together.pop(0) for index in range(len(rows))]
    holder.close()
    lock_connection.close()
    return [
        (label, ms, statements, goal)
        for (label, _func, goal), (ms, statements) in zip(rows, results, strict=True)
    ]


def processes(url: str, runs: int) -> tuple[float, float]:
    """Median seconds of ``manage.py noop`` and of ``manage.py runlocked noop``, alternating."""
    manage = ROOT / "tests" / "manage.py"
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    samples: dict[str, list[float]] = {"bare": [], "runlocked": []}
    commands = {
        "bare": [sys.executable, str(manage), "noop"],
        "runlocked": [sys.executable, str(manage), "runlocked", "noop"],
    }
    for index in range(runs + 1):
        for name, command in commands.items():
            started = time.perf_counter()
            subprocess.run(command, env=env, check=True, capture_output=True)
            if index:  # the first round warms the disk cache
                samples[name].append(time.perf_counter() - started)
    return statistics.median(samples["bare"]), statistics.median(samples["runlocked"])


def print_table(
    runs: int, rows: list[Row], process_row: tuple[float, float] | None, process_runs: int
) -> None:
    base_ms = rows[0][1]
    print(f"{runs} runs each; median ms per call; statements counted by Django wrappers\n")
    print(f"{'':45} {'ms':>8} {'x bare':>8} {'goal':>6} {'stmts':>6}  met")
    for label, ms, statements, goal in rows:
        ratio = ms / base_ms
        goal_text = f"{goal:.2f}" if goal is not None else ""
        met = "" if goal is None else ("yes" if ratio <= goal else "no")
        print(f"{label:45} {ms:8.2f} {ratio:8.2f} {goal_text:>6} {statements:6.1f}  {met}")
    if process_row is not None:
        bare_s, runlocked_s = process_row
        ratio = runlocked_s / bare_s
        print(
            f"\nprocesses ({process_runs} runs each, median s): manage.py noop {bare_s:.3f}, "
            f"runlocked noop {runlocked_s:.3f}: {ratio:.2f} x (goal 1.10: "
            f"{'yes' if ratio <= 1.10 else 'no'})"
        )


if __name__ == "__main__":
    main()
