"""What a run, a skip and a lock cost, as ratios against floors measured in the same run.

Run on demand: ``python benchmarks/bench_runner.py [--runs N] [--repeats N] [--processes N]``.
Uses DATABASE_URL or starts a durable throwaway PostgreSQL (``fsync`` and
``synchronous_commit`` on; see ``benchmarks/measure.py``). Each row is divided by the floor it
is held against: a recorded run by (c), the write floor (an ``INSERT ... RETURNING`` and an
``UPDATE``, two commits), a skip by one ``SELECT 1`` round trip, a lock by (a), a bare
try-lock + unlock pair. The rows take turns call by call, ``--runs`` calls each after a
warm-up call (medians), and the whole is repeated ``--repeats`` times; each repeat's ratio is
printed. Statements per call are counted by the server (``pg_stat_statements``, reset before
each row) over ``--count`` calls of that row alone. The last row compares a ``runlocked``
process for a no-op job with the same no-op command run bare.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.django_setup import setup  # noqa: E402
from benchmarks.measure import Floors, Observer, interleaved, opening  # noqa: E402


@dataclass
class Row:
    label: str
    action: Callable[[], Any]
    #: The label of the row this one is divided by (None: a floor itself).
    floor: str | None = None
    goal: float | None = None
    #: Median ms per repeat, and the floor's in the same turns.
    ms: list[float] = field(default_factory=list)
    base: list[float] = field(default_factory=list)
    statements: float = 0.0
    #: Mean ms planning and executing the claim statement, over the statement-count calls.
    claim: tuple[float, float] | None = None


WRITE, LOCK, ROUND_TRIP = "(c) write floor", "(a) bare try-lock + unlock", "SELECT 1 round trip"
SESSION_RUN = "@locked_task run, session scope"
#: How a run's claim statement (queries.sql's claim_runs) begins: a call of the claim
#: function, whose execution includes planning its statement when the connection has no plan
#: of it yet.
CLAIM = opening("claim_runs")
SHORT = {WRITE: "(c)", LOCK: "(a)", ROUND_TRIP: "S1", SESSION_RUN: "run"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=300, help="timed calls per row and repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--count", type=int, default=50, help="calls per row for statements")
    parser.add_argument(
        "--processes", type=int, default=10, help="runs of each process (0 skips the row)"
    )
    options = parser.parse_args()
    server, url = setup()
    observer = Observer(url)
    floors = Floors(url)
    try:
        rows = in_process(url, floors, observer, options)
        process_row = processes(url, options.processes) if options.processes else None
    finally:
        floors.close()
        observer.close()
        if server is not None:
            server.stop()
    print_table(rows, process_row, options)


def in_process(
    url: str, floors: Floors, observer: Observer, options: argparse.Namespace
) -> list[Row]:
    import pglock
    import psycopg
    from django.conf import settings
    from django.test import override_settings

    from django_advisory_cron import advisory_lock, locked_task
    from django_advisory_cron.db.connections import close_lock_connections

    @locked_task(name="bench", scope="session")
    def bench_session() -> None:
        """A no-op job: the run's own cost is what is measured."""

    @locked_task(name="bench_capture", scope="session", capture=True)
    def bench_capture() -> None:
        """The same, keeping what it logs (it logs nothing): capture's cost when unused."""

    @locked_task(name="bench_retries", scope="session", retries=3)
    def bench_retries() -> None:
        """The same, with retries it never needs: a retry policy's cost on success."""

    @locked_task(name="bench_xact", scope="transaction")
    def bench_xact() -> None:
        """The same in transaction scope."""

    @locked_task(name="bench_skip", scope="session")
    def bench_skip() -> None:
        """Never runs: its lock is held elsewhere for the whole benchmark."""

    @locked_task(name="bench_taken", scope="session", every=timedelta(hours=1))
    def bench_taken() -> None:
        """Runs once, at the first call; every later call finds the same tick taken."""

    tick_time = datetime.now().astimezone().replace(minute=0, second=1, microsecond=0)
    assert bench_taken.run(now=tick_time).ran

    def tick_taken() -> None:
        assert bench_taken.run(now=tick_time).skipped_tick

    holder = psycopg.connect(url, autocommit=True)
    holder.execute(f"SELECT pg_advisory_lock({bench_skip.key.sql})", bench_skip.key.params)

    def locked_elsewhere() -> None:
        assert bench_skip.run().skipped

    def session_lock() -> None:
        with advisory_lock("bench-lock", scope="session"):
            pass

    def pglock_advisory() -> None:
        """django-pglock's session lock, on Django's own connection: for reference."""
        with pglock.advisory("bench-pglock", timeout=0, side_effect=pglock.Return):
            pass

    rows = [
        Row(WRITE, floors.write),
        Row(LOCK, floors.lock, WRITE),
        Row(ROUND_TRIP, floors.select_one, WRITE),
        Row(SESSION_RUN, bench_session.run, WRITE, 1.3),
        Row("  the same, capture=True, logging nothing", bench_capture.run, SESSION_RUN),
        Row("  the same, retries=3, succeeding", bench_retries.run, SESSION_RUN),
        Row("@locked_task run, transaction scope", bench_xact.run, WRITE, 1.6),
        Row("skip, locked elsewhere", locked_elsewhere, ROUND_TRIP, 2),
        Row("skip, tick already taken", tick_taken, ROUND_TRIP, 2),
        Row("advisory_lock() session, empty body, warm", session_lock, LOCK, 1.5),
        Row("django-pglock advisory(), for reference", pglock_advisory, LOCK),
    ]
    # A process that is not a scheduler (LOCK_POOL_SIZE unset, the default) keeps one lock
    # connection, closed after 2 s unused; it takes turns with (a) alone, from a cold start.
    cold = Row("advisory_lock() session, not a scheduler", session_lock, LOCK, 1.5)
    cold_floor = Row(LOCK, floors.lock)
    not_a_scheduler = override_settings(
        ADVISORY_CRON={k: v for k, v in settings.ADVISORY_CRON.items() if k != "LOCK_POOL_SIZE"}
    )
    for _repeat in range(options.repeats):
        for row, ms in zip(rows, interleaved([r.action for r in rows], options.runs), strict=True):
            row.ms.append(ms)
        with not_a_scheduler:
            close_lock_connections()
            cold_ms, floor_ms = interleaved([cold.action, cold_floor.action], options.runs)
        # Its connection binds its parameters on the server and prepares nothing (see
        # connections.checkout): the next repeat's rows must not inherit it.
        close_lock_connections()
        cold.ms.append(cold_ms)
        cold_floor.ms.append(floor_ms)
    for row in rows:
        row.statements = observer.per_call(row.action, options.count)
        row.claim = observer.plan_and_execution(CLAIM)
    with not_a_scheduler:
        close_lock_connections()
        cold.statements = observer.per_call(cold.action, options.count)
        cold.claim = observer.plan_and_execution(CLAIM)
    holder.close()
    by_label = {row.label: row for row in rows}
    for row in rows:
        if row.floor is not None:
            row.base = by_label[row.floor].ms
    cold.base = cold_floor.ms
    return [*rows, cold]


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
    rows: list[Row], process_row: tuple[float, float] | None, options: argparse.Namespace
) -> None:
    print(
        f"{options.runs} calls per row and repeat, {options.repeats} repeats; median ms per "
        f"call; statements per call over {options.count} calls\n"
    )
    print(
        f"{'':45} {'ms':>6} {'x floor, per repeat':>20} {'median':>10} {'goal':>5} "
        f"{'stmts':>6} {'claim plan / exec ms':>21}"
    )
    for row in rows:
        ratios = median_text = goal = ""
        if row.floor is not None:
            per_repeat = [mine / base for mine, base in zip(row.ms, row.base, strict=True)]
            ratios = " / ".join(f"{ratio:.2f}" for ratio in per_repeat)
            median = statistics.median(per_repeat)
            median_text = f"{median:.2f} {SHORT[row.floor]}"
            if row.goal is not None:
                goal = f"{row.goal:g} {'met' if median <= row.goal else 'NOT'}"
        claim = "" if row.claim is None else f"{row.claim[0]:.3f} / {row.claim[1]:.3f}"
        print(
            f"{row.label:45} {statistics.median(row.ms):6.2f} {ratios:>20} {median_text:>10} "
            f"{goal:>7} {row.statements:6.1f} {claim:>21}"
        )
    print(
        "\n(c) write floor, (a) bare pair, S1 SELECT 1 round trip, run the session-scope run; "
        "goal: at most x floor; claim: the mean time the server spent planning and executing "
        "the claim statement per call of the row (pg_stat_statements)"
    )
    if process_row is not None:
        bare_s, runlocked_s = process_row
        ratio = runlocked_s / bare_s
        print(
            f"\nprocesses ({options.processes} runs each, median s): manage.py noop "
            f"{bare_s:.3f}, runlocked noop {runlocked_s:.3f}: {ratio:.2f} x (goal 1.10: "
            f"{'met' if ratio <= 1.10 else 'NOT'})"
        )


if __name__ == "__main__":
    main()
