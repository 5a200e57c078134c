"""A paused schedule sent to Celery sends nothing on its ticks, as a paused job runs nothing
(``cronjob pause``, or failure notices with ``"pause": True`` after refused sends); a manual
send still goes. Real ``cronworker`` processes, Debian's ``redis-server``, a real local HTTP
server for the notices' webhook."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from django_advisory_cron.models import EnqueuedTick, JobRun, JobState, RunStatus, Schedule
from django_advisory_cron.ops import control
from tests.celery_servers import TASK, RedisServer, celery_env, needs_redis
from tests.monitor_servers import Recorder, recorder
from tests.waiting import wait_for

pytestmark = [
    needs_redis,
    pytest.mark.usefixtures("transactional_db"),
]


@pytest.fixture
def server() -> Iterator[Recorder]:
    yield from recorder()


def every_second(name: str) -> Schedule:
    return Schedule.objects.create(name=name, job=TASK, deliver="celery", every=1)


def cronworker(spawn: Any, redis: RedisServer, tmp_path: Path, **extra: Any) -> Any:
    settings = {
        "JOBS_MODULE": "no_jobs_module",
        "MAX_SKEW": 0.5,
        "CELERY_APP": "tests.celery_app:app",
        "CELERY_SEND_TIMEOUT": 1,
        **extra,
    }
    env = {"ADVISORY_CRON_JSON": json.dumps(settings)}
    env.update(celery_env(redis.url, tmp_path / "ledger.jsonl"))
    return spawn("cronworker", "--grace", "5", env=env)


def succeeded(name: str) -> int:
    return JobRun.objects.filter(job=name, status=RunStatus.SUCCEEDED).count()


def test_a_paused_schedule_sends_nothing(
    redis: RedisServer, spawn: Any, tmp_path: Path, manage: Any
) -> None:
    every_second("paused")
    every_second("going")
    control.pause("paused", by="ops", reason="broker maintenance")
    worker = cronworker(spawn, redis, tmp_path)
    wait_for(lambda: succeeded("going") >= 3, timeout=30)  # ticks went by for both
    assert not JobRun.objects.filter(job="paused").exists()
    assert not EnqueuedTick.objects.filter(job="paused").exists()
    control.resume("paused")
    wait_for(lambda: succeeded("paused") >= 2, timeout=30)
    worker.terminate()
    _out, err = worker.communicate(timeout=30)
    assert "job paused: tick " in err, err
    assert "not handed over: paused by ops: broker maintenance" in err, err


def test_failure_notices_pause_a_schedule_whose_sends_are_refused(
    redis: RedisServer, server: Recorder, spawn: Any, tmp_path: Path
) -> None:
    redis.stop()
    every_second("refused")
    notices = {"after": 2, "pause": True, "webhook": f"{server.url}/ok/notice"}
    worker = cronworker(spawn, redis, tmp_path, FAILURE_NOTICES=notices, PING_TIMEOUT=2)
    state = wait_for(
        lambda: JobState.objects.filter(job="refused", paused=True).first(), timeout=30
    )
    assert state.paused_by == "failure notices"
    # A tick sent before the pause took effect fails too, and pauses it again ("more than").
    assert re.match(
        r"failed (more than )?2 times in a row \(last: job 'refused': Celery task ", state.reason
    ), state.reason
    redis.start()
    every_second("later")  # not paused: its sends go once the broker is back
    wait_for(lambda: succeeded("later") >= 3, timeout=30)
    worker.terminate()
    _out, err = worker.communicate(timeout=30)
    refused = list(JobRun.objects.filter(job="refused"))
    statuses = [(run.tick, run.status) for run in refused]
    # The sends that made the pause failed. A send already under way when the pause was written
    # may still end either way: one still waiting for the broker when it came back goes.
    assert sum(run.status == RunStatus.FAILED for run in refused) >= 2, statuses
    assert all(run.status in (RunStatus.FAILED, RunStatus.SUCCEEDED) for run in refused), statuses
    # None starts after the pause: no tick later than the first one the worker held back was
    # sent. (Not a time: paused_at is taken before the pause is written, and a busy machine
    # commits it seconds later.)
    assert state.paused_at is not None
    held = re.findall(r"job refused: tick (.+?) not handed over: paused by failure notices", err)
    assert held, err
    first_held = min(datetime.fromisoformat(tick) for tick in held)
    assert all(run.tick is not None and run.tick < first_held for run in refused), [
        (run.tick, run.started, first_held) for run in refused
    ]
    [notice] = [json.loads(r.body) for r in server.requests if r.path == "/ok/notice"]
    assert (notice["event"], notice["job"], notice["paused"]) == ("failing", "refused", True)
