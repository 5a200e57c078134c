"""What ``SYNCHRONOUS_COMMIT`` costs: a run whose claim and finish wait for a synchronous
standby, against the same run that does not wait, measured in the same run.

Run on demand: ``python benchmarks/bench_durable_claims.py [--runs N] [--repeats N]``.
Starts a durable throwaway primary (``fsync`` on, ``pg_stat_statements``; see
``benchmarks/measure.py``) and a streaming standby of it on loopback, named in the primary's
``synchronous_standby_names`` with ``synchronous_commit = local`` there: what an operator sets
so that only the app's claims wait for the standby. Each row is divided by the run without the
option (``default``), and by the write floor that waits for the standby too (``(c) on``, an
``INSERT ... RETURNING`` and an ``UPDATE`` with ``synchronous_commit = on``). The rows take
turns call by call (medians); statements per call are counted by the server. A skip writes
nothing, so it waits for nothing: its row shows it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.measure import Floors, Observer, interleaved, start_durable_postgres

DEFAULT, FLOOR_ON = "run, session scope, default", "(c) on"


@dataclass
class Row:
    label: str
    action: Callable[[], Any]
    ms: list[float] = field(default_factory=list)
    statements: float = 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200, help="timed calls per row and repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--count", type=int, default=50, help="calls per row for statements")
    options = parser.parse_args()
    from django_advisory_cron.testing import start_standby

    primary = start_durable_postgres()
    try:
        with start_standby(primary, synchronous=True, synchronous_commit="local") as standby:
            os.environ["DATABASE_URL"] = primary.url("postgres")
            from benchmarks.django_setup import setup

            setup()
            print(
                f"standby {standby.name} on loopback, synchronous for the commits that ask "
                "(synchronous_standby_names names it; synchronous_commit = local on the primary)"
            )
            rows = measure(primary.url("postgres"), options)
    finally:
        primary.stop()
    print_table(rows, options)


def measure(url: str, options: argparse.Namespace) -> list[Row]:
    import psycopg
    from django.conf import settings
    from django.test import override_settings

    from django_advisory_cron import locked_task

    @locked_task(name="bench", scope="session")
    def bench_session() -> None:
        """A no-op job: the run's own cost is what is measured."""

    @locked_task(name="bench_xact", scope="transaction")
    def bench_xact() -> None:
        """The same in transaction scope."""

    @locked_task(name="bench_skip", scope="session")
    def bench_skip() -> None:
        """Never runs: its lock is held elsewhere for the whole benchmark."""

    holder = psycopg.connect(url, autocommit=True)
    holder.execute(f"SELECT pg_advisory_lock({bench_skip.key.sql})", bench_skip.key.params)

    def under(level: str | None, job: Any, skipped: bool = False) -> Callable[[], None]:
        waiting = override_settings(
            ADVISORY_CRON={**settings.ADVISORY_CRON, "SYNCHRONOUS_COMMIT": level}
        )

        def call() -> None:
            with waiting:
                result = job.run()
            assert result.skipped if skipped else result.ran, result

        return call

    floors = Floors(url)
    waiting_floors = Floors(url)
    waiting_floors.conn.execute("SET synchronous_commit = on")
    rows = [
        Row("(c) write floor, local", floors.write),
        Row(FLOOR_ON, waiting_floors.write),
        Row(DEFAULT, under(None, bench_session)),
        Row('run, session scope, "remote_write"', under("remote_write", bench_session)),
        Row('run, session scope, "on"', under("on", bench_session)),
        Row('run, session scope, "remote_apply"', under("remote_apply", bench_session)),
        Row("run, transaction scope, default", under(None, bench_xact)),
        Row('run, transaction scope, "on"', under("on", bench_xact)),
        Row("skip (locked elsewhere), default", under(None, bench_skip, skipped=True)),
        Row('skip (locked elsewhere), "on"', under("on", bench_skip, skipped=True)),
    ]
    observer = Observer(url)
    try:
        for _repeat in range(options.repeats):
            measured = interleaved([row.action for row in rows], options.runs)
            for row, ms in zip(rows, measured, strict=True):
                row.ms.append(ms)
        for row in rows:
            row.statements = observer.per_call(row.action, options.count)
    finally:
        observer.close()
        holder.close()
        floors.close()
        waiting_floors.conn.close()
    return rows


def print_table(rows: list[Row], options: argparse.Namespace) -> None:
    by_label = {row.label: row for row in rows}
    print(
        f"\n{options.runs} calls per row and repeat, {options.repeats} repeats; median ms per "
        f"call; statements per call over {options.count} calls (counted by the server)\n"
    )
    heading = f"{'ms':>6} {'x default, per repeat':>24} {'median':>7} {'x (c) on':>9}"
    print(f"{'':40} {heading} {'stmts':>6}")
    for row in rows:
        ratios = " / ".join(
            f"{mine / base:.2f}" for mine, base in zip(row.ms, by_label[DEFAULT].ms, strict=True)
        )
        median = statistics.median(
            mine / base for mine, base in zip(row.ms, by_label[DEFAULT].ms, strict=True)
        )
        floor = statistics.median(
            mine / base for mine, base in zip(row.ms, by_label[FLOOR_ON].ms, strict=True)
        )
        print(
            f"{row.label:40} {statistics.median(row.ms):6.2f} {ratios:>24} {median:7.2f} "
            f"{floor:9.2f} {row.statements:6.1f}"
        )
    print(
        "\ndefault: the run without SYNCHRONOUS_COMMIT (its commits wait for the primary's disk "
        "only); (c) on: the write floor whose two commits wait for the standby too"
    )


if __name__ == "__main__":
    main()
