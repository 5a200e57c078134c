#!/usr/bin/env python
"""The demo: several replicas run one cron job at the same moment, and exactly one runs it.

    python example_project/demo.py [--replicas N] [--q2]

Starts a throwaway PostgreSQL cluster (unless ``DATABASE_URL`` is set), migrates the example
site, creates a few users, then starts N real ``manage.py runlocked send_daily_digest``
processes at once, as N replicas' crontabs would at 02:00. It reads their output, the ``JobRun``
history and the digests table, and checks that exactly one replica ran and each user got one
digest. Then N replicas run a fast every-minute job one after another within one tick: it runs
once, and the later replicas skip with "already ran this tick". Last, N replicas each run
``manage.py cronworker`` (no cron at all) for two ticks of a 5-second job: each tick runs once.

Exits 0 when both guarantees held and 1 when one was broken, so it doubles as a smoke test
(69 when there is no PostgreSQL to run against, 2 for bad arguments).
With ``DATABASE_URL`` set, it empties the example's own tables and the history of its jobs
in that database first; point it at a scratch database.

With ``--q2`` it schedules through django-q2 instead of cron (see ``q2demo.py``): every
replica syncs the schedules and runs its own ``qcluster``, for two ticks of an every-minute
job (about two minutes); it exits 1 if a tick ran more than once.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import os
import signal
import subprocess
import sys
import time
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MANAGE = HERE / "manage.py"
SETTINGS = "example.settings"
USERS = ("alice", "bob", "carol", "dave", "erin")
DIGEST_JOB = "send_daily_digest"
TICK_JOB = "refresh_digest_stats"
WORKER_JOB = "sample_uptime"
WORKER_TICKS = 2
# How long the winner spends "sending": long enough that every replica, all started together,
# tries the lock while it is held (starting a Django process takes a fraction of a second, and
# more when many start at once).
DIGEST_SECONDS = 1.5
DIGEST_SECONDS_PER_REPLICA = 0.25
PROCESS_TIMEOUT = 60.0
UNAVAILABLE = 69  # EX_UNAVAILABLE, as runlocked uses for an unreachable database


@dataclass
class Replica:
    """One finished ``runlocked`` process."""

    name: str
    pid: int
    returncode: int
    stdout: str
    stderr: str

    @property
    def said(self) -> str:
        """Its last line of output (its report), or of errors when it printed nothing."""
        for text in (self.stdout, self.stderr):
            lines = [line.strip() for line in text.splitlines() if line.strip()]
            if lines:
                return lines[-1]
        return "(no output)"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Run the example's cron jobs on several replicas at once and check that "
        "exactly one of them runs each job.",
        epilog="Without DATABASE_URL a throwaway PostgreSQL cluster is started and deleted. "
        "With it, the example's tables and its jobs' history there are emptied first "
        "(with --q2, also the schedules it syncs and the tasks queued for its clusters).",
    )
    parser.add_argument(
        "--replicas", type=int, default=3, metavar="N", help="how many replicas (default 3)"
    )
    parser.add_argument(
        "--q2",
        action="store_true",
        help="django-q2 mode: each replica runs `manage.py sync_schedules` and its own "
        "`manage.py qcluster` (ORM broker) for two ticks of the every-minute job "
        "`poll_bounces`, and the demo shows which replica ran each tick and the recorded "
        "skips of the duplicate deliveries (about 2 minutes; needs django-q2)",
    )
    args = parser.parse_args(argv)
    if not 2 <= args.replicas <= 20:
        parser.error("--replicas must be between 2 and 20")
    return args


def setup_django() -> None:
    """Configure Django in this process; the settings start the throwaway server if needed."""
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    os.environ["DEMO"] = "1"  # every replica records its skips (RECORD_SKIPS), to show them
    import django

    django.setup()


def replica_names(count: int) -> list[str]:
    return [f"replica-{number}" for number in range(1, count + 1)]


def start_replica(name: str, job: str, **extra_env: str) -> subprocess.Popen[str]:
    """Start ``manage.py runlocked JOB`` as its own OS process, as one replica's cron would."""
    return start_manage(name, "runlocked", job, **extra_env)


def start_manage(name: str, *args: str, **extra_env: str) -> subprocess.Popen[str]:
    """Start ``manage.py ARGS`` as one replica's own OS process."""
    env = {
        **os.environ,  # carries DATABASE_URL, so every replica uses the same server
        "DJANGO_SETTINGS_MODULE": SETTINGS,
        "REPLICA": name,
        "PYTHONUNBUFFERED": "1",
        **extra_env,
    }
    return subprocess.Popen(
        [sys.executable, str(MANAGE), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(name: str, process: subprocess.Popen[str]) -> Replica:
    try:
        stdout, stderr = process.communicate(timeout=PROCESS_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        stderr += f"\n(killed after {PROCESS_TIMEOUT:g} s)"
    return Replica(name, process.pid, process.returncode, stdout, stderr)


def show(replicas: Sequence[Replica]) -> None:
    for replica in replicas:
        print(f"   {replica.name:<10}  exit {replica.returncode}  {replica.said}")


def check_exit_codes(replicas: Sequence[Replica], problems: list[str]) -> None:
    for replica in replicas:
        if replica.returncode != 0:
            problems.append(f"{replica.name} exited with {replica.returncode}")
            print(f"\n   {replica.name} stderr:\n{replica.stderr.rstrip()}\n")


def reset_demo_data() -> None:
    from digest.models import DigestEmail, DigestStats, UptimeSample
    from django.contrib.auth import get_user_model

    from django_advisory_cron.models import JobRun

    JobRun.objects.filter(job__in=[DIGEST_JOB, TICK_JOB, WORKER_JOB]).delete()
    DigestEmail.objects.all().delete()
    DigestStats.objects.all().delete()
    UptimeSample.objects.all().delete()
    user_model = get_user_model()
    for username in USERS:
        user_model.objects.get_or_create(
            username=username, defaults={"email": f"{username}@example.com"}
        )


def runs_of(job: str, replicas: Sequence[Replica]) -> list[Any]:
    """The ``JobRun`` rows these replica processes wrote, oldest first."""
    from django_advisory_cron.models import JobRun

    pids = [replica.pid for replica in replicas]
    return list(JobRun.objects.filter(job=job, pid__in=pids).order_by("started", "id"))


def db_clock() -> float:
    """The database server's clock, in epoch seconds: the clock the ticks are computed on."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT extract(epoch FROM clock_timestamp())")
        row = cursor.fetchone()
    assert row is not None
    return float(row[0])


def concurrent_replicas(count: int, problems: list[str]) -> float:
    """Part 1; returns how long a replica took to reach the lock (seconds, database clock)."""
    from digest.models import DigestEmail
    from django.contrib.auth import get_user_model

    print(f"\n1. {count} replicas start `manage.py runlocked {DIGEST_JOB}` at the same moment")
    delay = f"{(DIGEST_SECONDS + DIGEST_SECONDS_PER_REPLICA * count) / len(USERS):.3f}"
    names = replica_names(count)
    launched = db_clock()
    processes = [start_replica(name, DIGEST_JOB, DIGEST_SEND_DELAY=delay) for name in names]
    replicas = [wait_for(name, process) for name, process in zip(names, processes, strict=True)]
    show(replicas)
    print(
        "               (each replica's own line: 'run N' is the run's id in the history, the "
        "JobRun table; 'tick' is the scheduled time the run belongs to)"
    )
    check_exit_codes(replicas, problems)

    by_pid = {replica.pid: replica.name for replica in replicas}
    runs = runs_of(DIGEST_JOB, replicas)
    ran = [run for run in runs if run.status != "skipped_locked"]
    skipped = [run for run in runs if run.status == "skipped_locked"]
    if len(ran) == 1 and ran[0].status == "succeeded" and len(skipped) == count - 1:
        winner = ran[0]
        offsets = [(run.started - winner.started).total_seconds() for run in skipped]
        held = all(run.started <= winner.finished for run in skipped)
        print(
            f"   JobRun:     {by_pid[winner.pid]} succeeded ({winner.duration:.2f} s); "
            f"{len(skipped)} skipped_locked{' while it held the lock' if held else ''} "
            f"(they tried {min(offsets):+.2f} to {max(offsets):+.2f} s after it started)"
        )
        if winner.tick is None:
            print(
                f"               ('no tick': it is not 02:00, {DIGEST_JOB}'s scheduled time, "
                "so the run belongs to no tick and the lock alone kept the others out)"
            )
    else:
        listing = "; ".join(f"{by_pid.get(run.pid, run.pid)} {run.status}" for run in runs)
        problems.append(f"expected 1 run and {count - 1} skips of {DIGEST_JOB}, got: {listing}")
        _explain_late_start(ran, by_pid)

    per_user = Counter(DigestEmail.objects.values_list("user__username", flat=True))
    senders = sorted(set(DigestEmail.objects.values_list("replica", flat=True)))
    users = get_user_model().objects.filter(is_active=True).count()
    duplicated = sorted(name for name, sent in per_user.items() if sent != 1)
    missing = users - len(per_user)
    verdict = "one per user" if not duplicated and not missing else "NOT one per user"
    print(
        f"   digests:    {users} users, {sum(per_user.values())} DigestEmail rows, "
        f"from {', '.join(senders) or 'nobody'}: {verdict}"
    )
    if duplicated:
        problems.append(f"users with more than one digest: {', '.join(duplicated)}")
    if missing:
        problems.append(f"{missing} user(s) got no digest")
    if len(senders) > 1:
        problems.append(f"digests were sent by {len(senders)} replicas: {', '.join(senders)}")
    return max((run.started.timestamp() - launched for run in runs), default=1.0)


def _explain_late_start(ran: Sequence[Any], by_pid: dict[int, str]) -> None:
    """Say whether two runs overlapped (the lock failed) or merely followed each other."""
    finished = [run for run in ran if run.finished is not None]
    for first, second in itertools.pairwise(finished):
        if second.started >= first.finished:
            print(
                f"   note: {by_pid.get(second.pid)} started after {by_pid.get(first.pid)} had "
                "finished, so the lock was free; the replicas did not start together (is the "
                "machine very busy?). Outside its tick, only the lock guards this job."
            )
        else:
            print(f"   {by_pid.get(first.pid)} and {by_pid.get(second.pid)} ran AT THE SAME TIME")


def seconds_past_the_minute() -> float:
    """Seconds since the last minute tick, on the database clock."""
    return db_clock() % 60.0


def one_tick(count: int, problems: list[str], startup: float) -> None:
    """Part 2: ``count`` replicas run the every-minute job in turn; ``startup`` is part 1's."""
    from digest.models import DigestStats

    print(
        f"\n2. {count} replicas run the every-minute job `{TICK_JOB}` one after another, "
        "within one tick"
    )
    # Ticks are a minute apart and a run belongs to the nearest one, so the tick changes at
    # hh:mm:30 on the database clock. Start in the first half of a minute, early enough for all
    # the runs (each costs about a replica's start-up, measured in part 1, with a wide margin):
    # the runs then belong to the tick just past, and part 3's ticks, which come later, read
    # after it. (From hh:mm:30 on, the nearest tick is the next minute, still to come.)
    needed = 1.0 + 2.0 * count * (max(startup, 0.2) + 0.2)
    past = seconds_past_the_minute()
    if past + needed > 30.0:
        wait = 60.0 - past + 0.5
        print(
            f"   (waiting {wait:.1f} s for the next minute, so that all the runs follow its tick)"
        )
        time.sleep(wait)
    names = replica_names(count)
    replicas = [wait_for(name, start_replica(name, TICK_JOB)) for name in names]
    show(replicas)
    check_exit_codes(replicas, problems)

    by_pid = {replica.pid: replica.name for replica in replicas}
    runs = runs_of(TICK_JOB, replicas)
    by_tick: dict[datetime | None, list[Any]] = {}
    for run in runs:
        by_tick.setdefault(run.tick, []).append(run)
    stats = DigestStats.objects.count()
    for tick, tick_runs in by_tick.items():
        ran = [run for run in tick_runs if run.status == "succeeded"]
        skipped = [run for run in tick_runs if run.status == "skipped_tick"]
        if tick is not None and len(ran) == 1 and len(ran) + len(skipped) == len(tick_runs):
            print(
                f"   JobRun:     tick {tick:%H:%M}: {by_pid[ran[0].pid]} succeeded; "
                f"{len(skipped)} skipped_tick (already ran this tick)"
            )
        else:
            listing = "; ".join(f"{by_pid.get(run.pid, run.pid)} {run.status}" for run in tick_runs)
            problems.append(f"tick {tick}: expected 1 run, the rest 'already ran'; got {listing}")
    if len(runs) != count:
        problems.append(f"{count} replicas ran {TICK_JOB} but {len(runs)} runs were recorded")
    if stats != len(by_tick):
        problems.append(f"{TICK_JOB} wrote {stats} stats rows for {len(by_tick)} tick(s)")
    if len(by_tick) > 1:
        print("   note: the runs straddled two ticks (the machine is slow); each tick ran once")


def workers(count: int, problems: list[str]) -> None:
    """Part 3: ``count`` replicas each run ``cronworker`` until two ticks of a 5-second job
    have run; every replica fires every tick, and each tick runs once."""
    from digest.models import UptimeSample

    from django_advisory_cron.models import JobRun

    print(
        f"\n3. {count} replicas each run `manage.py cronworker` (no cron): the 5-second job "
        f"`{WORKER_JOB}`, for {WORKER_TICKS} ticks"
    )
    names = replica_names(count)
    processes = [start_manage(name, "cronworker", WORKER_JOB, "--grace", "5") for name in names]
    by_pid = {process.pid: name for name, process in zip(names, processes, strict=True)}
    runs = JobRun.objects.filter(job=WORKER_JOB, pid__in=list(by_pid))
    deadline = time.monotonic() + 5.0 * WORKER_TICKS + PROCESS_TIMEOUT / 4
    while time.monotonic() < deadline:
        if runs.filter(status="succeeded").count() >= WORKER_TICKS:
            break
        time.sleep(0.2)
    time.sleep(1.0)  # the other replicas' skips of the last tick
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for name, process in zip(names, processes, strict=True):
        replica = wait_for(name, process)
        if replica.returncode != 143:  # SIGTERM: the way a worker is stopped
            problems.append(f"{name}'s cronworker exited with {replica.returncode}")
            print(f"\n   {name} stderr:\n{replica.stderr.rstrip()}\n")
    rows = list(runs.order_by("tick", "started"))
    by_tick: dict[datetime | None, list[Any]] = {}
    for run in rows:
        by_tick.setdefault(run.tick, []).append(run)
    print(
        "   (every replica's cronworker fires every tick: one runs it, the others record a "
        "skip; a replica that records nothing for a tick was not up yet)"
    )
    first_tick = {
        pid: min((run.tick for run in rows if run.pid == pid and run.tick), default=None)
        for pid in by_pid
    }
    ran_ticks = 0
    for tick, tick_runs in by_tick.items():
        ran = [run for run in tick_runs if run.status == "succeeded"]
        if tick is None or len(ran) > 1:
            listing = "; ".join(f"{by_pid.get(run.pid)} {run.status}" for run in tick_runs)
            problems.append(f"{WORKER_JOB} tick {tick}: expected 1 run; got {listing}")
        elif ran:
            ran_ticks += 1
            print(
                f"   JobRun:     tick {tick:%H:%M:%S}: {by_pid[ran[0].pid]} succeeded; "
                + "; ".join(
                    _part_in_tick(name, pid, tick, tick_runs, first_tick)
                    for pid, name in by_pid.items()
                    if pid != ran[0].pid
                )
            )
    samples = UptimeSample.objects.count()
    if ran_ticks < WORKER_TICKS:
        problems.append(f"{WORKER_JOB} ran {ran_ticks} tick(s), expected {WORKER_TICKS}")
    if samples != ran_ticks:
        problems.append(f"{WORKER_JOB} wrote {samples} samples for {ran_ticks} tick(s)")


#: What a replica's skip of a tick it fired says, by status.
SKIP_REASONS = {
    "skipped_tick": "it already ran",
    "skipped_locked": "the lock was held",
    "skipped_paused": "the job is paused",
}


def _part_in_tick(
    name: str,
    pid: int,
    tick: datetime,
    tick_runs: Sequence[Any],
    first_tick: dict[int, datetime | None],
) -> str:
    """What the replica ``name`` (process ``pid``) did at ``tick``: its skip, or nothing."""
    mine = [run.status for run in tick_runs if run.pid == pid]
    if mine:
        return ", ".join(f"{name} {status} ({SKIP_REASONS.get(status, status)})" for status in mine)
    first = first_tick[pid]
    if first is None or first > tick:
        return f"{name} recorded nothing (its cronworker was not up yet)"
    return f"{name} recorded nothing"


def describe_database() -> str:
    from django.conf import settings
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        (version,) = cursor.fetchone() or ("?",)
    db = settings.DATABASES["default"]
    where = f"{db['HOST'] or 'local socket'}:{db['PORT'] or 5432}"
    throwaway = getattr(settings, "THROWAWAY", None)
    if throwaway is not None:
        return f"throwaway PostgreSQL {version.split()[0]} on {where}"
    return f"PostgreSQL {version.split()[0]} from DATABASE_URL ({where}/{db['NAME']})"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.monotonic()
    if args.q2:
        if importlib.util.find_spec("django_q") is None:
            print(
                "demo: --q2 needs django-q2: pip install 'django-advisory-cron[q2]'",
                file=sys.stderr,
            )
            return UNAVAILABLE
        os.environ["DEMO_Q2"] = "1"  # before set-up: the settings then add django_q
        # The q2 mode sets retry below the job's run time on purpose, and says so.
        warnings.filterwarnings("ignore", "Retry and timeout are misconfigured", UserWarning)
    sys.path[:0] = [str(HERE), str(HERE.parent)]
    from django_advisory_cron.testing import PostgresSetupError

    try:
        setup_django()
    except PostgresSetupError as error:
        print(f"demo: {error}", file=sys.stderr)
        return UNAVAILABLE
    from django.conf import settings
    from django.core.management import call_command
    from django.db import OperationalError, connections

    problems: list[str] = []
    closing = ""
    try:
        mode = " (django-q2 mode)" if args.q2 else ""
        print(f"django-advisory-cron demo{mode}: {args.replicas} replicas, {describe_database()}")
        call_command("migrate", verbosity=0)
        if args.q2:
            from q2demo import q2_mode

            closing = q2_mode(args.replicas, problems)
        else:
            reset_demo_data()
            startup = concurrent_replicas(args.replicas, problems)
            one_tick(args.replicas, problems, startup)
            workers(args.replicas, problems)
    except OperationalError as error:
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        print(f"demo: cannot use the database: {first_line}", file=sys.stderr)
        return UNAVAILABLE
    finally:
        connections.close_all()
        throwaway = getattr(settings, "THROWAWAY", None)
        if throwaway is not None:
            throwaway.stop()
            print("\nStopped the throwaway PostgreSQL and deleted its data.")
    elapsed = time.monotonic() - began
    if problems:
        print("\nFAILED: the guarantee was broken:")
        for problem in problems:
            print(f"  - {problem}")
        return 1
    if not closing:
        closing = (
            "OK: one replica ran the job, one digest per user, one run per tick, cron or cronworker"
        )
    print(f"\n{closing} ({elapsed:.1f} s).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
