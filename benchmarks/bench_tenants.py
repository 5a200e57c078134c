"""Per-tenant jobs at scale: N ``cronworker`` replicas x T tenant schemas x J per-tenant jobs
(django-tenants), against a baseline of the same replicas with T x J jobs that are not per
tenant, measured in the same run on the same server.

Run on demand: ``python benchmarks/bench_tenants.py [--workers 3] [--tenants 500] [--jobs 5]
[--every 10] [--seconds 60]``. Uses DATABASE_URL (a scratch database: its tables are
replaced) or starts a durable throwaway PostgreSQL (``fsync`` and ``synchronous_commit`` on,
``pg_stat_statements`` loaded; ``benchmarks/measure.py``). The project is the tests' django-tenants
project (``tests/settings_tenants.py``) with the jobs of ``tests/tenantsapp/bench_tenant_tasks.py``
(empty bodies); tenants are rows of its tenant model, each with a schema of its own.

Three configurations, each for ``--seconds`` from the first tick at which every worker is up:

1. baseline: T x J jobs that are not per tenant (the same number of claim entries a tick);
2. per tenant: J per-tenant jobs over T tenants;
3. per tenant with 2T tenants (the growth when tenants double).

Per configuration:

- runs per (job, schema, tick): every entry whose tick fell inside the window must have
  exactly one run (``min``/``max``); ``missed`` counts those with none;
- start delay: the run row's ``started`` minus its tick (database clock), p50/p99;
- statements per tick per replica: top-level statements the server ran in the database over
  the window (``pg_stat_statements``, this benchmark's readings left out), per tick (the
  window's length in intervals), per worker; of them, the claims (every variant of the claim
  statement, and the look before claiming the entries dealt to other workers) and the
  finishing statements (one per run won);
- rows written per tick (runs and skips) and runs per tick.

The ratios printed at the end are against the baseline and against T, all of this run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.measure import CLAIMS, Observer, database, opening
from benchmarks.workers import (
    MANAGE,
    Ticks,
    ratio,
    start_workers,
    stop_workers,
    ticks_in,
    wait_for_claims,
)

SETTINGS = "--settings=tests.settings_tenants"


def environment(url: str, every: float, *, jobs: int = 0, plain: int = 0) -> dict[str, str]:
    """A ``tests/manage.py`` process's environment: ``jobs`` per-tenant jobs, or ``plain`` jobs
    that are not per tenant, every ``every`` seconds."""
    settings = {"JOBS_MODULE": "bench_tenant_tasks", "MAX_SKEW": min(1.0, every / 4)}
    env = {**os.environ, "DATABASE_URL": url, "ADVISORY_CRON_JSON": json.dumps(settings)}
    env.update(
        BENCH_TENANT_JOBS=str(jobs),
        BENCH_TENANT_PLAIN=str(plain),
        BENCH_TENANT_EVERY=f"{every:g}",
        PYTHONUNBUFFERED="1",
    )
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return env


def prepare(url: str, observer: Observer, tenants: int) -> None:
    """The shared schema migrated; the public tenant and ``tenants`` tenants, each with an
    (empty) schema of its own."""
    subprocess.run(
        [sys.executable, str(MANAGE), "migrate_schemas", "--shared", "-v", "0", SETTINGS],
        env=environment(url, 10),
        check=True,
    )
    set_tenants(observer, tenants)


def set_tenants(observer: Observer, tenants: int) -> None:
    """Exactly ``tenants`` tenants (``t0000``, ``t0001``, ...) besides the public one."""
    conn = observer.conn
    conn.execute("DELETE FROM tenantsapp_domain")
    conn.execute("DELETE FROM tenantsapp_client")
    conn.execute("INSERT INTO tenantsapp_client (schema_name, name) VALUES ('public', 'public')")
    for index in range(tenants):
        schema = f"t{index:04}"
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        conn.execute(
            "INSERT INTO tenantsapp_client (schema_name, name) VALUES (%s, %s)", (schema, schema)
        )


@dataclass
class Figures(Ticks):
    label: str
    entries: int
    statements: float | None
    #: Claim statements (every variant of the claim, and the look before claiming the
    #: entries dealt to others) and finishing statements (one per run), per tick per replica.
    claims: float | None
    finishes: float | None
    #: The statements sent most often over the window: calls per tick per replica, text.
    busiest: list[tuple[float, str]]


def run_workers(
    observer: Observer,
    env: dict[str, str],
    label: str,
    workers: int,
    entries: int,
    every: float,
    seconds: float,
    busiest: int = 0,
) -> Figures:
    """``workers`` cronworkers with ``env`` for ``seconds`` after they are all up; measure."""
    conn = observer.conn
    conn.execute("TRUNCATE django_advisory_cron_jobrun")
    processes = start_workers(env, workers, options=[SETTINGS])
    # From the tick after the first one all of them ran: plans made, tenants read once.
    wait_for_claims(conn, workers, entries, up=60 + 5 * workers, after=3 * every)
    window_start = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
    observer.reset()
    time.sleep(seconds)
    statements = observer.reading()[1]
    claimed = observer.statement_time(
        sorted({opening(name) for names in CLAIMS.values() for name in names})
    )
    finished = observer.statement_time([opening("finish_run")])
    top = observer.busiest(busiest)
    window_end = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
    stop_workers(processes)
    window_ticks = seconds / every
    return Figures(
        **vars(ticks_in(conn, window_start, window_end, every, entries)),
        label=label,
        entries=entries,
        statements=None if statements is None else statements / window_ticks / workers,
        claims=None if claimed is None else claimed[0] / window_ticks / workers,
        finishes=None if finished is None else finished[0] / window_ticks / workers,
        busiest=[(calls / window_ticks / workers, query) for calls, query in top],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--tenants", type=int, default=500)
    parser.add_argument("--jobs", type=int, default=5, help="per-tenant jobs")
    parser.add_argument("--every", type=float, default=10, help="the jobs' interval, seconds")
    parser.add_argument("--seconds", type=float, default=60, help="window per configuration")
    parser.add_argument(
        "--busiest", type=int, default=0, help="print the N statements sent most often"
    )
    options = parser.parse_args()
    workers, tenants, jobs, every = options.workers, options.tenants, options.jobs, options.every
    with database() as (url, _server):
        observer = Observer(url)
        prepare(url, observer, tenants)
        figures = [
            run_workers(
                observer,
                environment(url, every, plain=tenants * jobs),
                f"baseline: {tenants * jobs} plain jobs",
                workers,
                tenants * jobs,
                every,
                options.seconds,
                options.busiest,
            ),
            run_workers(
                observer,
                environment(url, every, jobs=jobs),
                f"{tenants} tenants x {jobs} jobs",
                workers,
                tenants * jobs,
                every,
                options.seconds,
                options.busiest,
            ),
        ]
        set_tenants(observer, 2 * tenants)
        figures.append(
            run_workers(
                observer,
                environment(url, every, jobs=jobs),
                f"{2 * tenants} tenants x {jobs} jobs",
                workers,
                2 * tenants * jobs,
                every,
                options.seconds,
                options.busiest,
            )
        )
        observer.close()
    print(observer.header())
    print(
        f"{workers} workers; jobs every {every:g} s; {options.seconds:g} s window per "
        "configuration\n"
    )
    print(
        f"{'':28} {'entries':>7} {'ticks':>5} {'runs/entry':>10} {'missed':>6} {'p50 ms':>8} "
        f"{'p99 ms':>8} {'stmts/tick/replica':>18} {'claims':>7} {'finishes':>8} "
        f"{'rows/tick':>9} {'runs/tick':>9}"
    )
    for f in figures:
        statements = "n/a" if f.statements is None else f"{f.statements:.1f}"
        claims = "n/a" if f.claims is None else f"{f.claims:.1f}"
        finishes = "n/a" if f.finishes is None else f"{f.finishes:.1f}"
        print(
            f"{f.label:28} {f.entries:>7} {f.ticks:>5} {f'{f.runs_min}..{f.runs_max}':>10} "
            f"{f.missed:>6} {f.p50:>8.1f} {f.p99:>8.1f} {statements:>18} {claims:>7} "
            f"{finishes:>8} {f.rows_per_tick:>9.1f} {f.runs_per_tick:>9.1f}"
        )
    for f in figures:
        for calls, query in f.busiest:
            print(f"{f.label}: {calls:6.2f} per tick per replica: {query[:110]}")
    base, tenanted, doubled = figures
    for name, other, of in (
        ("per tenant vs baseline", tenanted, base),
        ("tenants doubled", doubled, tenanted),
    ):
        print(
            f"{name}: p50 {ratio(of.p50, other.p50)}, p99 {ratio(of.p99, other.p99)}, "
            f"statements/tick/replica {ratio(of.statements, other.statements)}, "
            f"claims/tick/replica {ratio(of.claims, other.claims)}, "
            f"rows/tick {ratio(of.rows_per_tick, other.rows_per_tick)}"
        )


if __name__ == "__main__":
    main()
