"""django-q2 scheduling: schedule sync, duplicate deliveries, catch-up, checks.

Everything touching django-q2's tables runs in real ``manage.py`` subprocesses with
``tests.settings_q2`` (django_q + the ORM broker on the test database), including real
``qcluster`` processes; this process inspects the tables with SQL and the ORM.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.core import checks
from django.test import override_settings

from django_advisory_cron import job_key, locked_task, registry
from django_advisory_cron.contrib import django_q as q2
from django_advisory_cron.core.jitter import start_of
from django_advisory_cron.models import JobRun, RunStatus
from django_advisory_cron.testing.processes import descendants
from tests.conftest import MANAGE, ROOT, manage_env
from tests.jobsapp.models import Marker
from tests.waiting import wait_for
from tests.warm_start import run_manage

Q2 = "tests.settings_q2"
TICK_JOB = "q2_every_minute"
#: What the ``manage.py`` subprocesses sync: the scheduled jobs of the default jobs module
#: (this process may also hold the jobs of modules that other tests imported).
SCHEDULED_JOBS = sorted(
    job.name
    for job in registry.all()
    if job.cron is not None and job.func.__module__ == "tests.jobsapp.tasks"
)

_migrated: set[str] = set()


def _manage(
    url: str, *args: str, timeout: float = 120, **env: str
) -> subprocess.CompletedProcess[str]:
    """``manage.py ARGS --settings tests.settings_q2`` run to completion, forked from a warm
    starter for that environment (tests/warm_start.py) where one can serve."""
    return run_manage(*args, "--settings", Q2, env=manage_env(url, **env), timeout=timeout)


@pytest.fixture
def q2_db(db_url: str) -> Iterator[str]:
    """The test database with django_q's tables, emptied before and after each test."""
    if db_url not in _migrated:
        done = _manage(db_url, "migrate", "django_q", "--verbosity", "0")
        assert done.returncode == 0, done.stderr
        _migrated.add(db_url)
    _truncate(db_url)
    yield db_url
    _truncate(db_url)


def _truncate(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE django_q_schedule, django_q_ormq, django_q_task RESTART IDENTITY")


def _sql(url: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(query, params).fetchall()


def _schedules(url: str) -> list[tuple[Any, ...]]:
    return _sql(
        url,
        "SELECT name, func, args, schedule_type, cron, intended_date_kwarg, repeats "
        "FROM django_q_schedule ORDER BY name, id",
    )


# -- processes ----------------------------------------------------------------------------------


class Cluster:
    """One real ``manage.py qcluster`` process group, like one replica's cluster."""

    def __init__(self, name: str, url: str, log_dir: Path, env: dict[str, str]) -> None:
        self.name = name
        self.log = log_dir / f"qcluster-{name}.log"
        self.process = subprocess.Popen(
            [sys.executable, str(MANAGE), "qcluster", "--settings", Q2],
            env=manage_env(url, **env),
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            start_new_session=True,
        )
        self.pids: set[int] = set()

    def ready(self) -> bool:
        return "running." in self.log.read_text()

    def note_pids(self) -> None:
        """Remember the worker pids (runs are recorded with the worker's pid)."""
        self.pids |= descendants(self.process.pid)

    def terminate(self) -> None:
        """Ask the cluster to stop, as a container runtime would (SIGTERM to the main pid)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def stop(self) -> None:
        self.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)  # django-q2 may wait up to `timeout` for its monitor
        with contextlib.suppress(ProcessLookupError):  # whatever is left of its process group
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)


@pytest.fixture
def clusters(q2_db: str, tmp_path: Path) -> Iterator[Callable[..., list[Cluster]]]:
    started: list[Cluster] = []

    def start(count: int = 2, **env: str) -> list[Cluster]:
        group = [Cluster(chr(ord("a") + i), q2_db, tmp_path, env) for i in range(count)]
        started.extend(group)
        deadline = time.monotonic() + 60
        while not all(cluster.ready() for cluster in group):
            assert time.monotonic() < deadline, [c.log.read_text() for c in group]
            assert all(c.process.poll() is None for c in group), [c.log.read_text() for c in group]
            time.sleep(0.2)
        for cluster in group:
            cluster.note_pids()
        return group

    yield start
    for cluster in started:
        cluster.terminate()
    for cluster in started:
        cluster.stop()


def _enqueue(url: str, code: str) -> None:
    done = _manage(url, "shell", "-c", code)
    assert done.returncode == 0, done.stderr


def _wait_queue_empty(url: str, clusters: list[Cluster], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        for cluster in clusters:
            cluster.note_pids()
        queued = _sql(url, "SELECT count(*) FROM django_q_ormq")[0][0]
        running = JobRun.objects.filter(status=RunStatus.RUNNING).count()
        if queued == 0 and running == 0:
            return
        if time.monotonic() >= deadline:
            history = list(JobRun.objects.values_list("job", "status", "pid", "tick", "error"))
            logs = "\n----\n".join(cluster.log.read_text()[-4000:] for cluster in clusters)
            raise AssertionError(
                f"{queued} task(s) still queued, {running} running after {timeout} s\n"
                f"runs: {history}\nthe clusters' logs:\n{logs}"
            )
        time.sleep(0.3)


def _per_cluster(clusters: list[Cluster], job: str) -> dict[str, Counter[str]]:
    counts: dict[str, Counter[str]] = {cluster.name: Counter() for cluster in clusters}
    for run in JobRun.objects.filter(job=job):
        owner = next((c.name for c in clusters if run.pid in c.pids), "?")
        counts.setdefault(owner, Counter())[run.status] += 1
    return counts


def _current_minute(url: str) -> datetime:
    """The current minute's tick on the database clock, avoiding the last seconds of a minute."""
    now: datetime = _sql(url, "SELECT now()")[0][0]
    if now.second >= 45:
        time.sleep(61 - now.second)
        now = _sql(url, "SELECT now()")[0][0]
    return now.replace(second=0, microsecond=0)


def _second_half_of_a_minute(url: str) -> datetime:
    """The current minute's tick, once the database clock is 30 to 50 s into it.

    A cluster started then looks at its schedules in this minute and, 30 s later, just after
    the next minute begins.
    """
    while True:
        now: datetime = _sql(url, "SELECT now()")[0][0]
        if 30 <= now.second < 50:
            return now.replace(second=0, microsecond=0)
        time.sleep((30 - now.second - now.microsecond / 1e6) % 60)


# -- optional dependency ------------------------------------------------------------------------

WITHOUT_Q2 = """
import os
import sys
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
sys.modules["django_q"] = None  # as if django-q2 were not installed
import django_advisory_cron
import django
django.setup()
from django.core.management import call_command
call_command("check")
try:
    import django_advisory_cron.contrib.django_q
except ImportError as error:
    print("IMPORT ERROR:", error)
else:
    print("imported")
"""


def test_app_works_without_django_q_and_contrib_names_the_extra(db_url: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_Q2],
        env=manage_env(db_url),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "django-advisory-cron[q2]" in done.stdout
    assert "IMPORT ERROR" in done.stdout


def test_sync_schedules_without_django_q_says_what_to_install(
    manage: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    done = manage("sync_schedules")
    assert done.returncode == 1
    assert "django-advisory-cron[q2]" in done.stderr
    assert "'django_q' to INSTALLED_APPS" in done.stderr


# -- schedule sync ------------------------------------------------------------------------------


def test_sync_creates_one_cron_schedule_per_job_and_is_idempotent(q2_db: str) -> None:
    first = _manage(q2_db, "sync_schedules")
    assert first.returncode == 0, first.stderr
    assert f"create {len(SCHEDULED_JOBS)}" in first.stdout
    rows = _schedules(q2_db)
    assert [row[0] for row in rows] == [q2.schedule_name(name) for name in SCHEDULED_JOBS]
    by_job = {row[0]: row for row in rows}
    tick_row = by_job[q2.schedule_name(TICK_JOB)]
    assert tick_row[1:] == (q2.RUNNER, repr(TICK_JOB), "C", "* * * * *", "intended", -1)
    next_run = _sql(q2_db, "SELECT next_run FROM django_q_schedule WHERE name = %s", tick_row[0])
    assert next_run[0][0].second == 0  # the next tick itself

    again = _manage(q2_db, "sync_schedules")
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == f"unchanged {len(SCHEDULED_JOBS)}"
    assert _schedules(q2_db) == rows


def test_sync_updates_changed_rows_and_prunes_only_its_own(q2_db: str) -> None:
    assert _manage(q2_db, "sync_schedules").returncode == 0
    name = q2.schedule_name(TICK_JOB)
    _sql(
        q2_db,
        "UPDATE django_q_schedule SET cron = '*/7 * * * *', next_run = now() + interval '1 day' "
        "WHERE name = %s RETURNING id",
        name,
    )
    insert = (
        "INSERT INTO django_q_schedule (name, func, args, schedule_type, cron, repeats, next_run)"
        " VALUES (%s, %s, %s, 'C', '0 3 * * *', -1, now() + interval '1 day') RETURNING id"
    )
    _sql(q2_db, insert, q2.schedule_name("gone"), q2.RUNNER, "'gone'")  # a removed job
    _sql(q2_db, insert, q2.schedule_name("quick_scheduled"), q2.RUNNER, "'quick_scheduled'")
    _sql(q2_db, insert, "nightly by hand", q2.RUNNER, "'quick_scheduled'")  # made by hand
    _sql(q2_db, insert, q2.schedule_name("lookalike"), "myapp.tasks.other", "")  # not ours

    done = _manage(q2_db, "sync_schedules")
    assert done.returncode == 0, done.stderr
    assert f"updated: {name} (cron)" in done.stdout
    assert "deleted: advisory_cron:quick_scheduled (duplicate row id" in done.stdout
    assert "kept (use --prune to delete): advisory_cron:gone" in done.stdout
    cron, next_run = _sql(
        q2_db, "SELECT cron, next_run FROM django_q_schedule WHERE name = %s", name
    )[0]
    assert cron == "* * * * *"
    assert next_run - _sql(q2_db, "SELECT now()")[0][0] <= timedelta(minutes=1)

    dry = _manage(q2_db, "sync_schedules", "--prune", "--dry-run")
    assert "would delete: advisory_cron:gone (job no longer registered)" in dry.stdout
    before = _schedules(q2_db)
    assert any(row[0] == "advisory_cron:gone" for row in before)

    pruned = _manage(q2_db, "sync_schedules", "--prune")
    assert pruned.returncode == 0, pruned.stderr
    after = {row[0]: row for row in _schedules(q2_db)}
    assert "advisory_cron:gone" not in after
    assert after["nightly by hand"] == before[[r[0] for r in before].index("nightly by hand")]
    assert after["advisory_cron:lookalike"][1] == "myapp.tasks.other"
    assert sorted(n for n, row in after.items() if row[1] == q2.RUNNER and n.startswith("adv")) == [
        q2.schedule_name(job) for job in SCHEDULED_JOBS
    ]


def test_three_concurrent_syncs_create_no_duplicates(q2_db: str) -> None:
    key = job_key(q2.SYNC_LOCK)
    with psycopg.connect(q2_db, autocommit=True) as holder:
        # Hold the sync lock until all three replicas are polling for it, then let them race.
        holder.execute("SELECT pg_advisory_lock(%(lock_ns)s, %(lock_id)s)", key.params)
        processes = [
            subprocess.Popen(
                [sys.executable, str(MANAGE), "sync_schedules", "--settings", Q2],
                env=manage_env(q2_db),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(3)
        ]
        deadline = time.monotonic() + 60
        while True:
            # Each sync connects only to try the lock, which it then polls for.
            connected = holder.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()
            if connected and connected[0] >= 3:
                time.sleep(1)
                break
            assert time.monotonic() < deadline, "the syncs never reached the lock"
            assert all(process.poll() is None for process in processes)
            time.sleep(0.1)
        assert _schedules(q2_db) == []
        holder.execute("SELECT pg_advisory_unlock(%(lock_ns)s, %(lock_id)s)", key.params)
    outputs = [process.communicate(timeout=120) for process in processes]
    assert [process.returncode for process in processes] == [0, 0, 0], outputs
    summaries = sorted(out.strip().splitlines()[-1] for out, _ in outputs)
    n = len(SCHEDULED_JOBS)
    assert summaries == [f"create {n}", f"unchanged {n}", f"unchanged {n}"]
    names = [row[0] for row in _schedules(q2_db)]
    assert names == [q2.schedule_name(job) for job in SCHEDULED_JOBS]


def test_post_migrate_hook_is_opt_in_and_check_reports_unsynced(q2_db: str) -> None:
    plain = _manage(q2_db, "migrate", "--verbosity", "0")
    assert plain.returncode == 0, plain.stderr
    assert _schedules(q2_db) == []
    check = _manage(q2_db, "check", "--database", "default")
    assert "django_advisory_cron.W064" in check.stderr
    assert "would create: advisory_cron:q2_every_minute" in check.stderr

    hooked = _manage(q2_db, "migrate", "--verbosity", "1", Q2_SYNC_ON_MIGRATE="1")
    assert hooked.returncode == 0, hooked.stderr
    assert "created: advisory_cron:q2_every_minute" in hooked.stdout
    assert [row[0] for row in _schedules(q2_db)] == [
        q2.schedule_name(job) for job in SCHEDULED_JOBS
    ]
    check = _manage(q2_db, "check", "--database", "default")
    assert "W064" not in check.stderr, check.stderr


# -- checks -------------------------------------------------------------------------------------


def test_q2_checks_are_registered_only_with_django_q(db_url: str) -> None:
    registered = {
        (getattr(check, "__module__", ""), getattr(check, "__name__", ""))
        for check in checks.registry.registry.registered_checks
    }
    assert (q2.check_schedules_synced.__module__, "check_schedules_synced") not in registered
    assert ("django_advisory_cron.checks.configuration", "check_jobs") in registered
    done = _manage(db_url, "check", Q2_RETRY="5", Q2_TIMEOUT="10")
    assert "django_advisory_cron.W061" in done.stderr, done.stderr


@pytest.mark.usefixtures("fresh_registry")
def test_q_cluster_checks() -> None:
    @locked_task(name="long_nightly", schedule="0 2 * * *", max_runtime=600)
    def long_nightly() -> None:
        """Runs for up to ten minutes."""

    def ids(q_cluster: dict[str, Any]) -> list[str]:
        with override_settings(Q_CLUSTER=q_cluster):
            return [message.id or "" for message in q2.check_q_cluster()]

    assert ids({"timeout": 900, "retry": 1000}) == []
    assert ids({}) == ["django_advisory_cron.W060"]
    assert ids({"timeout": 60, "retry": 60}) == [
        "django_advisory_cron.W061",
        "django_advisory_cron.W062",
    ]
    assert ids({"timeout": 900, "retry": 1000, "time_zone": "Europe/Paris"}) == [
        "django_advisory_cron.W063"
    ]

    @locked_task(name="spread_nightly", schedule="0 3 * * *", jitter=1200)
    def spread_nightly() -> None:
        """Waits up to twenty minutes for its start, in the task."""

    with override_settings(Q_CLUSTER={"timeout": 900, "retry": 1000}):
        [outlasts] = q2.check_q_cluster()
    assert outlasts.id == "django_advisory_cron.W062"
    assert outlasts.msg == (
        "Job 'spread_nightly' waits up to 1200s (its jitter) before it starts but django-q2 "
        "kills tasks after Q_CLUSTER['timeout'] = 900s."
    )
    registry.unregister("spread_nightly")

    @locked_task(name="spread_and_long", schedule="0 4 * * *", jitter=300, max_runtime=800)
    def spread_and_long() -> None:
        """Waits up to five minutes, then runs up to 800 s."""

    with override_settings(Q_CLUSTER={"timeout": 1000, "retry": 1100}):
        [outlasts] = q2.check_q_cluster()
    assert outlasts.msg == (
        "Job 'spread_and_long' may take 1100s (up to 300s of jitter, then max_runtime) but "
        "django-q2 kills tasks after Q_CLUSTER['timeout'] = 1000s."
    )


# -- the runner entry point (in this process, real database) ------------------------------------


@pytest.fixture
def hourly(db_url: str, fresh_registry: None) -> str:
    @locked_task(name="q2_hourly_probe", schedule="0 * * * *")
    def q2_hourly_probe() -> None:
        Marker.objects.create(job="q2_hourly_probe", pid=os.getpid())

    return "q2_hourly_probe"


def _db_now(url: str) -> datetime:
    now: datetime = _sql(url, "SELECT now()")[0][0]
    return now


def test_tick_is_the_intended_time_not_the_pickup_time(db_url: str, hourly: str) -> None:
    intended = _db_now(db_url).replace(minute=0, second=0, microsecond=0)
    summary = q2.run_scheduled(hourly, intended=intended.isoformat())
    assert summary["runs"] == [
        {
            "tick": intended.isoformat(),
            "status": "succeeded",
            "run_id": summary["runs"][0]["run_id"],
        }
    ]
    again = q2.run_scheduled(hourly, intended=intended.isoformat())  # a redelivery
    assert [run["status"] for run in again["runs"]] == ["skipped_tick"]
    assert Marker.objects.filter(job=hourly).count() == 1


@pytest.mark.parametrize(
    ("policy", "expected_runs", "passed_over"),
    [("latest", 1, 3), ("all", 4, 0), ("none", 0, 4)],
)
def test_catch_up_policy(
    db_url: str, hourly: str, policy: str, expected_runs: int, passed_over: int
) -> None:
    latest = _db_now(db_url).replace(minute=0, second=0, microsecond=0)
    stale = latest - timedelta(hours=3)  # django-q2 was down for three ticks
    with override_settings(ADVISORY_CRON={"CATCH_UP": policy}):
        summary = q2.run_scheduled(hourly, intended=stale.isoformat())
    if _db_now(db_url).replace(minute=0, second=0, microsecond=0) != latest:
        pytest.skip("an hour boundary passed during the test")
    ticks = [run["tick"] for run in summary["runs"]]
    assert len(ticks) == expected_runs
    assert len(summary["passed_over"]) == passed_over
    assert Marker.objects.filter(job=hourly).count() == expected_runs
    if policy == "latest":
        assert ticks == [latest.isoformat()]
    if policy == "all":
        assert ticks == [(stale + timedelta(hours=h)).isoformat() for h in range(4)]
    ran = JobRun.objects.filter(job=hourly, status=RunStatus.SUCCEEDED)
    assert sorted(run.tick.isoformat() for run in ran if run.tick) == sorted(ticks)


@pytest.mark.usefixtures("fresh_registry")
def test_long_downtime_catches_up_with_recent_ticks_only(db_url: str) -> None:
    @locked_task(name="q2_minutely_probe", schedule="* * * * *")
    def q2_minutely_probe() -> None:
        Marker.objects.create(job="q2_minutely_probe", pid=os.getpid())

    stale = _db_now(db_url).replace(second=0, microsecond=0) - timedelta(hours=3)
    latest = q2.run_scheduled("q2_minutely_probe", intended=stale.isoformat())
    now = _db_now(db_url)
    [run] = latest["runs"]
    assert timedelta(0) <= now - datetime.fromisoformat(run["tick"]) < timedelta(seconds=62)
    assert len(latest["passed_over"]) == q2.MAX_CATCH_UP - 1  # listed up to the cap

    with override_settings(ADVISORY_CRON={"CATCH_UP": "all"}):
        every = q2.run_scheduled("q2_minutely_probe", intended=stale.isoformat())
    ticks = [datetime.fromisoformat(run["tick"]) for run in every["runs"]]
    assert len(ticks) == q2.MAX_CATCH_UP
    assert all(b - a == timedelta(minutes=1) for a, b in itertools.pairwise(ticks))
    assert [run["status"] for run in every["runs"]].count("skipped_tick") <= 2  # ran by "latest"
    assert Marker.objects.filter(job="q2_minutely_probe").count() == sum(
        run["status"] == "succeeded" for run in [*latest["runs"], *every["runs"]]
    )


@pytest.mark.usefixtures("fresh_registry")
def test_a_jittered_job_waits_in_the_task_for_its_ticks_start(db_url: str) -> None:
    """django-q2 fires a schedule at its minute; the run starts at the tick plus the offset
    every replica computes alike, and claims the tick itself. The job's name is picked so that
    its start is 1 to 4 s away (offsets are a hash of the name and the tick). In a minute's
    last seconds no offset is that far from now within the minute: the next minute is waited
    for."""
    wait_for(lambda: _db_now(db_url).second < 50, timeout=15, interval=0.2)
    now = _db_now(db_url)
    tick = now.replace(second=0, microsecond=0)
    name = next(
        candidate
        for candidate in (f"q2_jittered_{n}" for n in range(5000))
        if 1 < (start_of(candidate, tick, 59) - now).total_seconds() < 4
    )

    @locked_task(name=name, schedule="* * * * *", jitter=59)
    def jittered() -> None:
        Marker.objects.create(job=name, pid=os.getpid())

    summary = q2.run_scheduled(name, intended=tick.isoformat())
    [run] = JobRun.objects.filter(job=name)
    assert summary["runs"] == [{"tick": tick.isoformat(), "status": "succeeded", "run_id": run.pk}]
    assert run.tick == tick
    assert run.started >= start_of(name, tick, 59)
    again = q2.run_scheduled(name, intended=tick.isoformat())  # a redelivery: the tick is taken
    assert [ran["status"] for ran in again["runs"]] == ["skipped_tick"]
    assert Marker.objects.filter(job=name).count() == 1


@pytest.mark.usefixtures("fresh_registry")
def test_a_jittered_job_delivered_after_its_start_runs_at_once(db_url: str) -> None:
    now = _db_now(db_url)
    tick = now.replace(second=0, microsecond=0) - timedelta(minutes=1)
    name = next(
        candidate
        for candidate in (f"q2_jittered_late_{n}" for n in range(5000))
        if start_of(candidate, tick, 30) < now
    )

    @locked_task(name=name, schedule="* * * * *", jitter=30, catch_up="latest", max_lateness=120)
    def jittered() -> None:
        Marker.objects.create(job=name, pid=os.getpid())

    started = time.monotonic()
    summary = q2.run_scheduled(name, intended=tick.isoformat())
    assert time.monotonic() - started < 30  # no wait for a start that has passed
    assert [ran["status"] for ran in summary["runs"]] == ["succeeded"]


def test_odd_deliveries(db_url: str, hourly: str) -> None:
    off_tick = _db_now(db_url).replace(minute=30, second=0, microsecond=0) - timedelta(hours=1)
    summary = q2.run_scheduled(hourly, intended=off_tick.isoformat())
    assert summary["runs"][0]["tick"] is None  # not a tick: run guarded by the lock only
    assert summary["runs"][0]["status"] == "succeeded"
    assert q2.run_scheduled("no_such_job", intended=off_tick.isoformat())["error"] == "unknown job"
    plain = q2.run_scheduled(hourly)  # a hand-made schedule without the intended kwarg
    assert plain["runs"][0]["status"] in ("succeeded", "skipped_tick")


def test_failed_run_is_reraised_and_its_redelivery_skips(db_url: str) -> None:
    intended = _db_now(db_url).replace(minute=0, second=0, microsecond=0)
    with pytest.raises(RuntimeError, match="boom"):
        q2.run_scheduled("failing", intended=intended.isoformat())
    again = q2.run_scheduled("failing", intended=intended.isoformat())
    assert [run["status"] for run in again["runs"]] == ["skipped_tick"]


# -- real clusters ------------------------------------------------------------------------------

ENQUEUE_TWICE = """
from django_q.tasks import async_task
from django_q.models import OrmQ
intended = {intended!r}
async_task({runner!r}, {job!r}, intended=intended)
# The very same task package delivered twice (as by a second scheduler or a broker replay),
# and a second task for the same tick.
first = OrmQ.objects.get()
OrmQ.objects.create(key=first.key, payload=first.payload, lock=first.lock)
async_task({runner!r}, {job!r}, intended=intended)
"""


def test_duplicate_deliveries_run_once(q2_db: str, clusters: Callable[..., list[Cluster]]) -> None:
    """Each delivery's skip is recorded (``RECORD_SKIPS``), proving all three ran."""
    group = clusters(2, Q2_RECORD_SKIPS="1")
    intended = _current_minute(q2_db)
    _enqueue(
        q2_db, ENQUEUE_TWICE.format(intended=intended.isoformat(), runner=q2.RUNNER, job=TICK_JOB)
    )
    _wait_queue_empty(q2_db, group)
    runs = JobRun.objects.filter(job=TICK_JOB)
    statuses = Counter(run.status for run in runs)
    assert statuses[RunStatus.SUCCEEDED] == 1, statuses
    assert statuses[RunStatus.SKIPPED_LOCKED] + statuses[RunStatus.SKIPPED_TICK] == 2, statuses
    assert {run.tick for run in runs} == {intended}
    assert Marker.objects.filter(job=TICK_JOB).count() == 1
    print("duplicate deliveries per cluster:", dict(_per_cluster(group, TICK_JOB)))


def test_retry_while_running_is_skipped(q2_db: str, clusters: Callable[..., list[Cluster]]) -> None:
    # The job runs 3 s, retry after 1 s; the retry's skip is recorded (RECORD_SKIPS).
    group = clusters(2, Q2_RETRY="1", Q2_TIMEOUT="10", Q2_RECORD_SKIPS="1")
    intended = _current_minute(q2_db)
    code = (
        "from django_q.tasks import async_task\n"
        f"async_task({q2.RUNNER!r}, {TICK_JOB!r}, intended={intended.isoformat()!r})\n"
    )
    _enqueue(q2_db, code)
    _wait_queue_empty(q2_db, group)
    statuses = Counter(run.status for run in JobRun.objects.filter(job=TICK_JOB))
    assert statuses[RunStatus.SUCCEEDED] == 1, statuses
    assert statuses[RunStatus.SKIPPED_LOCKED] >= 1, statuses
    assert Marker.objects.filter(job=TICK_JOB).count() == 1
    print("retry while running per cluster:", dict(_per_cluster(group, TICK_JOB)))


@pytest.mark.minutes  # two ticks of an every-minute django-q2 schedule
def test_two_clusters_run_each_tick_once(
    q2_db: str, clusters: Callable[..., list[Cluster]]
) -> None:
    started = time.monotonic()
    synced = _manage(q2_db, "sync_schedules")
    assert synced.returncode == 0, synced.stderr
    # The synced row waits for the next minute; make the current one due, so that the first
    # tick is this minute's and the second the next minute's, as django-q2 moves the row on.
    due = _sql(
        q2_db,
        "UPDATE django_q_schedule SET next_run = %s WHERE name = %s RETURNING id",
        _second_half_of_a_minute(q2_db),
        q2.schedule_name(TICK_JOB),
    )
    assert len(due) == 1
    # Both schedulers look at the due row as their clusters start (a 30 s guard cycle), and
    # again 30 s later, early in the next minute. retry (2 s) shorter than the job (3 s): every
    # tick is also redelivered while it runs.
    group = clusters(2, Q2_RETRY="2", Q2_TIMEOUT="10", Q2_GUARD_CYCLE="30")
    deadline = time.monotonic() + 150
    while True:
        for cluster in group:
            cluster.note_pids()
        done = JobRun.objects.filter(job=TICK_JOB, status=RunStatus.SUCCEEDED)
        if done.count() >= 2:
            break
        assert time.monotonic() < deadline, [c.log.read_text()[-3000:] for c in group]
        time.sleep(0.5)
    _wait_queue_empty(q2_db, group)
    runs = list(JobRun.objects.filter(job=TICK_JOB).order_by("started"))
    ticks = sorted({run.tick for run in runs if run.tick})
    assert all(run.tick is not None for run in runs)
    assert len(ticks) >= 2
    assert ticks[1] - ticks[0] == timedelta(minutes=1)
    for tick in ticks:
        assert tick.second == 0 and tick.microsecond == 0
        at_tick = [run for run in runs if run.tick == tick]
        assert [run.status for run in at_tick].count(RunStatus.SUCCEEDED) == 1, at_tick
        for run in at_tick:  # delivered within the tick's minute, or it would be a later tick's
            assert tick <= run.started < tick + timedelta(minutes=1)
    succeeded = sum(run.status == RunStatus.SUCCEEDED for run in runs)
    assert Marker.objects.filter(job=TICK_JOB).count() == succeeded
    print(
        f"ticks observed: {[t.isoformat() for t in ticks]}; per cluster:",
        {name: dict(counts) for name, counts in _per_cluster(group, TICK_JOB).items()},
        f"in {time.monotonic() - started:.0f}s",
    )
