"""What every benchmark shares: a durable PostgreSQL, the floors its figures are divided by,
and the statements the server ran.

A commit on a server with ``fsync`` and ``synchronous_commit`` on waits for the WAL to reach
the disk, which is what users run and what a recorded run pays; the test suite's throwaway
server turns both off for speed. Without DATABASE_URL the benchmarks start a throwaway server
with both on and ``pg_stat_statements`` loaded, so statements are counted by the server
itself (the top-level statements of the measured database, this module's own readings left
out), not by a sampler that adds its own.

The floors, sent over one raw psycopg connection in autocommit mode:

- (c) the write floor: one ``INSERT ... RETURNING`` and one ``UPDATE``, two commits, what a
  recorded run cannot do without on a durable server;
- (a) a bare ``pg_try_advisory_lock`` + ``pg_advisory_unlock`` pair;
- one ``SELECT 1``: a round trip with no commit to flush.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django_advisory_cron.db.queries import QUERIES
from django_advisory_cron.testing import PostgresServer, find_pg_bindir, start_postgres

#: A server whose commits cost what they cost in production (room for 100 replicas too).
DURABLE = {
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "max_connections": "400",
}

#: The server counts every statement it runs, and times its planning apart from its execution.
COUNTING = {
    "shared_preload_libraries": "'pg_stat_statements'",
    "pg_stat_statements.track": "all",
    "pg_stat_statements.track_planning": "on",
}

#: Connections to one database other than ours, and the top-level statements run in it so
#: far: every reading names pg_stat_statements, so that no reading of ours is counted.
_READING = (
    "SELECT (SELECT count(*) FROM pg_stat_activity WHERE datid = %(dbid)s "
    "AND pid <> pg_backend_pid()), (SELECT coalesce(sum(calls), 0) FROM pg_stat_statements "
    "WHERE dbid = %(dbid)s AND toplevel AND query NOT LIKE '%%pg_stat_statements%%')"
)

#: The same where the server does not count statements.
_BACKENDS = (
    "SELECT count(*), NULL FROM pg_stat_activity WHERE datid = %(dbid)s AND pid <> pg_backend_pid()"
)

#: The floors' key: a single bigint, which never meets the app's two-int keys.
FLOOR_KEY = 4_242_424_242


def start_durable_postgres() -> PostgresServer:
    """A throwaway server with ``fsync`` and ``synchronous_commit`` on, and
    ``pg_stat_statements`` loaded when its installation has the library."""
    bindir = find_pg_bindir()
    libraries = [] if bindir is None else [bindir.parent / "lib", bindir.parent / "lib/postgresql"]
    counting = any(any(lib.glob("pg_stat_statements.*")) for lib in libraries)
    if bindir is not None and not counting:
        print(
            f"pg_stat_statements is not part of the PostgreSQL in {bindir}: statements are "
            "counted client-side in bench_runner.py, and not at all by the worker benchmarks",
            file=sys.stderr,
        )
    server = start_postgres(bindir, config={**DURABLE, **(COUNTING if counting else {})})
    if counting:
        import psycopg

        with psycopg.connect(server.url("postgres"), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
    return server


def url_or_server() -> tuple[str, PostgresServer | None]:
    """``(url, server)``: DATABASE_URL, or a durable throwaway server, which the caller stops."""
    url = os.environ.get("DATABASE_URL")
    if url:
        return url, None
    server = start_durable_postgres()
    return server.url("postgres"), server


@contextmanager
def database() -> Iterator[tuple[str, PostgresServer | None]]:
    """``(url, server)``: DATABASE_URL, or a durable throwaway server, stopped afterwards."""
    url, server = url_or_server()
    try:
        yield url, server
    finally:
        if server is not None:
            server.stop()


def fill_history(
    conn: Any,
    *,
    prefix: str,
    jobs: int,
    rows: int,
    every: float,
    statuses: Sequence[str],
    interrupted: int,
) -> None:
    """A past of ``rows`` run rows for the jobs ``<prefix>0`` to ``<prefix><jobs - 1>``, as a
    site that has run them for a while has: one row per job and tick, the ticks ``every``
    seconds apart back from now, their statuses ``statuses`` in turn, one row in
    ``interrupted`` interrupted instead; then the table analysed, as autovacuum would have
    done."""
    if rows <= 0:
        return
    conn.execute(
        "INSERT INTO django_advisory_cron_jobrun (job, tick, host, pid, started, finished, "
        "status, error, manual, backfill, task_id, attempts, output) "
        "SELECT %(prefix)s || (g %% %(jobs)s), t, 'history', 1, t, t + interval '1 second', "
        "CASE WHEN g %% %(interrupted)s = 0 THEN 'interrupted' "
        "ELSE (%(statuses)s::text[])[1 + g %% %(count)s] END, '', false, false, '', 1, '' "
        "FROM generate_series(1, %(rows)s) AS g, LATERAL (SELECT date_trunc('second', now()) "
        "- make_interval(secs => %(every)s * (1 + g / %(jobs)s)) AS t) AS at",
        {
            "prefix": prefix,
            "jobs": jobs,
            "rows": rows,
            "every": every,
            "statuses": list(statuses),
            "count": len(statuses),
            "interrupted": interrupted,
        },
    )
    conn.execute("VACUUM ANALYZE django_advisory_cron_jobrun")


#: The statements (``db/queries.sql``) whose server time is the claims' time: the claim, in
#: each of its variants, and the look before a claim.
CLAIMS = {
    "claim": ("claim_runs", "claim_runs_census"),
    "look": ("unclaimed_ticks",),
}


def opening(name: str) -> str:
    """How the statement ``name`` of ``db/queries.sql`` starts, up to its first parameter or
    literal: the server's record of it (``pg_stat_statements``, both replaced by ``$1``,
    ``$2``, ...) starts so too (see ``Observer.statement_time``)."""
    return QUERIES[name].split("%(", 1)[0].split("'", 1)[0]


class Observer:
    """Reads the server's statistics of one database over a connection of its own."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)
        self.dbid = self.one("SELECT oid FROM pg_database WHERE datname = current_database()")
        self.settings = {
            name: self.one(f"SHOW {name}")
            for name in ("server_version", "fsync", "synchronous_commit")
        }
        self.server_side = self._pg_stat_statements()

    def one(self, sql: str) -> Any:
        row = self.conn.execute(sql).fetchone()
        return None if row is None else row[0]

    def _pg_stat_statements(self) -> bool:
        """Whether the server counts statements: the library is loaded and the extension is
        installed in this database."""
        if "pg_stat_statements" not in str(self.one("SHOW shared_preload_libraries")):
            return False
        return bool(
            self.one("SELECT count(*) FROM pg_extension WHERE extname = 'pg_stat_statements'")
        )

    def header(self) -> str:
        """One line: the server, its durability settings, and how statements are counted."""
        settings = self.settings
        how = (
            "statements counted by the server (pg_stat_statements, top level, this database)"
            if self.server_side
            else "pg_stat_statements not installed there: statements counted client-side "
            "(psycopg's Cursor.execute in this process; BEGIN and COMMIT not counted)"
        )
        return (
            f"PostgreSQL {settings['server_version']}: fsync {settings['fsync']}, "
            f"synchronous_commit {settings['synchronous_commit']}; {how}"
        )

    def reset(self) -> None:
        if self.server_side:
            self.conn.execute("SELECT pg_stat_statements_reset(0, %s, 0)", (self.dbid,))

    def reading(self) -> tuple[int, int | None]:
        """Connections to this database other than ours, and the top-level statements the
        server ran in it since the last reset (``None`` where it does not count them)."""
        row = self.conn.execute(
            _READING if self.server_side else _BACKENDS, {"dbid": self.dbid}
        ).fetchone()
        assert row is not None
        return int(row[0]), None if row[1] is None else int(row[1])

    def busiest(self, count: int) -> list[tuple[int, str]]:
        """The ``count`` statements the server ran most often in this database since the last
        reset: calls and the statement's first line, ours left out."""
        if not self.server_side:
            return []
        rows = self.conn.execute(
            "SELECT calls, query FROM pg_stat_statements WHERE dbid = %s AND toplevel "
            "AND query NOT LIKE '%%pg_stat_statements%%' ORDER BY calls DESC LIMIT %s",
            (self.dbid, count),
        ).fetchall()
        return [(int(calls), " ".join(query.split())) for calls, query in rows]

    def plan_and_execution(self, prefix: str) -> tuple[float, float] | None:
        """Mean milliseconds planning and executing the top-level statements whose text starts
        with ``prefix``, since the last reset (None where the server does not time them)."""
        if not self.server_side:
            return None
        row = self.conn.execute(
            "SELECT sum(total_plan_time) / sum(calls), sum(total_exec_time) / sum(calls) "
            "FROM pg_stat_statements WHERE dbid = %s AND toplevel AND query LIKE %s",
            (self.dbid, prefix + "%"),
        ).fetchone()
        if row is None or row[0] is None:
            return None
        return float(row[0]), float(row[1])

    def statement_time(self, prefixes: list[str]) -> tuple[int, float, float] | None:
        """Calls, and milliseconds the server spent planning and executing them, of the
        top-level statements whose text starts with one of ``prefixes``, since the last reset
        (None where it does not time them)."""
        if not self.server_side:
            return None
        row = self.conn.execute(
            "SELECT coalesce(sum(calls), 0), coalesce(sum(total_plan_time), 0), "
            "coalesce(sum(total_exec_time), 0) FROM pg_stat_statements "
            "WHERE dbid = %s AND toplevel "
            "AND EXISTS (SELECT FROM unnest(%s::text[]) AS p WHERE starts_with(query, p))",
            (self.dbid, prefixes),
        ).fetchone()
        assert row is not None
        return int(row[0]), float(row[1]), float(row[2])

    def server_cost(self, action: Callable[[], Any], calls: int) -> tuple[float, float] | None:
        """Top-level statements per call of ``action`` and the milliseconds per call the
        server spent planning and executing them, after a reset, this module's readings left
        out (None where the server does not time them)."""
        if not self.server_side:
            return None
        self.reset()
        for _ in range(calls):
            action()
        row = self.conn.execute(
            "SELECT coalesce(sum(calls), 0), coalesce(sum(total_plan_time + total_exec_time), 0) "
            "FROM pg_stat_statements WHERE dbid = %s AND toplevel "
            "AND query NOT LIKE '%%pg_stat_statements%%'",
            (self.dbid,),
        ).fetchone()
        assert row is not None
        return int(row[0]) / calls, float(row[1]) / calls

    def per_call(self, action: Callable[[], Any], calls: int) -> float:
        """Statements per call of ``action``: counted by the server after a reset, or
        client-side (psycopg's ``Cursor.execute``) where the server does not count."""
        if self.server_side:
            self.reset()
            for _ in range(calls):
                action()
            return (self.reading()[1] or 0) / calls
        with client_statements() as counted:
            for _ in range(calls):
                action()
        return counted[0] / calls

    def close(self) -> None:
        self.conn.close()


@contextmanager
def client_statements() -> Iterator[list[int]]:
    """Counts the statements this process sends through psycopg's ``Cursor.execute``
    meanwhile, Django's cursors and the lock statements included (``BEGIN`` and ``COMMIT``,
    which psycopg sends by itself, are not): the fallback where the server does not count."""
    import psycopg

    counted = [0]
    execute = psycopg.Cursor.execute

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        counted[0] += 1
        return execute(self, *args, **kwargs)

    psycopg.Cursor.execute = counting  # type: ignore[method-assign]
    try:
        yield counted
    finally:
        psycopg.Cursor.execute = execute  # type: ignore[method-assign]


class Floors:
    """The floors, over one raw psycopg connection in autocommit mode."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS benchmark_floor (id bigserial PRIMARY KEY, job text, "
            "tick timestamptz, started timestamptz, finished timestamptz, status text)"
        )

    def write(self) -> None:
        """(c): a row inserted and then finished, two commits."""
        row = self.conn.execute(
            "INSERT INTO benchmark_floor (job, tick, started, status) "
            "VALUES ('floor', now(), now(), 'running') RETURNING id"
        ).fetchone()
        self.conn.execute(
            "UPDATE benchmark_floor SET finished = now(), status = 'succeeded' WHERE id = %s",
            (row[0] if row else 0,),
        )

    def lock(self) -> None:
        """(a): a bare try-lock + unlock pair."""
        self.conn.execute("SELECT pg_try_advisory_lock(%s)", (FLOOR_KEY,))
        self.conn.execute("SELECT pg_advisory_unlock(%s)", (FLOOR_KEY,))

    def select_one(self) -> None:
        """One round trip with nothing to commit."""
        self.conn.execute("SELECT 1")

    def close(self) -> None:
        self.conn.execute("DROP TABLE IF EXISTS benchmark_floor")
        self.conn.close()


def interleaved(funcs: list[Callable[[], Any]], runs: int) -> list[float]:
    """Median milliseconds per call of each function, after a warm-up call of each.

    The functions take turns, call by call, so a load change on a shared machine affects
    every one alike and the ratios between them stay comparable."""
    samples: list[list[float]] = [[] for _ in funcs]
    for func in funcs:
        func()
    for _ in range(runs):
        for index, func in enumerate(funcs):
            started = time.perf_counter()
            func()
            samples[index].append((time.perf_counter() - started) * 1000)
    return [statistics.median(values) for values in samples]
