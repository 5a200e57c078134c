"""``cronworker`` replicas behind PgBouncer in transaction mode: lease scope (jobs of scope
``auto``, claimed together on each worker's one connection, protected by their rows' leases)
against transaction scope (``scope="transaction"``: each run's lock in its own transaction on
its own connection), measured in the same run, on the same server and PgBouncer.

Run on demand: ``python benchmarks/bench_pooler.py [--workers 3] [--jobs 100] [--every 5]
[--seconds 20] [--pool-size 20]``. Uses DATABASE_URL or starts a durable throwaway PostgreSQL
(``benchmarks/measure.py``), and a PgBouncer (transaction mode, ``--pool-size`` server
connections) in front of it. Per configuration:

- runs per tick per job (each ``(job, tick)`` inside the window exactly once: ``1..1``) and
  ticks missed;
- tick-start latency p50/p99 (the run's ``started`` minus its tick, database clock);
- statements per tick per replica (``pg_stat_statements``, top level, over the window);
- client connections per worker to PgBouncer (peak, read from ``/proc``: the worker's
  established sockets to PgBouncer's port) and server connections in use (peak);
- the claims' server time per tick (planning and executing, ``pg_stat_statements``);
- the database's CPU per tick (a local throwaway server only).

The last line prints lease scope's figures as a multiple of transaction scope's.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_scale import BackendSampler, server_cpu
from benchmarks.measure import CLAIMS, Observer, opening
from benchmarks.workers import (
    Ticks,
    environment,
    migrated_database,
    ratio,
    start_workers,
    stop_workers,
    ticks_in,
    wait_for_claims,
)
from django_advisory_cron.testing import PostgresServer, start_pgbouncer


@dataclass(frozen=True)
class Upstream:
    """The server PgBouncer forwards to, read from its URL."""

    host: str
    port: int
    user: str
    dbname: str


@dataclass
class Figures(Ticks):
    label: str
    statements: float | None
    client_connections: int
    server_connections: int
    claims_ms: float | None
    cpu_per_tick: float | None


def client_sockets(pid: int, port: int) -> int:
    """The established TCP connections of process ``pid`` to ``port`` (from ``/proc``)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = 0
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            remote, state, inode = fields[2], fields[3], fields[9]
            if state == "01" and inode in inodes and int(remote.split(":")[1], 16) == port:
                found += 1
    return found


class ClientSampler(threading.Thread):
    """Samples each worker's client connections to PgBouncer until stopped: the peak."""

    def __init__(self, pids: list[int], port: int) -> None:
        super().__init__(daemon=True)
        self.pids, self.port, self.peak = pids, port, 0
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(0.05):
            for pid in self.pids:
                self.peak = max(self.peak, client_sockets(pid, self.port))

    def stop(self) -> int:
        self.stopping.set()
        self.join(10)
        return self.peak


def measure(
    scope: str, upstream: Upstream, observer: Observer, server: PostgresServer | None, options: Any
) -> Figures:
    """``options.workers`` cronworkers through a PgBouncer of their own (its server
    connections all opened by them), their jobs of ``scope``, for ``options.seconds``."""
    with start_pgbouncer(upstream, pool_size=options.pool_size) as bouncer:
        url = bouncer.url(upstream.dbname)
        return _measure(scope, url, bouncer.port, observer, server, options)


def _measure(
    scope: str,
    bouncer_url: str,
    bouncer_port: int,
    observer: Observer,
    server: PostgresServer | None,
    options: Any,
) -> Figures:
    env = environment(bouncer_url, options.jobs, options.every, max_skew=options.every / 4)
    env["BENCH_WORKER_SCOPE"] = scope
    conn = observer.conn
    conn.execute("TRUNCATE django_advisory_cron_jobrun")
    processes = start_workers(env, options.workers)
    wait_for_claims(conn, options.workers, options.jobs, up=30, after=3 * options.every)
    window_start = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
    clients = ClientSampler([process.pid for process in processes], bouncer_port)
    backends = BackendSampler(observer)
    observer.reset()
    clients.start()
    backends.start()
    cpu_before = server_cpu(server)
    time.sleep(options.seconds)
    statements, cpu_after = observer.reading()[1], server_cpu(server)
    timed = [
        observer.statement_time(sorted({opening(name) for name in names}))
        for names in CLAIMS.values()
    ]
    peak_clients, peak_backends = clients.stop(), max(backends.stop(), default=0)
    window_end = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
    stop_workers(processes)
    window = ticks_in(conn, window_start, window_end, options.every, options.jobs)
    ticks = options.seconds / options.every
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    claims = [entry for entry in timed if entry is not None]
    return Figures(
        **vars(window),
        label=f"{scope} scope" if scope != "auto" else "lease scope (auto)",
        statements=None if statements is None else statements / ticks / options.workers,
        client_connections=peak_clients,
        server_connections=peak_backends,
        claims_ms=sum(plan + run for _calls, plan, run in claims) / ticks if claims else None,
        cpu_per_tick=None if cpu is None else cpu / ticks,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--every", type=float, default=5, help="the jobs' interval, seconds")
    parser.add_argument("--seconds", type=float, default=20, help="window per configuration")
    parser.add_argument(
        "--pool-size", type=int, default=20, help="PgBouncer's server connections per database"
    )
    options = parser.parse_args()
    with migrated_database() as (url, server):
        parts = urlsplit(url)
        upstream = Upstream(
            parts.hostname or "127.0.0.1",
            parts.port or 5432,
            parts.username or "postgres",
            parts.path.lstrip("/") or "postgres",
        )
        observer = Observer(url)
        figures = [
            measure(scope, upstream, observer, server, options) for scope in ("transaction", "auto")
        ]
        observer.close()
    print(observer.header())
    print(
        f"PgBouncer in transaction mode ({options.pool_size} server connections); "
        f"{options.workers} workers x {options.jobs} jobs every {options.every:g} s; "
        f"{options.seconds:g} s window per configuration\n"
    )
    print(
        f"{'':22} {'runs/tick/job':>13} {'missed':>6} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'stmts/tick/replica':>18} {'clients/worker':>14} {'server conns':>12} "
        f"{'claims ms/tick':>14} {'db CPU s/tick':>13}"
    )
    for f in figures:
        statements = "n/a" if f.statements is None else f"{f.statements:.1f}"
        claims = "n/a" if f.claims_ms is None else f"{f.claims_ms:.1f}"
        cpu = "n/a" if f.cpu_per_tick is None else f"{f.cpu_per_tick:.3f}"
        print(
            f"{f.label:22} {f'{f.runs_min}..{f.runs_max}':>13} {f.missed:>6} {f.p50:>8.1f} "
            f"{f.p99:>8.1f} {statements:>18} {f.client_connections:>14} "
            f"{f.server_connections:>12} {claims:>14} {cpu:>13}"
        )
    base, lease = figures
    print(
        f"\nlease scope against transaction scope: p50 {ratio(base.p50, lease.p50)}, p99 "
        f"{ratio(base.p99, lease.p99)}, statements/tick/replica "
        f"{ratio(base.statements, lease.statements)}, clients/worker "
        f"{ratio(base.client_connections, lease.client_connections)}, server connections "
        f"{ratio(base.server_connections, lease.server_connections)}, claims' server time "
        f"{ratio(base.claims_ms, lease.claims_ms)}, db CPU/tick "
        f"{ratio(base.cpu_per_tick, lease.cpu_per_tick)}"
    )


if __name__ == "__main__":
    main()
