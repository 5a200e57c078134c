"""Push monitors for ticks sent to Celery: a send is a run of its tick for the monitors whose
meaning is "the schedule fired" (Sentry Crons, ping URLs, failure notices), a refused send a
failed one. Real parts only: Debian's ``redis-server`` (stopped, then started), ``runlocked``
processes with the Sentry SDK, and a real local HTTP server receiving the pings, the notices'
webhook and Sentry's envelopes."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from django_advisory_cron import exitcodes
from django_advisory_cron.models import JobRun, RunStatus, Schedule
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


def notices(server: Recorder) -> list[dict[str, Any]]:
    return [json.loads(r.body) for r in server.requests if r.path == "/ok/notice"]


def test_sends_are_reported_to_pings_sentry_and_failure_notices(
    server: Recorder,
    redis: RedisServer,
    manage: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
) -> None:
    # Every minute, with a skew that makes "now" the nearest tick: runlocked sends that tick.
    for name in ("down", "up"):
        Schedule.objects.create(name=name, job=TASK, deliver="celery", cron="* * * * *")
    settings = {
        "JOBS_MODULE": "no_jobs_module",
        "MAX_SKEW": 60,
        "CELERY_APP": "tests.celery_app:app",
        "CELERY_SEND_TIMEOUT": 1,
        "SENTRY_CRONS": True,
        "PING_URL": f"{server.url}/ok/{{job}}",
        "PING_TIMEOUT": 5,
        "FAILURE_NOTICES": {"after": 1, "webhook": f"{server.url}/ok/notice"},
    }
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))
    monkeypatch.setenv("SENTRY_DSN", f"{server.url.replace('://', '://public@')}/1")
    for key, value in celery_env(redis.url, tmp_path / "ledger.jsonl").items():
        monkeypatch.setenv(key, value)
    runlocked = ("runlocked", "--settings=tests.settings_monitoring")

    redis.stop()
    refused = manage(*runlocked, "down")
    assert refused.returncode == exitcodes.CONFIG, refused.stderr
    [failed] = JobRun.objects.filter(job="down")
    assert failed.status == RunStatus.FAILED and failed.tick is not None
    redis.start()
    by_hand = manage(*runlocked, "--manual", "down")  # a manual send ends the streak
    assert by_hand.returncode == 0, by_hand.stderr
    sent = manage(*runlocked, "up")
    assert sent.returncode == 0, sent.stderr
    assert JobRun.objects.get(job="up").status == RunStatus.SUCCEEDED

    # Pings: start, then the outcome, each process's before it exits.
    assert server.paths("/ok/down") == [
        ("GET", "/ok/down/start"),
        ("POST", "/ok/down/1"),
        ("GET", "/ok/down/start"),
        ("GET", "/ok/down"),
    ]
    body = next(r.body for r in server.requests if r.path == "/ok/down/1").decode()
    assert body.startswith(f"job down failed: job 'down': Celery task '{TASK}' for tick ")
    assert body.endswith("start the broker or fix the Celery app's broker_url")
    assert server.paths("/ok/up") == [("GET", "/ok/up/start"), ("GET", "/ok/up")]
    # Failure notices: the refused send is a failure (after 1), the manual send a recovery.
    assert [(n["event"], n["job"], n["failures"]) for n in notices(server)] == [
        ("failing", "down", 1),
        ("recovered", "down", 1),
    ]
    assert notices(server)[0]["run_id"] == failed.pk
    # Sentry Crons: one check-in pair per tick (a manual send has no tick to check in).
    server.wait_for(lambda: len(server.check_ins()) >= 4)
    check_ins = [(c["monitor_slug"], c["status"]) for c in server.check_ins()]
    assert check_ins == [
        ("down", "in_progress"),
        ("down", "error"),
        ("up", "in_progress"),
        ("up", "ok"),
    ]


def test_a_cronworker_reports_its_sends_without_waiting_for_a_hanging_monitor(
    server: Recorder, redis: RedisServer, spawn: Any, tmp_path: Any
) -> None:
    """The pings of a tick sent to Celery go through the pings' background sender: a monitor
    that never answers slows no send, and every second's tick is sent on time."""
    Schedule.objects.create(name="every-second", job=TASK, deliver="celery", every=1)
    settings = {
        "JOBS_MODULE": "no_jobs_module",
        "MAX_SKEW": 0.5,
        "CELERY_APP": "tests.celery_app:app",
        "CELERY_SEND_TIMEOUT": 1,
        "PING_URL": f"{server.url}/hang/{{job}}",
        "PING_TIMEOUT": 10,
    }
    env = {"ADVISORY_CRON_JSON": json.dumps(settings)}
    env.update(celery_env(redis.url, tmp_path / "ledger.jsonl"))
    # One pool thread: a send that waited for its pings would hold up the next tick's.
    worker = spawn("cronworker", "--grace", "5", "--max-concurrency", "1", env=env)
    server.wait_for(lambda: len(server.paths("/hang/every-second")) >= 1, timeout=30)
    wait_for(lambda: JobRun.objects.filter(job="every-second").count() >= 6, timeout=30)
    server.hang_no_more()  # the worker's stop waits for its pings (up to 10 s each) otherwise
    worker.terminate()
    worker.communicate(timeout=30)
    runs = list(JobRun.objects.filter(job="every-second").order_by("tick"))
    assert all(run.status == RunStatus.SUCCEEDED for run in runs), [r.error for r in runs]
    sent = [(run.tick, run.finished) for run in runs if run.tick and run.finished]
    assert len(sent) == len(runs)
    assert all(b[0] - a[0] == timedelta(seconds=1) for a, b in itertools.pairwise(sent)), sent
    # Each sent well within the 10 s its pings hang for: a send that waited for them would be
    # 10 s late and hold up the next tick's (the margin is for a loaded machine: a send took
    # 4.2 s at a load of 17 on 2 cores).
    late = [(tick, finished) for tick, finished in sent if (finished - tick).total_seconds() > 7]
    assert not late, late
