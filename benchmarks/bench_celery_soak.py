"""Celery delivery soak: real ``cronworker`` replicas send an every-second schedule to Celery
for several minutes; is each tick sent once and executed once?

Run on demand: ``python benchmarks/bench_celery_soak.py [--minutes 5] [--workers 3]``. Starts
a durable throwaway PostgreSQL (or uses DATABASE_URL), Debian's ``redis-server`` as the broker
on a free loopback port, one real Celery worker (``celery -A tests.celery_app worker --pool
solo``) whose task writes a line per execution, and ``--workers`` real ``manage.py
cronworker`` processes, all of them scheduling ``deliver="celery"`` every second. Printed:

- ticks: the seconds from the first tick sent to the last;
- sent: ticks whose run row says sent (``succeeded``, with the Celery task id); failed: ticks
  recorded failed (the broker refused); missing: ticks with neither;
- executed: ticks the Celery task ran for; duplicates: executions beyond one per tick; not
  executed: sent ticks Celery never ran;
- each replica's share of the sends, and the latency from a tick to its execution.

The baseline is the schedule itself: one execution per second, none twice, none missing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.workers import migrated_database, percentile, start_workers, stop_workers
from tests.celery_servers import celery_env, celery_worker, executions, redis_server

NAME = "celery-soak"
INSERT = """
INSERT INTO django_advisory_cron_schedule
    (name, override, job, command, args, kwargs, cron, every, timezone, enabled, catch_up,
     deliver, description, changed_by)
VALUES (%s, false, 'tests.record_tick', '', '["soak"]', '{}', '', 1, '', true, '', 'celery',
        '', 'benchmark')"""
RUNS = "SELECT tick, status, pid, task_id FROM django_advisory_cron_jobrun WHERE job = %s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5, help="how long to run (default 5)")
    parser.add_argument("--workers", type=int, default=3, help="cronworker replicas (default 3)")
    options = parser.parse_args()
    with (
        migrated_database() as (url, _server),
        redis_server() as redis,
        tempfile.TemporaryDirectory(prefix="celery-soak-") as directory,
    ):
        ledger = Path(directory) / "executions.jsonl"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DELETE FROM django_advisory_cron_schedule WHERE name = %s", (NAME,))
            conn.execute(INSERT, (NAME,))
        settings = {"JOBS_MODULE": "no_jobs_module", "CELERY_APP": "tests.celery_app:app"}
        env = {**os.environ, "DATABASE_URL": url, "ADVISORY_CRON_JSON": json.dumps(settings)}
        env.update(celery_env(redis.url, ledger), PYTHONUNBUFFERED="1")
        env.pop("DJANGO_SETTINGS_MODULE", None)
        with celery_worker(redis.url, ledger):
            workers = start_workers(env, options.workers)
            started = time.monotonic()
            print(f"{options.workers} cronworkers, one Celery worker, {options.minutes:g} min")
            while time.monotonic() - started < options.minutes * 60:
                time.sleep(1)
            stop_workers(workers)
            with psycopg.connect(url, autocommit=True) as conn:
                rows = conn.execute(RUNS, (NAME,)).fetchall()
                claims = conn.execute(
                    "SELECT count(*) FROM django_advisory_cron_enqueuedtick WHERE job = %s",
                    (NAME,),
                ).fetchone()
                conn.execute("DELETE FROM django_advisory_cron_schedule WHERE name = %s", (NAME,))
            sent = {row[0]: row for row in rows if row[1] == "succeeded"}
            deadline = time.monotonic() + 60
            while len(executions(ledger)) < len(sent) and time.monotonic() < deadline:
                time.sleep(0.1)
        report(rows, sent, executions(ledger), claims[0] if claims else 0)


def report(
    rows: list[tuple[datetime, str, int, str]],
    sent: dict[datetime, tuple[datetime, str, int, str]],
    done: list[dict[str, object]],
    claims: int,
) -> None:
    ticks = sorted({row[0] for row in rows})
    span = int((ticks[-1] - ticks[0]) / timedelta(seconds=1)) + 1 if ticks else 0
    failed = {row[0] for row in rows if row[1] == "failed"}
    rows_per_tick = Counter(row[0] for row in rows)
    executed = Counter(datetime.fromisoformat(str(entry["tick"])) for entry in done)
    duplicates = sum(count - 1 for count in executed.values())
    ids = {row[3] for row in sent.values()}
    latencies = [
        float(str(entry["at"])) - datetime.fromisoformat(str(entry["tick"])).timestamp()
        for entry in done
    ]
    print(f"ticks:        {span}")
    print(f"sent:         {len(sent)}  (claims: {claims})")
    print(f"failed:       {len(failed)}")
    print(f"missing:      {span - len(sent) - len(failed)}")
    print(f"rows > 1/tick:{sum(1 for count in rows_per_tick.values() if count > 1):>3}")
    print(f"executed:     {len(executed)}  ({len(done)} executions)")
    print(f"duplicates:   {duplicates}")
    print(f"not executed: {len(set(sent) - set(executed))}")
    print(f"unknown ids:  {sum(1 for entry in done if entry['task_id'] not in ids)}")
    print(f"sends per replica (pid: ticks): {dict(Counter(row[2] for row in sent.values()))}")
    print(
        f"tick -> executed: p50 {percentile(latencies, 0.5) * 1000:.0f} ms, "
        f"p99 {percentile(latencies, 0.99) * 1000:.0f} ms, "
        f"max {max(latencies, default=float('nan')) * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
