"""Jitter (issue 38, item 2) through real processes: two ``cronworker`` replicas start each
tick of a jittered job at its tick plus the same offset, whichever wins it, for a job defined
in code, a schedule in ``ADVISORY_CRON["SCHEDULES"]`` and one kept in the database; each tick
still runs once and keeps its identity; ``runlocked`` started by cron at a tick waits out the
offset and claims that tick; ``cronjob`` refuses a jitter that reaches the next tick (the
offset function itself: tests/unit/test_jitter.py)."""

from __future__ import annotations

import importlib
import json
import signal
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db.models import Count
from django.test import Client
from django.urls import reverse

from django_advisory_cron import exitcodes
from django_advisory_cron.core.jitter import offset
from django_advisory_cron.models import EnqueuedTick, JobRun, RunStatus
from django_advisory_cron.ops.charts import human_lateness
from tests.jobsapp.jitter_values import EVERY, JITTER
from tests.waiting import wait_for, wait_for_workers, workers_present

pytestmark = pytest.mark.usefixtures("transactional_db")

SKIPS = (RunStatus.SKIPPED_TICK, RunStatus.SKIPPED_LOCKED)
#: Every replica's attempt is recorded, a skip too: each row's start is when that replica
#: tried the tick.
SETTINGS = {
    "JOBS_MODULE": "jitter_tasks",
    "RECORD_SKIPS": True,
    "MAX_SKEW": 3,
    "HEARTBEAT": 0.5,
    "LEASE": 1.5,
    "SCHEDULES": [
        {"name": "jitter_settings", "job": "jitter_body", "args": ["jitter_settings"],
         "every": EVERY, "jitter": JITTER},
    ],
}  # fmt: skip
JITTERED = {"jitter_a": JITTER, "jitter_b": JITTER, "jitter_settings": JITTER, "jitter_db": JITTER}
#: How much later than its start a replica may try a tick on a loaded machine (the claim's
#: statement, a worker busy with another job's claim).
TOLERANCE = timedelta(seconds=2.5)
#: How much earlier: the worker's clock is the database's, advanced on the monotonic clock.
EARLY = timedelta(seconds=0.1)


@pytest.fixture
def jittered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(SETTINGS))


def tried_by_both(name: str) -> int:
    """How many ticks of ``name`` both replicas tried (each recorded its attempt)."""
    return (
        JobRun.objects.filter(job=name, tick__isnull=False)
        .values("tick")
        .annotate(tries=Count("pid", distinct=True))
        .filter(tries=2)
        .count()
    )


def lag(run: JobRun, jitter: float) -> timedelta:
    """How long after its tick's start (the tick plus its offset) ``run`` tried it."""
    assert run.tick is not None
    return run.started - (run.tick + offset(run.job, run.tick, jitter))


@pytest.mark.slow
def test_two_replicas_start_each_tick_at_the_same_offset_and_run_it_once(
    jittered: None,
    manage: Any,
    spawn: Any,
    raw_connect: Any,
    django_user_model: Any,
    fresh_registry: None,
) -> None:
    added = manage(
        "cronjob", "add", "jitter_db", "--job", "jitter_body", "--args", '["jitter_db"]',
        "--every", str(EVERY), "--jitter", str(JITTER),
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    observer = raw_connect()
    workers = [spawn("cronworker", "--grace", "5") for _ in range(2)]
    wait_for(lambda: workers_present(observer) == 2)
    names = [*JITTERED, "jitter_none"]
    wait_for(lambda: min(map(tried_by_both, names)) >= 3, timeout=90, interval=0.5)
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    errors = [worker.communicate(timeout=30)[1] for worker in workers]
    assert [worker.returncode for worker in workers] == [exitcodes.SIGTERM] * 2, errors

    offsets = []
    for name in names:
        runs = list(JobRun.objects.filter(job=name, tick__isnull=False))
        for tick in {run.tick for run in runs}:
            of_tick = [run for run in runs if run.tick == tick]
            ran = [run for run in of_tick if run.status not in SKIPS]
            assert len(ran) <= 1, of_tick  # once per tick
            for run in of_tick:  # each replica tried it at its start: the same offset
                late = lag(run, JITTERED.get(name, 0))
                assert -EARLY <= late <= TOLERANCE, (run, late)
            assert tick is not None
            offsets.append(offset(name, tick, JITTERED.get(name, 0)).total_seconds())
        pids = {run.pid for run in runs}
        assert len(pids) == 2, (name, pids)  # both replicas tried its ticks
    # The jittered jobs' offsets are spread over their jitter; the other's are 0.
    assert max(offsets) > 1 and min(offsets) == 0, offsets

    # The history shows each tick's offset: computed as the replicas computed it.
    for name in ("jitter_a", "jitter_db", "jitter_none"):
        shown = manage("cronjob", "history", name, "--json")
        assert shown.returncode == 0, shown.stderr
        for row in json.loads(shown.stdout):
            tick = datetime.fromisoformat(row["tick"])
            wanted = offset(name, tick, JITTERED.get(name, 0)).total_seconds() or None
            assert row["jitter_offset"] == wanted, row
    table = manage("cronjob", "history", "jitter_a").stdout.splitlines()
    assert "OFFSET" in table[0] and all(" +" in line for line in table[1:]), table
    # The admin (this process) knows the jobs' jitter once their module is loaded here too.
    importlib.reload(importlib.import_module("tests.jobsapp.jitter_tasks"))
    user = django_user_model.objects.create_superuser("root", password="pw")
    client = Client()
    client.force_login(user)
    won = JobRun.objects.filter(job="jitter_a", status=RunStatus.SUCCEEDED).first()
    assert won is not None and won.tick is not None
    page = client.get(reverse("admin:django_advisory_cron_jobrun_change", args=[won.pk]))
    shift = human_lateness(offset("jitter_a", won.tick, JITTER).total_seconds())
    assert f"its jitter offset: +{shift}" in page.content.decode(), shift


@pytest.mark.slow
def test_two_schedulers_enqueue_a_delivered_tick_at_its_offset_once(
    jittered: None, spawn: Any, raw_connect: Any
) -> None:
    """A job sent to a task queue (``deliver=``) is enqueued at its tick plus its offset, by
    one of the two replicas, for its tick."""
    schedulers = [spawn("cronworker", "jitter_delivered", "--grace", "5") for _ in range(2)]
    wait_for_workers(raw_connect(), schedulers)
    wait_for(lambda: EnqueuedTick.objects.filter(job="jitter_delivered").count() >= 3, timeout=60)
    for scheduler in schedulers:
        scheduler.send_signal(signal.SIGTERM)
    errors = [scheduler.communicate(timeout=30)[1] for scheduler in schedulers]
    assert [s.returncode for s in schedulers] == [exitcodes.SIGTERM] * 2, errors
    claims = list(EnqueuedTick.objects.filter(job="jitter_delivered"))
    runs = JobRun.objects.filter(job="jitter_delivered", status=RunStatus.SUCCEEDED)
    assert len(runs) == len(claims)  # each enqueued tick ran once, for its tick
    assert {run.tick for run in runs} == {claim.tick for claim in claims}
    for claim in claims:
        start = claim.tick + offset("jitter_delivered", claim.tick, JITTER)
        assert -EARLY <= claim.enqueued - start <= TOLERANCE, (claim, start)


@pytest.mark.slow
def test_runlocked_from_cron_waits_out_the_offset_and_keeps_its_tick(
    spawn: Any, raw_connect: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two replicas' cron start ``runlocked`` near a tick whose offset is 3 s or more: both wait
    it out (their attempts are recorded at the tick's start), one runs it, for that tick."""
    # A process looking up to 4.9 s from the tick finds it (just under half the interval).
    settings = {"JOBS_MODULE": "jitter_tasks", "RECORD_SKIPS": True, "MAX_SKEW": 4.9}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))
    observer = raw_connect()
    now: datetime = observer.execute("SELECT now()").fetchone()[0]
    tick = now.replace(microsecond=0) - timedelta(seconds=now.second % 10)
    while True:
        tick += timedelta(seconds=10)
        if tick - now > timedelta(seconds=1) and offset("jitter_cron", tick, 9).seconds >= 3:
            break
    # As cron on hosts whose clocks are a little ahead would: both 3.5 s before the tick, so
    # that processes slow to start (up to 6.5 s, on a loaded machine) still start before the
    # tick's start and look within MAX_SKEW of the tick; they wait for its start, however
    # early they are.
    wait_for(
        lambda: observer.execute("SELECT now()").fetchone()[0] >= tick - timedelta(seconds=3.5),
        timeout=90,
        interval=0.05,
    )
    processes = [spawn("runlocked", "jitter_cron") for _ in range(2)]
    outputs = [process.communicate(timeout=60) for process in processes]
    assert [process.returncode for process in processes] == [exitcodes.OK] * 2, outputs
    said = sorted(out.strip() for out, _err in outputs)
    assert said[0].startswith("jitter_cron: ran (run "), said
    assert said[1].startswith("jitter_cron: skipped"), said
    runs = list(JobRun.objects.filter(job="jitter_cron"))
    assert {run.tick for run in runs} == {tick}, runs
    assert [run.status for run in runs].count(RunStatus.SUCCEEDED) == 1, runs
    for run in runs:
        assert -EARLY <= lag(run, 9) <= TOLERANCE, (run, lag(run, 9))


def test_cronjob_refuses_a_jitter_that_reaches_the_next_tick(jittered: None, manage: Any) -> None:
    refused = manage(
        "cronjob", "add", "herd", "--job", "jitter_body", "--args", '["herd"]',
        "--schedule", "*/5 * * * *", "--jitter", "300",
    )  # fmt: skip
    assert refused.returncode == exitcodes.USAGE, refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "the jitter (300 s) must be shorter than the shortest" in lines[0]
    assert not JobRun.objects.filter(job="herd").exists()
    accepted = manage(
        "cronjob", "add", "herd", "--job", "jitter_body", "--args", '["herd"]',
        "--schedule", "*/5 * * * *", "--jitter", "299",
    )  # fmt: skip
    assert accepted.returncode == 0, accepted.stderr
    listed = manage("cronjob", "list", "--json")
    jobs = {job["job"]: job for job in json.loads(listed.stdout)["jobs"]}
    assert jobs["herd"]["jitter"] == 299 and jobs["jitter_a"]["jitter"] == JITTER
