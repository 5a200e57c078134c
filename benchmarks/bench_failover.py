"""Ticks run twice across a failover, per replication mode, over many failovers.

Run on demand: ``python benchmarks/bench_failover.py [--failovers 20] [--lag 3]
[--modes sync,async,async+option]``. Each failover starts a fresh durable primary (``fsync``
and ``synchronous_commit`` on; ``benchmarks/measure.py``) with a streaming standby on
loopback, and three ``cronworker`` processes on ``host=primary,standby
target_session_attrs=read-write`` running 20 empty jobs every 2 s and one long job
(``tests/jobsapp/failover_tasks.py``). Once the workers have started 40 runs, the primary's
WAL sender is frozen (``SIGSTOP``) for ``--lag`` seconds, as a network stall would hold it
back: the standby lags the primary by that much. Then the link dies (the WAL sender is
killed: what it did not send is lost), the primary is stopped as by a crash
(``pg_ctl stop -m immediate``), the standby promoted, and the workers run 40 more runs on
it.

The modes:

- ``sync``: the standby is named in ``synchronous_standby_names``, ``synchronous_commit = on``:
  every commit waits for it;
- ``async``: it is not named: no commit waits;
- ``async+option``: it is named, but the primary's ``synchronous_commit`` is ``local`` (no
  other commit waits), and the workers set ``SYNCHRONOUS_COMMIT = "on"``: only their claims
  and finishes wait.

Counted per failover:

- *claims lost*: ticks started on the old primary whose row is missing on the new one. Each
  is a tick that any replica trying it after the failover runs a second time.
- *late replica ran*: a fourth replica, late (a cron that fires late, a replica that was
  restarting, a task queue delivering a tick late), tries every tick started on the old
  primary in its last ``lag + 2`` seconds, once the new primary answers; the ticks it runs
  were run twice.
- *workers ran twice*: each worker logs the tick of every run it starts, so a tick the three
  workers started on the old primary and again on the new one shows in their logs (they try
  each tick at nearly the same moment, so this is rarer than the above).
- how long after the promotion every worker was running again.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.measure import DURABLE
from benchmarks.workers import MANAGE
from django_advisory_cron.testing import PostgresServer, Standby, start_postgres, start_standby

STARTED = re.compile(r"job (\S+) started \(tick ([^,]+), run")
JOBS, EVERY = 20, 2
MODES = ("sync", "async", "async+option")


class Log:
    """A worker's stderr, line by line as it comes, with the time each line arrived."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[tuple[float, str]] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def started(self, before: float = float("inf")) -> list[tuple[str, str]]:
        return [
            (found.group(1), found.group(2))
            for at, line in list(self.lines)
            if at < before and (found := STARTED.search(line))
        ]

    def times(self, text: str) -> list[float]:
        return [at for at, line in list(self.lines) if text in line]


#: The late replica: tries each tick in ``LATE_TICKS`` (JSON ``[[job, tick], ...]``) as the
#: tick it belongs to, and prints what became of them: ran, found taken, held back by a row
#: still within its lease (a run whose finish the failover lost), or locked.
LATE_REPLICA = """
import collections, json, os
from datetime import datetime
from django_advisory_cron import registry
seen = collections.Counter()
for job, tick in json.loads(os.environ["LATE_TICKS"]):
    result = registry.get(job).run(now=datetime.fromisoformat(tick))
    alive = result.record is not None and result.record.live_runs > 0
    seen["ran" if result.ran else "taken" if result.skipped_tick else
         "alive" if alive else "locked"] += 1
print(json.dumps(seen))
"""


@dataclass
class Outcome:
    twice: int
    lost_claims: int
    late: dict[str, int]
    late_tried: int
    runs: int
    reconnected: float
    examples: list[tuple[str, str]] = field(default_factory=list)


def wait_for(predicate: Callable[[], Any], timeout: float = 90) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise TimeoutError("gave up waiting")
        time.sleep(0.05)
    return value


def pair(mode: str) -> tuple[PostgresServer, Standby]:
    primary = start_postgres(config=DURABLE)
    try:
        env = environment(primary.url(), "async")  # no W014 before the standby exists
        subprocess.run(
            [sys.executable, str(MANAGE), "migrate", "-v0"], env=env, check=True, timeout=300
        )
        if mode == "async":
            standby = start_standby(primary)
        else:
            commit = "on" if mode == "sync" else "local"
            standby = start_standby(primary, synchronous=True, synchronous_commit=commit)
    except BaseException:
        primary.stop()
        raise
    return primary, standby


def environment(url: str, mode: str) -> dict[str, str]:
    settings: dict[str, Any] = {"JOBS_MODULE": "failover_tasks", "MAX_SKEW": 0.5}
    if mode == "async+option":
        settings["SYNCHRONOUS_COMMIT"] = "on"
    env = {**os.environ, "DATABASE_URL": url, "ADVISORY_CRON_JSON": json.dumps(settings)}
    env.update(FAILOVER_JOBS=str(JOBS), FAILOVER_EVERY=str(EVERY), PYTHONUNBUFFERED="1")
    env.update(FAILOVER_LONG="20")
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return env


def recorded(url: str) -> set[tuple[str, str]]:
    """``(job, tick)`` of every run row on the server at ``url``, ticks as the logs show them
    (Python's ``str`` of the datetime)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT job, tick FROM django_advisory_cron_jobrun WHERE tick IS NOT NULL"
        ).fetchall()
    return {(job, str(tick)) for job, tick in rows}


def failover(mode: str, lag: float) -> Outcome:
    primary, standby = pair(mode)
    with primary, standby:
        url = (
            f"postgresql://postgres@/postgres?host={primary.host},{standby.host}"
            f"&port={primary.port},{standby.port}&target_session_attrs=read-write"
        )
        processes = [
            subprocess.Popen(
                [sys.executable, str(MANAGE), "cronworker", "--grace", "1"],
                env=environment(url, mode),
                stderr=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                text=True,
            )
            for _ in range(3)
        ]
        logs = [Log(process) for process in processes]
        try:
            wait_for(lambda: sum(len(log.started()) for log in logs) >= 2 * JOBS)
            sender = wal_sender(primary, standby)
            os.kill(sender, signal.SIGSTOP)
            time.sleep(lag)  # the lag itself: the primary sends the standby nothing meanwhile
            # What it did not send is lost with the link, and the primary goes down with it.
            os.kill(sender, signal.SIGKILL)
            standby.stop_primary("immediate")
            failed = time.monotonic()
            standby.promote()
            promoted = time.monotonic()
            kept = recorded(standby.url())  # before anyone runs a lost tick again
            back = [wait_for(partial(log.times, "database reachable again"))[0] for log in logs]
            before = sum(len(log.started()) for log in logs)
            recent = {
                tick
                for log in logs
                for at, line in list(log.lines)
                if failed - lag - 2 <= at < failed and (found := STARTED.search(line))
                for tick in [(found.group(1), found.group(2))]
            }
            late = late_replica(url, mode, sorted(recent))
            wait_for(lambda: sum(len(log.started()) for log in logs) >= before + 2 * JOBS)
        finally:
            for process in processes:
                process.send_signal(signal.SIGTERM)
            for process in processes:
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    process.kill()
            for log in logs:
                log.thread.join(10)
    started = Counter(tick for log in logs for tick in log.started())
    on_old = {tick for log in logs for tick in log.started(before=failed)}
    twice = sorted(tick for tick, count in started.items() if count > 1)
    return Outcome(
        twice=len(twice),
        lost_claims=len(on_old - kept),
        late=late,
        late_tried=len(recent),
        runs=sum(started.values()),
        reconnected=max(back) - promoted,
        examples=twice[:3],
    )


def late_replica(url: str, mode: str, ticks: list[tuple[str, str]]) -> dict[str, int]:
    """What became of ``ticks`` tried by a late replica on the new primary (it waits for
    none): how many it ran, found taken, found held back by a live row, or locked."""
    env = {**environment(url, mode), "LATE_TICKS": json.dumps(ticks), "FAILOVER_LONG": "0"}
    done = subprocess.run(
        [sys.executable, str(MANAGE), "shell", "-c", LATE_REPLICA],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def wal_sender(primary: PostgresServer, standby: Standby) -> int:
    """The primary's process that streams WAL to ``standby``."""
    import psycopg

    with psycopg.connect(primary.url(), autocommit=True) as conn:
        row = conn.execute(
            "SELECT pid FROM pg_stat_replication WHERE application_name = %s", (standby.name,)
        ).fetchone()
    assert row is not None, "the primary streams to no standby"
    return int(row[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--failovers", type=int, default=20, help="failovers per mode")
    parser.add_argument("--lag", type=float, default=3.0, help="seconds the standby lags")
    parser.add_argument("--modes", default=",".join(MODES))
    options = parser.parse_args()
    modes = options.modes.split(",")
    results: dict[str, list[Outcome]] = {mode: [] for mode in modes}
    for number in range(options.failovers):
        for mode in modes:  # the modes take turns, so a load change affects each alike
            outcome = failover(mode, options.lag)
            results[mode].append(outcome)
            print(
                f"failover {number + 1} {mode}: {outcome.lost_claims} claim(s) lost, late "
                f"replica ran {outcome.late.get('ran', 0)} of {outcome.late_tried} {outcome.late}, "
                "workers ran "
                f"{outcome.twice} twice, {outcome.runs} runs, every worker back "
                f"{outcome.reconnected:.2f} s after the promotion {outcome.examples or ''}",
                flush=True,
            )
    print(
        f"\n{options.failovers} failovers per mode, the standby {options.lag:g} s behind "
        f"(WAL sender stopped), the primary stopped with -m immediate; 3 cronworkers, "
        f"{JOBS} jobs every {EVERY} s and a long job\n"
    )
    heading = f"{'claims lost':>12} {'late replica ran':>17} {'workers ran twice':>18}"
    print(f"{'mode':14} {heading}  every worker back after the promotion (s)")
    for mode, outcomes in results.items():
        lost = sum(outcome.lost_claims for outcome in outcomes)
        late = sum(outcome.late.get("ran", 0) for outcome in outcomes)
        tried = sum(outcome.late_tried for outcome in outcomes)
        twice = sum(outcome.twice for outcome in outcomes)
        back = [outcome.reconnected for outcome in outcomes]
        print(
            f"{mode:14} {lost:12} {f'{late} of {tried}':>17} {twice:18}  "
            f"{min(back):.2f} to {max(back):.2f}, median {statistics.median(back):.2f}"
        )


if __name__ == "__main__":
    main()
