"""What one ``cronworker`` costs while it waits: connections, statements per minute, memory.

Run on demand: ``python benchmarks/bench_worker_at_rest.py [--jobs 200] [--seconds 60]``.
Starts a durable throwaway PostgreSQL (or uses DATABASE_URL; then nothing else should use
that database meanwhile), then one real ``manage.py cronworker`` process, twice: with jobs
whose next tick is hours away (at rest), and with 10 jobs on a 5-second interval (busy).
Statements are the top-level statements the server ran in the database over the window
(``pg_stat_statements``, this script's own readings left out; ``benchmarks/measure.py``).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.measure import Observer
from benchmarks.workers import environment, migrated_database, start_workers


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def window(observer: Observer, seconds: float, env: dict[str, str]) -> tuple[float, int, float]:
    """Statements per minute, connections and RSS (MiB) of one worker over a window."""
    (worker,) = start_workers(env, 1, grace=5)
    time.sleep(5)  # start-up: Django, the first clock reading
    observer.reset()
    time.sleep(seconds)
    held, statements = observer.reading()
    rss = rss_mib(worker.pid)
    worker.send_signal(signal.SIGTERM)
    worker.wait(30)
    return float("nan") if statements is None else statements * 60 / seconds, held, rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=200, help="jobs of the idle worker")
    parser.add_argument("--seconds", type=float, default=60)
    options = parser.parse_args()
    with migrated_database() as (url, _server):
        observer = Observer(url)
        rows = [
            (
                f"at rest: {options.jobs} daily jobs",
                window(observer, options.seconds, environment(url, options.jobs, 86400)),
            ),
            ("busy: 10 jobs every 5 s", window(observer, options.seconds, environment(url, 10, 5))),
        ]
        observer.close()
    print(observer.header())
    print(f"one cronworker over {options.seconds:g} s")
    print(f"{'':32} {'statements/min':>15} {'connections':>12} {'RSS MiB':>8}")
    for label, (per_minute, held, rss) in rows:
        print(f"{label:32} {per_minute:>15.1f} {held:>12} {rss:>8.1f}")


if __name__ == "__main__":
    main()
