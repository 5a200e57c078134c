"""The demo's django-q2 mode (``demo.py --q2``): every replica runs a cluster, no crontab.

Each replica runs ``manage.py sync_schedules`` (all at once, as every replica's start-up
would) and then its own ``manage.py qcluster`` on the ORM broker. django-q2's scheduler turns
the every-minute ``poll_bounces`` job into one task per tick; the demo's ``Q_CLUSTER["retry"]``
(2 s) is shorter than the job (3 s), so each tick is also redelivered to a second worker while
the first still runs. The advisory lock and the ``(job, tick)`` record must turn every delivery
after the first into a recorded skip. The demo waits for two ticks, stops the clusters and
reads the run history, what the job wrote, and which cluster each run came from.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django_advisory_cron.testing.processes import descendants

HERE = Path(__file__).resolve().parent
MANAGE = HERE / "manage.py"
JOB = "poll_bounces"
ALSO_EVERY_MINUTE = "refresh_digest_stats"
JOBS = ("send_daily_digest", ALSO_EVERY_MINUTE, JOB)
TICKS = 2
QUEUE = "demo"  # the ORM broker's queue: Q_CLUSTER["name"] in the example settings
SYNC_TIMEOUT = 90.0
START_TIMEOUT = 60.0
# django-q2's scheduler looks at the schedules about every 30 s in each cluster.
SCHEDULER_LAG = 35.0
STOP_GRACE = 5.0
SETTLE = 2.0  # the queue must stay empty this long before the clusters are stopped
#: Statuses of a delivery that ran the job (or started to): at most one per tick.
RAN = ("succeeded", "failed", "running", "interrupted", "lock_lost")


def replica_env(name: str) -> dict[str, str]:
    """The environment of one replica's processes; its cluster's workers inherit it."""
    return {
        **os.environ,  # DATABASE_URL (the one shared server) and DEMO_Q2=1
        "DJANGO_SETTINGS_MODULE": "example.settings",
        "DEMO_Q2": "1",
        "REPLICA": name,
        "PYTHONUNBUFFERED": "1",
    }


class Cluster:
    """One replica's ``manage.py qcluster``, in its own process group."""

    def __init__(self, name: str, log_dir: Path) -> None:
        self.name = name
        self.log = log_dir / f"{name}.log"
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                [sys.executable, str(MANAGE), "qcluster"],
                env=replica_env(name),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.pids: set[int] = set()
        self.stopped = ""

    def ready(self) -> bool:
        return " running." in self.log.read_text(errors="replace")

    def note_pids(self) -> None:
        """Remember its worker pids: a run is recorded with the pid of the worker that ran it."""
        if self.process.poll() is None:
            self.pids |= descendants(self.process.pid)

    def tail(self, lines: int = 25) -> str:
        text = self.log.read_text(errors="replace").rstrip().splitlines()
        return "\n".join(f"      {line}" for line in text[-lines:])

    def terminate(self) -> None:
        """SIGTERM to the main pid, as a container runtime stops a replica."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def stop(self, deadline: float) -> None:
        """Wait for it until ``deadline``, then kill whatever is left of its process group."""
        began = time.monotonic()
        try:
            self.process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            self.stopped = f"stopped (exit {self.process.returncode})"
        except subprocess.TimeoutExpired:
            self.stopped = "still running after SIGTERM; killed its process group"
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)  # any worker left behind
        self.process.wait(timeout=10)
        self.stopped += f" in {time.monotonic() - began:.1f} s"


def stop_all(clusters: Sequence[Cluster]) -> None:
    for cluster in clusters:
        cluster.terminate()
    deadline = time.monotonic() + STOP_GRACE
    for cluster in clusters:
        cluster.stop(deadline)


def reset_q2_data() -> None:
    """Forget earlier demo runs: their history, their synced schedules, their queued tasks."""
    from digest.models import BouncePoll, DigestStats
    from django_q.models import OrmQ, Task

    from django_advisory_cron.contrib.django_q import RUNNER, ours
    from django_advisory_cron.models import JobRun

    JobRun.objects.filter(job__in=JOBS).delete()
    BouncePoll.objects.all().delete()
    DigestStats.objects.all().delete()
    ours().delete()
    OrmQ.objects.filter(key=QUEUE).delete()
    Task.objects.filter(func=RUNNER).delete()


def sync_on_every_replica(names: Sequence[str], problems: list[str]) -> None:
    from django_q.models import Schedule

    from django_advisory_cron.contrib.django_q import PREFIX

    print(f"\n1. {len(names)} replicas start `manage.py sync_schedules` at the same moment")
    processes = [
        subprocess.Popen(
            [sys.executable, str(MANAGE), "sync_schedules"],
            env=replica_env(name),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in names
    ]
    for name, process in zip(names, processes, strict=True):
        try:
            out, err = process.communicate(timeout=SYNC_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
        lines = out.strip().splitlines() or ["(no output)"]
        print(f"   {name:<10}  exit {process.returncode}  {lines[-1]}")
        if process.returncode != 0:
            problems.append(f"{name}: sync_schedules exited with {process.returncode}")
            print(err.rstrip())
    rows = Schedule.objects.filter(name__startswith=PREFIX).order_by("name")
    for row in rows:
        print(f"   Schedule    {row.name:<36} {row.cron:<11} next run {row.next_run:%H:%M:%S}")
    expected = {f"{PREFIX}{job}" for job in JOBS}
    names_found = [row.name for row in rows]
    if sorted(names_found) != sorted(expected):
        problems.append(f"expected one Schedule row per job, found {names_found}")


def start_clusters(names: Sequence[str], log_dir: Path, started: list[Cluster]) -> bool:
    from django.conf import settings

    options = getattr(settings, "Q_CLUSTER", {})
    print(
        f"\n2. each replica starts its own `manage.py qcluster` (ORM broker, "
        f"{options.get('workers')} workers, retry {options.get('retry')} s)"
    )
    started.extend(Cluster(name, log_dir) for name in names)
    deadline = time.monotonic() + START_TIMEOUT
    while not all(cluster.ready() for cluster in started):
        dead = [cluster for cluster in started if cluster.process.poll() is not None]
        if dead or time.monotonic() > deadline:
            for cluster in dead or started:
                print(f"   {cluster.name}: qcluster did not start; its log:\n{cluster.tail()}")
            return False
        time.sleep(0.2)
    for cluster in started:
        cluster.note_pids()
        print(f"   {cluster.name:<10}  qcluster pid {cluster.process.pid} running")
    return True


def _db_now() -> datetime:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        row = cursor.fetchone()
    assert row is not None
    now: datetime = row[0]
    return now


def _settled() -> bool:
    from django_q.models import OrmQ

    from django_advisory_cron.models import JobRun

    return (
        not OrmQ.objects.filter(key=QUEUE).exists()
        and not JobRun.objects.filter(status="running").exists()
    )


def wait_for_ticks(clusters: Sequence[Cluster], problems: list[str]) -> None:
    from django_q.models import Schedule

    from django_advisory_cron.contrib.django_q import schedule_name
    from django_advisory_cron.models import JobRun

    first = Schedule.objects.get(name=schedule_name(JOB)).next_run
    wait = max((first - _db_now()).total_seconds(), 0.0)
    print(
        f"   waiting for {TICKS} ticks of `{JOB}`, the first at {first:%H:%M:%S} "
        f"({wait:.0f} s from now);\n   each cluster's scheduler looks about every 30 s. "
        "The job runs 3 s, longer than retry,\n   so django-q2 hands each tick to a second "
        "worker while the first still runs:\n   that delivery must be a recorded skip."
    )
    deadline = time.monotonic() + wait + 60.0 * (TICKS - 1) + SCHEDULER_LAG + 30.0
    seen: set[datetime] = set()
    calm_since: float | None = None
    while True:
        for cluster in clusters:
            cluster.note_pids()
        done = JobRun.objects.filter(job=JOB, status="succeeded", tick__isnull=False)
        for run in done.order_by("tick"):
            tick = run.tick
            if tick is not None and tick not in seen:
                seen.add(tick)
                late = (run.started - tick).total_seconds()
                who = owner(clusters, run.pid)
                print(f"   tick {tick:%H:%M}: ran on {who}, {late:.1f} s after the tick")
        if len(seen) >= TICKS and _settled():
            calm_since = calm_since or time.monotonic()
            if time.monotonic() - calm_since >= SETTLE:
                return
        else:
            calm_since = None
        dead = [cluster.name for cluster in clusters if cluster.process.poll() is not None]
        if dead:
            problems.append(f"the cluster of {', '.join(dead)} died")
        elif time.monotonic() > deadline:
            problems.append(f"only {len(seen)} of {TICKS} ticks ran before the deadline")
        else:
            time.sleep(0.5)
            continue
        for cluster in clusters:
            print(f"   {cluster.name} log:\n{cluster.tail()}")
        return


def owner(clusters: Iterable[Cluster], pid: int) -> str:
    return next((cluster.name for cluster in clusters if pid in cluster.pids), f"pid {pid}")


def _counts(statuses: Iterable[str]) -> str:
    counted = Counter(statuses)
    return ", ".join(f"{status} {counted[status]}" for status in sorted(counted))


def report(clusters: Sequence[Cluster], problems: list[str]) -> tuple[int, int]:
    """Print the history per tick and per replica; returns (ticks, recorded skips) of ``JOB``."""
    from digest.models import BouncePoll, DigestStats

    from django_advisory_cron.models import JobRun

    print("\n4. what the database says")
    runs = list(JobRun.objects.filter(job=JOB).order_by("tick", "started", "id"))
    by_tick: dict[datetime | None, list[Any]] = {}
    for run in runs:
        by_tick.setdefault(run.tick, []).append(run)
    print(f"   JobRun rows of {JOB}, by tick:")
    for tick, tick_runs in by_tick.items():
        label = f"{tick:%H:%M}" if tick else "no tick"
        ran = [run for run in tick_runs if run.status in RAN]
        skips = [run for run in tick_runs if run.status not in RAN]
        winner = ", ".join(
            f"{owner(clusters, run.pid)} {run.status} ({run.duration or 0:.1f} s)" for run in ran
        )
        skipped = "; ".join(
            f"{owner(clusters, run.pid)} {run.status} "
            f"(+{(run.started - ran[0].started).total_seconds() if ran else 0:.1f} s)"
            for run in skips
        )
        print(f"     {label}  ran: {winner or 'nobody'}   skips: {skipped or 'none'}")
        print(f"            {_counts(run.status for run in tick_runs)}")
        if tick is None:
            problems.append(f"{len(tick_runs)} run(s) of {JOB} were not for a tick")
        elif len(ran) != 1 or ran[0].status != "succeeded":
            problems.append(f"tick {tick:%H:%M} of {JOB}: expected one success, got {winner}")
    print(f"   JobRun rows of {JOB}, by replica:")
    for cluster in clusters:
        mine = [run.status for run in runs if run.pid in cluster.pids]
        print(f"     {cluster.name:<10}  {_counts(mine) or 'nothing'}")
    strays = [run for run in runs if not any(run.pid in c.pids for c in clusters)]
    if strays:
        problems.append(f"{len(strays)} run(s) from pids of no cluster")

    polls = list(BouncePoll.objects.all())
    succeeded = {run.pid: run for run in runs if run.status == "succeeded"}
    print(
        f"   BouncePoll rows (what the job wrote): {len(polls)}, by "
        + ", ".join(f"{poll.replica} at {poll.polled_at:%H:%M:%S}" for poll in polls)
    )
    if len(polls) != len(succeeded):
        problems.append(f"{len(succeeded)} successful runs but {len(polls)} BouncePoll rows")
    for poll in polls:
        if owner(clusters, poll.pid) != poll.replica:
            problems.append(f"a poll by {poll.replica} came from {owner(clusters, poll.pid)}")

    other = list(JobRun.objects.filter(job=ALSO_EVERY_MINUTE).order_by("tick", "started"))
    other_ticks: dict[datetime | None, list[str]] = {}
    for run in other:
        other_ticks.setdefault(run.tick, []).append(run.status)
    print(
        f"   {ALSO_EVERY_MINUTE} (synced too, every minute): "
        + "; ".join(
            f"{tick:%H:%M} {_counts(statuses)}" if tick else f"no tick {_counts(statuses)}"
            for tick, statuses in other_ticks.items()
        )
    )
    for tick, statuses in other_ticks.items():
        if tick is None or sum(status in RAN for status in statuses) != 1:
            problems.append(f"{ALSO_EVERY_MINUTE} at {tick}: {_counts(statuses)}")
    stats = DigestStats.objects.count()
    if stats != sum(
        status == "succeeded" for statuses in other_ticks.values() for status in statuses
    ):
        problems.append(f"{ALSO_EVERY_MINUTE} wrote {stats} rows for {len(other_ticks)} tick(s)")

    ticks = [tick for tick in by_tick if tick is not None]
    if len(ticks) < TICKS:
        problems.append(f"{len(ticks)} tick(s) of {JOB} observed, expected {TICKS}")
    elif any(b - a != timedelta(minutes=1) for a, b in itertools.pairwise(ticks)):
        problems.append(f"the ticks of {JOB} are not a minute apart: {ticks}")
    return len(ticks), sum(run.status.startswith("skipped") for run in runs)


def q2_mode(count: int, problems: list[str]) -> str:
    """Run the django-q2 mode; returns the closing line when the guarantee held."""
    names = [f"replica-{number}" for number in range(1, count + 1)]
    reset_q2_data()
    sync_on_every_replica(names, problems)
    if problems:
        return ""
    log_dir = Path(tempfile.mkdtemp(prefix="advisory-cron-demo-q2-"))
    clusters: list[Cluster] = []
    try:
        if not start_clusters(names, log_dir, clusters):
            problems.append("the clusters did not start")
            return ""
        wait_for_ticks(clusters, problems)
    finally:
        stop_all(clusters)
        print(
            f"\n3. stopping the clusters (SIGTERM, then the process group after {STOP_GRACE:g} s)"
        )
        for cluster in clusters:
            print(f"   {cluster.name:<10}  {cluster.stopped}")
        shutil.rmtree(log_dir, ignore_errors=True)
    ticks, skips = report(clusters, problems)
    return (
        f"OK: {ticks} ticks of {JOB} through {count} django-q2 clusters, each run once; "
        f"{skips} duplicate deliveries were recorded skips"
    )
