"""Running a schedule sent to Celery by hand: "Run now" (the admin's button, ``cronjob
trigger``), ``cronjob trigger --here`` and ``runlocked NAME`` send its task once, as a manual
(or, near a tick, that tick's) send recorded in the run history. Real components only: Debian's
``redis-server``, a real Celery worker, real ``cronworker`` processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from django_advisory_cron.models import EnqueuedTick, JobRun, RunStatus, Schedule
from tests.admin_users import logged_in
from tests.celery_servers import (
    TASK,
    RedisServer,
    celery_env,
    celery_worker,
    executions,
    needs_redis,
)
from tests.waiting import wait_for, workers_present

pytestmark = [
    needs_redis,
    pytest.mark.usefixtures("transactional_db"),
]

NAME = "nightly"
OPERATE = "/admin/django_advisory_cron/registeredjob/operate/"


def settings_json() -> str:
    return json.dumps(
        {
            "JOBS_MODULE": "no_jobs_module",
            "CELERY_APP": "tests.celery_app:app",
            "CELERY_SEND_TIMEOUT": 1,
        }
    )


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    return tmp_path / "executions.jsonl"


@pytest.fixture
def observer(raw_connect: Any) -> Any:
    return raw_connect()


@pytest.fixture
def celery_env_set(redis: RedisServer, ledger: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISORY_CRON_JSON", settings_json())
    for key, value in celery_env(redis.url, ledger).items():
        monkeypatch.setenv(key, value)


def nightly() -> Schedule:
    """A schedule far from its next tick: whatever runs it now is a manual run."""
    return Schedule.objects.create(
        name=NAME, job=TASK, deliver="celery", cron="0 3 29 2 *", kwargs={"k": "v"}
    )


@pytest.mark.usefixtures("celery_env_set")
def test_run_now_sends_the_task_once_from_one_of_two_cronworkers(
    redis: RedisServer, ledger: Path, manage: Any, spawn: Any, observer: Any
) -> None:
    nightly()
    env = {"ADVISORY_CRON_JSON": settings_json(), **celery_env(redis.url, ledger)}
    with celery_worker(redis.url, ledger):
        workers = [spawn("cronworker", "--grace", "5", env=env) for _ in range(2)]
        wait_for(lambda: workers_present(observer) == 2, timeout=30)
        asked = manage("cronjob", "trigger", NAME)
        assert asked.returncode == 0, asked.stderr
        [entry] = wait_for(lambda: executions(ledger), timeout=30)
        for worker in workers:
            worker.terminate()
        errors = [worker.communicate(timeout=30)[1] for worker in workers]
    [run] = JobRun.objects.filter(job=NAME)
    assert (run.status, run.manual, run.tick, run.error) == (RunStatus.SUCCEEDED, True, None, "")
    assert run.task_id == entry["task_id"]
    assert entry["job"] == NAME and entry["kwargs"] == {"k": "v"} and entry["tick"]
    assert not EnqueuedTick.objects.filter(job=NAME).exists()  # no tick was claimed
    assert len(executions(ledger)) == 1
    assert sum(f"{NAME}: run now sent (deliver=celery) as task " in err for err in errors) == 1


@pytest.mark.usefixtures("celery_env_set")
def test_trigger_here_and_runlocked_send_the_task(
    redis: RedisServer, ledger: Path, manage: Any
) -> None:
    nightly()
    with celery_worker(redis.url, ledger):
        here = manage("cronjob", "trigger", "--here", NAME)
        assert here.returncode == 0, here.stderr
        assert f"{NAME}: sent (manual run) to Celery (celery) as task " in here.stdout
        by_hand = manage("runlocked", "--manual", NAME)
        assert by_hand.returncode == 0, by_hand.stderr
        plain = manage("runlocked", NAME)  # off the schedule: an unscheduled send
        assert plain.returncode == 0, plain.stderr
        assert f"{NAME}: sent (no tick) to Celery (celery) as task " in plain.stdout
        done = wait_for(lambda: (found := executions(ledger))[2:] and found, timeout=30)
    rows = list(JobRun.objects.filter(job=NAME).order_by("id"))
    assert [(row.status, row.manual, row.tick) for row in rows] == [
        (RunStatus.SUCCEEDED, True, None),
        (RunStatus.SUCCEEDED, True, None),
        (RunStatus.SUCCEEDED, False, None),
    ]
    assert [row.task_id for row in rows] == [entry["task_id"] for entry in done]


@pytest.mark.usefixtures("celery_env_set")
def test_a_manual_send_the_broker_refuses_is_a_failed_manual_run(
    redis: RedisServer, manage: Any
) -> None:
    nightly()
    redis.stop()
    refused = manage("runlocked", "--manual", NAME)
    assert refused.returncode != 0
    assert f"Celery's broker {redis.url} did not take it" in refused.stderr
    [run] = JobRun.objects.filter(job=NAME)
    assert (run.status, run.manual, run.tick) == (RunStatus.FAILED, True, None)
    assert run.error.startswith(f"job {NAME!r}: Celery task {TASK!r} for tick ")
    assert "\n" not in run.error


@pytest.mark.usefixtures("celery_env_set")
def test_the_admins_run_now_sends_the_task(
    redis: RedisServer, ledger: Path, spawn: Any, observer: Any, django_user_model: Any
) -> None:
    nightly()
    env = {"ADVISORY_CRON_JSON": settings_json(), **celery_env(redis.url, ledger)}
    operator = logged_in(django_user_model, "ops", ["view_registeredjob", "operate_job"])
    with celery_worker(redis.url, ledger):
        worker = spawn("cronworker", "--grace", "5", env=env)
        wait_for(lambda: workers_present(observer) == 1, timeout=30)
        pressed = operator.post(OPERATE, {"job": NAME, "operation": "run"}, follow=True)
        assert f"Job {NAME}: run requested" in pressed.content.decode()
        [entry] = wait_for(lambda: executions(ledger), timeout=30)
        worker.terminate()
        worker.communicate(timeout=30)
    [run] = JobRun.objects.filter(job=NAME)
    assert (run.status, run.manual, run.task_id) == (RunStatus.SUCCEEDED, True, entry["task_id"])
