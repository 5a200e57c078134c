"""How the whole system scales: N ``cronworker`` replicas x M jobs on one PostgreSQL, and many
``runlocked`` processes racing a few jobs.

Run on demand: ``python benchmarks/bench_scale.py [--workers 3] [--jobs 50] [--every 5]
[--seconds 17] [--racers 50] [--race-jobs 20] [--history ROWS] [--beat]``; ``--workers 20
--jobs 500`` is the 10,000 lock attempts per tick case. With ``--history``, the run table
holds that many rows of the jobs' past ticks before each configuration (as on a site that
has run them for months): what the claims cost does not follow the history's size. Uses
DATABASE_URL or starts a durable throwaway PostgreSQL (``benchmarks/measure.py``; then the
database's CPU time is read from ``/proc``). Each worker configuration runs for ``--seconds``
and is repeated with N doubled and with M doubled, so the growth per doubling is printed
next to the base figures of the same run.

Per configuration:

- runs per tick per job: every ``(job, tick)`` whose tick fell inside the window must have
  exactly one run (``min``/``max``); ``missed`` counts ticks with none.
- tick-start latency: the run row's ``started`` minus its tick (database clock), p50/p99;
  and to the body's start (``body``), which each empty body records itself (the worker's
  clock, the same machine's as the server's).
- statements per tick per replica: the top-level statements the server ran in the database
  over the window (``pg_stat_statements``, this benchmark's own readings left out), per tick
  (the window's length in intervals), per worker.
- rows written per tick: history rows (runs and skips) of the ticks inside the window, per
  tick; runs per tick beside it.
- backends in use: connections to the database, sampled every 0.2 s (peak).
- claims' server time per tick: milliseconds the server spent planning and executing the
  statements that claim ticks (``CLAIMS``: every variant of the claim, and the look a worker
  takes before claiming the jobs dealt to others) over the window (``pg_stat_statements``,
  ``total_plan_time + total_exec_time``), per tick, all replicas together; printed below the
  table for each of the two, with their calls per tick.
- database CPU per tick: CPU seconds of the server's processes per tick.
- machine CPU per tick: CPU seconds every process of this machine used per tick (``/proc/stat``:
  the workers, the server, everything else), and what that is on its cores: a tick's work
  needs at least that long of wall time here, however it is spread (printed below the table),
  so a latency goal below it is this machine's limit, not the scheduler's.

With ``--beat``, each size runs under Celery beat too, in the same run and measured alike
(``beat_baseline.py``: one beat, Redis, as many Celery workers as replicas, each run's body
writing its row), and ours is printed as a multiple of it.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from psycopg import sql

from benchmarks.measure import CLAIMS, Observer, fill_history, opening
from benchmarks.workers import (
    MANAGE,
    RAN,
    Ticks,
    environment,
    migrated_database,
    percentile,
    ratio,
    start_workers,
    stop_workers,
    ticks_in,
    wait_for_claims,
    wait_for_rows,
)
from django_advisory_cron.testing import PostgresServer


def machine_cpu() -> float | None:
    """CPU seconds every process of this machine has used so far, all cores together (the busy
    columns of ``/proc/stat``'s first line); None without ``/proc``."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    # user nice system idle iowait irq softirq steal: all but idle and iowait are busy.
    busy = sum(int(value) for index, value in enumerate(fields[1:9]) if index not in (3, 4))
    return busy / os.sysconf("SC_CLK_TCK")


def server_cpu(server: PostgresServer | None) -> float | None:
    """CPU seconds used so far by the server's processes (the postmaster, its live children,
    and the children it has reaped); None when the server is not a local throwaway one."""
    if server is None or not Path("/proc").is_dir():
        return None
    try:
        postmaster = int((server.datadir / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, parent = int(entry.name), int(fields[1])
        if pid == postmaster:
            total += sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
        elif parent == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / ticks


class BackendSampler(threading.Thread):
    """Samples the number of connections to the database until stopped."""

    def __init__(self, observer: Observer) -> None:
        super().__init__(daemon=True)
        self.observer = observer
        self.samples: list[int] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(0.2):
            self.samples.append(self.observer.reading()[0])

    def stop(self) -> list[int]:
        self.stopping.set()
        self.join(10)
        return self.samples


@dataclass
class Figures(Ticks):
    label: str
    workers: int
    jobs: int
    statements: float | None
    #: Rows per tick that are not runs, by status (skips, runs interrupted at the stop).
    other_rows: dict[str, float]
    #: The statements sent most often over the window: calls per tick per replica, text.
    busiest: list[tuple[float, str]]
    backends: int
    #: Per kind of ``CLAIMS``: calls, and milliseconds planning and executing them, per tick,
    #: all replicas together (empty where the server does not time statements).
    claims: dict[str, tuple[float, float, float]]
    cpu_per_tick: float | None
    #: CPU seconds per tick of every process of the machine (``machine_cpu``).
    machine_cpu_per_tick: float | None
    #: Milliseconds from a tick to its body's start, p50 and p99 (None where not recorded).
    body_p50: float | None = None
    body_p99: float | None = None


def run_workers(
    url: str,
    server: PostgresServer | None,
    observer: Observer,
    size: tuple[int, int],
    every: float,
    seconds: float,
    busiest: int = 0,
    history: int = 0,
) -> Figures:
    """Start ``workers`` cronworkers with ``jobs`` jobs each for ``seconds`` (over a past of
    ``history`` run rows); measure."""
    workers, jobs = size
    env = environment(url, jobs, every, max_skew=min(1.0, every / 4))
    observer.conn.execute("TRUNCATE django_advisory_cron_jobrun")
    # The jobs' past: 1 in 100 failed, 1 in 1,000 interrupted, the rest succeeded.
    fill_history(
        observer.conn,
        prefix="bench_",
        jobs=jobs,
        rows=history,
        every=every,
        statuses=["failed"] + ["succeeded"] * 99,
        interrupted=1000,
    )
    with tempfile.TemporaryDirectory(prefix="advisory-cron-starts-") as starts:
        env["BENCH_WORKER_STARTS"] = starts  # each body writes its start there
        processes = start_workers(env, workers)
        # Measure from the first tick at which every worker is up, and from the tick after each
        # worker's first claim.
        wait_for_claims(observer.conn, workers, jobs, up=60 + 3 * workers, after=2 * every)
        return measure_window(
            server,
            observer,
            f"{workers} workers x {jobs} jobs",
            size,
            every,
            seconds,
            stop=lambda: stop_workers(processes),
            busiest=busiest,
            starts=Path(starts),
        )


def body_latencies(starts: Path, start: datetime, end: datetime, every: float) -> list[float]:
    """Milliseconds from each tick to its body's start, for the ticks wholly inside the window
    (as ``ticks_in`` takes them), from the bodies' own records: a start belongs to the last
    tick before it, so this holds while bodies start within the interval."""
    first, last = start.timestamp(), end.timestamp() - every
    latencies = []
    for record in starts.iterdir():
        for line in record.read_text().splitlines():
            started = float(line.split()[1])
            tick = math.floor(started / every) * every
            if first < tick <= last:
                latencies.append((started - tick) * 1000)
    return latencies


def run_beat(
    url: str,
    server: PostgresServer | None,
    observer: Observer,
    size: tuple[int, int],
    every: float,
    seconds: float,
) -> Figures:
    """The same jobs sent by one Celery beat to ``workers`` Celery workers
    (``beat_baseline.py``); measured alike."""
    from benchmarks import beat_baseline  # Celery and Redis only where asked for
    from benchmarks.beat_app import TABLE

    workers, jobs = size
    beat_baseline.prepare(observer.conn)
    with beat_baseline.beat_fleet(url, workers, jobs, every) as stop:
        wait_for_rows(observer.conn, jobs, timeout=60 + 2 * every, table=TABLE)  # a first tick
        return measure_window(
            server,
            observer,
            f"Celery beat, {workers} x {jobs}",
            size,
            every,
            seconds,
            stop=stop,
            table=TABLE,
        )


def measure_window(
    server: PostgresServer | None,
    observer: Observer,
    label: str,
    size: tuple[int, int],
    every: float,
    seconds: float,
    *,
    stop: Callable[[], None],
    busiest: int = 0,
    table: str = "django_advisory_cron_jobrun",
    starts: Path | None = None,
) -> Figures:
    """Measure ``seconds`` of a running fleet of ``size`` (workers, jobs), then ``stop`` it and
    read the runs of the ticks inside the window from ``table``, and the bodies' starts from
    ``starts`` (where the run's own start is not its body's)."""
    workers, jobs = size
    conn = observer.conn
    window_start = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
    sampler = BackendSampler(observer)
    observer.reset()
    sampler.start()
    cpu_before, machine_before = server_cpu(server), machine_cpu()
    time.sleep(seconds)
    statements, cpu_after = observer.reading()[1], server_cpu(server)
    machine_after = machine_cpu()
    claims = {
        kind: observer.statement_time(sorted({opening(name) for name in names}))
        for kind, names in CLAIMS.items()
    }
    backends = sampler.stop()
    top = observer.busiest(busiest)
    window_end = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
    stop()
    window = ticks_in(conn, window_start, window_end, every, jobs, table=table)
    statuses = conn.execute(
        sql.SQL(
            "SELECT status, count(*) FROM {} WHERE NOT status = ANY(%s) "
            "AND tick > %s AND tick <= %s - make_interval(secs => %s) GROUP BY status"
        ).format(sql.Identifier(table)),
        (list(RAN), window_start, window_end, every),
    ).fetchall()
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    machine = (
        None if machine_before is None or machine_after is None else machine_after - machine_before
    )
    window_ticks = seconds / every
    body: tuple[float | None, float | None] = (window.p50, window.p99)
    if starts is not None:
        delays = body_latencies(starts, window_start, window_end, every)
        body = (statistics.median(delays), percentile(delays, 0.99)) if delays else (None, None)
    return Figures(
        **vars(window),
        body_p50=body[0],
        body_p99=body[1],
        label=label,
        workers=workers,
        jobs=jobs,
        statements=None if statements is None else statements / window_ticks / workers,
        other_rows={status: count / window.ticks for status, count in statuses},
        busiest=[(calls / window_ticks / workers, query) for calls, query in top],
        backends=max(backends, default=0),
        claims={
            kind: (calls / window_ticks, plan / window_ticks, execution / window_ticks)
            for kind, timed in claims.items()
            if timed is not None and timed[0]
            for calls, plan, execution in [timed]
        },
        cpu_per_tick=None if cpu is None else cpu / window_ticks,
        machine_cpu_per_tick=None if machine is None else machine / window_ticks,
    )


def race_runlocked(url: str, observer: Observer, racers: int, jobs: int) -> dict[str, Any]:
    """``racers`` ``runlocked`` processes over ``jobs`` jobs (every 60 s, MAX_SKEW 30), all in
    one tick: each job must run exactly once in each tick the racers reached (on a loaded
    machine the last ones may start after the next minute's half, and take its tick), the
    rest skip."""
    env = environment(url, jobs, 60, max_skew=30)
    # Start well inside one tick's window, so every racer is matched to the same tick.
    while not 30 <= time.time() % 60 < 35:
        time.sleep(0.2)
    conn = observer.conn
    conn.execute("TRUNCATE django_advisory_cron_jobrun")
    sampler = BackendSampler(observer)
    observer.reset()
    sampler.start()
    started = time.monotonic()
    processes = [
        subprocess.Popen(
            [sys.executable, str(MANAGE), "runlocked", f"bench_{index % jobs}"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for index in range(racers)
    ]
    codes = [process.wait(300) for process in processes]
    elapsed = time.monotonic() - started
    backends = sampler.stop()
    statements = observer.reading()[1]
    rows = conn.execute(
        "SELECT job, tick, count(*) FILTER (WHERE status = ANY(%s)), count(*) "
        "FROM django_advisory_cron_jobrun GROUP BY job, tick",
        (list(RAN),),
    ).fetchall()
    runs = [int(ran) for _job, _tick, ran, _rows in rows]
    return {
        "runs_min": min(runs, default=0),
        "runs_max": max(runs, default=0),
        "ticks": len({tick for _job, tick, *_rest in rows}),
        "rows": sum(int(written) for *_rest, written in rows),
        "statements": statements,
        "exit_codes": {code: codes.count(code) for code in sorted(set(codes))},
        "seconds": elapsed,
        "backends": max(backends, default=0),
    }


def claims_ms(figures: Figures) -> float | None:
    """The claims' server time per tick, in milliseconds (None where it was not timed)."""
    if not figures.claims:
        return None
    return sum(plan + execution for _calls, plan, execution in figures.claims.values())


def growth(base: Figures, other: Figures) -> str:
    return (
        f"p50 {ratio(base.p50, other.p50)}, p99 {ratio(base.p99, other.p99)}, "
        f"statements/tick/replica {ratio(base.statements, other.statements)}, "
        f"rows/tick {ratio(base.rows_per_tick, other.rows_per_tick)}, "
        f"backends {ratio(base.backends, other.backends)}, "
        f"claims' server time/tick {ratio(claims_ms(base), claims_ms(other))}, "
        f"db CPU/tick {ratio(base.cpu_per_tick, other.cpu_per_tick)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--every", type=float, default=5, help="the jobs' interval, seconds")
    parser.add_argument("--seconds", type=float, default=17, help="window per configuration")
    parser.add_argument("--racers", type=int, default=50, help="runlocked processes (0: skip)")
    parser.add_argument("--race-jobs", type=int, default=20)
    parser.add_argument("--no-doubling", action="store_true", help="only the base size")
    parser.add_argument(
        "--busiest", type=int, default=0, help="print the N statements sent most often"
    )
    parser.add_argument(
        "--history",
        type=int,
        default=0,
        help="run rows in the table before each configuration (past ticks of its jobs, most "
        "of them successes): what a claim costs on a site with a long history",
    )
    parser.add_argument(
        "--beat",
        action="store_true",
        help="also run each size under Celery beat (one beat, Redis, as many Celery workers "
        "as replicas; needs redis-server and celery) and print ours as a ratio of it",
    )
    options = parser.parse_args()
    with migrated_database() as (url, server):
        observer = Observer(url)
        sizes = [(options.workers, options.jobs)]
        if not options.no_doubling:
            sizes += [(options.workers * 2, options.jobs), (options.workers, options.jobs * 2)]
        figures = [
            run_workers(
                url,
                server,
                observer,
                size,
                options.every,
                options.seconds,
                options.busiest,
                options.history,
            )
            for size in sizes
        ]
        beat = [
            run_beat(url, server, observer, size, options.every, options.seconds)
            for size in (sizes if options.beat else [])
        ]
        race = (
            race_runlocked(url, observer, options.racers, options.race_jobs)
            if options.racers
            else None
        )
        observer.close()
    print(observer.header())
    report(figures, beat, race, options)


def report(
    figures: list[Figures], beat: list[Figures], race: dict[str, Any] | None, options: Any
) -> None:
    print(f"jobs every {options.every:g} s; {options.seconds:g} s window per configuration\n")
    header = (
        f"{'':24} {'ticks':>5} {'runs/tick/job':>13} {'missed':>6} {'p50 ms':>8} "
        f"{'p99 ms':>8} {'body p50':>8} {'body p99':>8} {'stmts/tick/replica':>18} "
        f"{'rows/tick':>9} {'runs/tick':>9} {'backends':>8} {'claims ms/tick':>14} "
        f"{'db CPU s/tick':>13}"
    )
    print(header)
    for f in [*figures, *beat]:
        cpu = "n/a" if f.cpu_per_tick is None else f"{f.cpu_per_tick:.3f}"
        statements = "n/a" if f.statements is None else f"{f.statements:.1f}"
        timed = claims_ms(f)
        claims = "n/a" if timed is None else f"{timed:.1f}"
        body = ["n/a" if value is None else f"{value:.1f}" for value in (f.body_p50, f.body_p99)]
        print(
            f"{f.label:24} {f.ticks:>5} {f'{f.runs_min}..{f.runs_max}':>13} {f.missed:>6} "
            f"{f.p50:>8.1f} {f.p99:>8.1f} {body[0]:>8} {body[1]:>8} {statements:>18} "
            f"{f.rows_per_tick:>9.1f} {f.runs_per_tick:>9.1f} {f.backends:>8} {claims:>14} "
            f"{cpu:>13}"
        )
    for f in figures:
        if f.other_rows:
            others = ", ".join(f"{status} {count:.1f}" for status, count in f.other_rows.items())
            print(f"{f.label}: rows per tick that are not runs: {others}")
    cores = os.cpu_count() or 1
    for f in [*figures, *beat]:
        if f.machine_cpu_per_tick is not None:
            print(
                f"{f.label}: the machine's CPU per tick {f.machine_cpu_per_tick:.3f} s on "
                f"{cores} cores: each tick's work takes at least "
                f"{f.machine_cpu_per_tick / cores * 1000:.0f} ms of wall time here"
            )
    for f in figures:
        kinds = "; ".join(
            f"{kind} {calls:.1f} calls, {plan:.1f} ms planning + {execution:.1f} ms executing"
            for kind, (calls, plan, execution) in f.claims.items()
        )
        if kinds:
            print(f"{f.label}: claims' server time per tick: {kinds}")
    for f in figures:
        for calls, query in f.busiest:
            print(f"{f.label}: {calls:6.2f} per tick per replica: {query[:110]}")
    if beat:
        print(
            "\np50/p99: from the tick to the run's row (Celery beat's is written by its body); "
            "body p50/p99: to the body's start (beat_baseline.py). Ours as a multiple of "
            "Celery beat's, size by size:"
        )
        for ours, theirs in zip(figures, beat, strict=True):
            print(
                f"{ours.label}: body p50 {ratio(theirs.body_p50, ours.body_p50)}, "
                f"body p99 {ratio(theirs.body_p99, ours.body_p99)}, "
                f"db CPU/tick {ratio(theirs.cpu_per_tick, ours.cpu_per_tick)}, "
                f"statements/tick {ratio(theirs.statements, ours.statements)}, "
                f"backends {ratio(theirs.backends, ours.backends)}"
            )
    if len(figures) == 3:
        print(f"\nN doubled: {growth(figures[0], figures[1])}")
        print(f"M doubled: {growth(figures[0], figures[2])}")
    if race is not None:
        print(
            f"\n{options.racers} runlocked processes racing {options.race_jobs} jobs: runs per "
            f"job and tick {race['runs_min']}..{race['runs_max']} (ticks {race['ticks']}), "
            f"exit codes {race['exit_codes']}, {race['seconds']:.1f} s, peak backends "
            f"{race['backends']}, history rows {race['rows']}, server statements "
            f"{race['statements']}"
        )


if __name__ == "__main__":
    main()
