"""Celery as a delivery target (``deliver="celery"``), with real components only: Debian's
``redis-server`` as the broker (started here on a free loopback port), a real Celery worker
executing the task, and real ``cronworker`` processes against the test PostgreSQL.

Each tick is sent once by whichever worker wins it and executed once by Celery; a broker that
is down is a failed tick in the run history with a one-line error, and the worker goes on."""

from __future__ import annotations

import itertools
import json
import socket
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from django_advisory_cron.contrib.celery import TICK_HEADER, tick_of
from django_advisory_cron.contrib.celery.deliverer import SEND_ATTEMPTS, diagnose
from django_advisory_cron.delivery.targets import DeliveryError
from django_advisory_cron.jobs.definitions import Definition, to_job
from django_advisory_cron.models import EnqueuedTick, JobRun, RunStatus, Schedule
from tests.celery_servers import (
    TASK,
    RedisServer,
    celery_env,
    celery_worker,
    executions,
    needs_redis,
)
from tests.test_cronjob_import import _lines, _manage, _rows, import_db  # noqa: F401 (a fixture)
from tests.waiting import wait_for

pytestmark = needs_redis

NAME = "every-second"
#: Seconds one attempt to reach the broker may take, in these tests.
SEND_TIMEOUT = 1


def settings_json(**extra: Any) -> str:
    return json.dumps(
        {
            "JOBS_MODULE": "no_jobs_module",  # only the database's schedule
            "MAX_SKEW": 0.5,
            "CELERY_APP": "tests.celery_app:app",
            "CELERY_SEND_TIMEOUT": SEND_TIMEOUT,
            **extra,
        }
    )


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    return tmp_path / "executions.jsonl"


def every_second() -> Schedule:
    return Schedule.objects.create(
        name=NAME, job=TASK, deliver="celery", every=1, args=["a", 1], kwargs={"k": "v"}
    )


def cronworkers(spawn: Any, broker: str, ledger: Path, count: int, **settings: Any) -> list[Any]:
    env = {"ADVISORY_CRON_JSON": settings_json(**settings), **celery_env(broker, ledger)}
    return [spawn("cronworker", "--grace", "5", env=env) for _ in range(count)]


def stop(workers: list[Any]) -> list[str]:
    for worker in workers:
        worker.terminate()
    return [worker.communicate(timeout=30)[1] for worker in workers]


def runs() -> list[JobRun]:
    return list(JobRun.objects.filter(job=NAME).order_by("tick"))


def tick(run: JobRun) -> datetime:
    assert run.tick is not None
    return run.tick


@pytest.mark.slow
@pytest.mark.usefixtures("transactional_db")
def test_three_cronworkers_send_each_tick_once_and_celery_runs_it_once(
    redis: RedisServer, ledger: Path, spawn: Any
) -> None:
    every_second()
    with celery_worker(redis.url, ledger):
        workers = cronworkers(spawn, redis.url, ledger, 3)
        wait_for(lambda: len(executions(ledger)) >= 8, timeout=40)
        errors = stop(workers)
        sent = runs()
        # Every tick sent before the stop is executed; nothing else is.
        wait_for(lambda: len(executions(ledger)) >= len(sent), timeout=20)
    done = executions(ledger)
    assert all(run.status == RunStatus.SUCCEEDED for run in sent), [
        (run.status, run.error) for run in sent
    ]
    ticks = [tick(run) for run in sent]
    assert len(set(ticks)) == len(ticks)
    # None missing: consecutive seconds from the first tick to the last.
    assert all(b - a == timedelta(seconds=1) for a, b in itertools.pairwise(ticks))
    executed = Counter(datetime.fromisoformat(entry["tick"]) for entry in done)
    duplicates = {moment: count for moment, count in executed.items() if count > 1}
    assert not duplicates
    assert set(executed) == set(ticks)
    by_tick = {tick(run): run.task_id for run in sent}
    assert all(by_tick[datetime.fromisoformat(entry["tick"])] == entry["task_id"] for entry in done)
    assert {(entry["job"], json.dumps([entry["args"], entry["kwargs"]])) for entry in done} == {
        (NAME, json.dumps([["a", 1], {"k": "v"}]))
    }
    claims = EnqueuedTick.objects.filter(job=NAME)
    assert sorted(claims.values_list("tick", flat=True)) == ticks
    assert all(claim.task_id for claim in claims)
    # Wins spread over the workers; none logged a failed send.
    print(f"\n{len(ticks)} ticks, hosts/pids: {Counter(run.pid for run in sent)}")
    assert not [line for err in errors for line in err.splitlines() if "not enqueued" in line]


@pytest.mark.slow
@pytest.mark.usefixtures("transactional_db")
def test_a_broker_that_is_down_is_a_failed_tick_and_the_worker_goes_on(
    redis: RedisServer, ledger: Path, spawn: Any
) -> None:
    redis.stop()  # a real broker, stopped: nothing listens on its port
    every_second()
    [worker] = cronworkers(spawn, redis.url, ledger, 1)
    failed = wait_for(
        lambda: (rows := [run for run in runs() if run.status == RunStatus.FAILED])[1:] and rows,
        timeout=30,
    )
    for run in failed:
        assert "\n" not in run.error
        assert run.error.startswith(f"job {NAME!r}: Celery task {TASK!r} for tick ")
        assert f"Celery's broker {redis.url} did not take it (" in (run.error)
        assert run.error.endswith("start the broker or fix the Celery app's broker_url")
        assert run.finished is not None
        # Bounded: the attempts' pauses and timeouts, plus slack for a loaded machine.
        assert (run.finished - run.started).total_seconds() < SEND_ATTEMPTS * SEND_TIMEOUT + 3
    assert not EnqueuedTick.objects.filter(tick__in=[tick(run) for run in failed]).exists()
    # The worker goes on: once the broker is back, the next ticks are sent.
    redis.start()
    wait_for(lambda: any(run.status == RunStatus.SUCCEEDED for run in runs()), timeout=30)
    assert worker.poll() is None
    [err] = stop([worker])
    refused = [line for line in err.splitlines() if "not enqueued" in line]
    assert len(refused) >= len(failed)
    assert all(f"Celery's broker {redis.url} did not take it" in line for line in refused)
    rows = runs()
    assert len({tick(run) for run in rows}) == len(rows)


@pytest.mark.usefixtures("transactional_db")
def test_runlocked_enqueue_sends_one_message_with_the_tick(
    redis: RedisServer, ledger: Path, manage: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Off the schedule's grid (a daily cron), ``runlocked --enqueue`` sends the task now: the
    message's header carries the moment it was sent for."""
    Schedule.objects.create(name="nightly", job=TASK, deliver="celery", cron="0 3 * * *")
    monkeypatch.setenv("ADVISORY_CRON_JSON", settings_json())
    for key, value in celery_env(redis.url, ledger).items():
        monkeypatch.setenv(key, value)
    with celery_worker(redis.url, ledger):
        done = manage("runlocked", "--enqueue", "nightly")
        assert done.returncode == 0, done.stderr
        [entry] = wait_for(lambda: executions(ledger), timeout=20)
    assert entry["job"] == "nightly" and entry["args"] == [] and entry["tick"]


def test_tick_of_reads_the_header() -> None:
    class Request:
        headers = {TICK_HEADER: "2026-01-02T03:04:05+00:00"}

    assert tick_of(Request()) == datetime.fromisoformat("2026-01-02T03:04:05+00:00")
    assert tick_of(object()) is None


@override_settings(ADVISORY_CRON={"SCHEDULE_CELERY_TASKS": ["proj.tasks.cleanup"]})
def test_a_schedule_sent_to_celery_names_an_allowed_task_and_no_command() -> None:
    sent = Definition(name="x", job="proj.tasks.cleanup", deliver="celery:reports", every=60)
    assert sent.problems(known=[]) == []
    assert sent.calls == "Celery task proj.tasks.cleanup"
    command = Definition(name="y", command="clearsessions", deliver="celery", every=60)
    assert command.problems(known=[]) == [
        "a schedule sent to Celery names the Celery task as its job; a management command "
        "runs here, not in Celery"
    ]
    job = to_job(sent)
    assert job.description == "Celery task proj.tasks.cleanup"
    with pytest.raises(Exception, match="is sent to Celery's workers, not run here"):
        job.func()


@pytest.mark.parametrize(
    ("app", "expected"),
    [
        ("tests.nowhere:app", "'tests.nowhere:app', which cannot be imported: No module named"),
        ("tests.celery_app.json", "'tests.celery_app.json', which is not a Celery app"),
    ],
)
def test_the_app_check_names_what_is_wrong(app: str, expected: str) -> None:
    job = to_job(Definition(name="x", job=TASK, deliver="celery", every=60))
    with override_settings(ADVISORY_CRON={"CELERY_APP": app}):
        [problem] = diagnose(job)
    assert problem.check_id == "E071"
    assert f"Job 'x' has deliver='celery', but ADVISORY_CRON['CELERY_APP'] is {expected}" in (
        problem.message
    )


def run_check(code: str) -> subprocess.CompletedProcess[str]:
    """``manage.py check`` in a process that first runs ``code``, with one settings schedule
    sent to Celery (no database needed)."""
    schedule = {"name": "c", "job": TASK, "deliver": "celery", "every": 60}
    settings = {"JOBS_MODULE": "no_jobs_module", "SCHEDULES": [schedule]}
    script = (
        f"{code}\nimport os, sys\nsys.path.insert(0, {str(Path(__file__).parent.parent)!r})\n"
        "os.environ['DJANGO_SETTINGS_MODULE'] = 'tests.settings_typecheck'\n"
        "from django.core.management import execute_from_command_line\n"
        "execute_from_command_line(['manage.py', 'check', '--tag', 'advisory_cron'])\n"
    )
    env = {"ADVISORY_CRON_JSON": json.dumps(settings), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )


def test_checks_without_celery_and_without_an_app() -> None:
    missing = run_check("import sys; sys.modules['celery'] = None")
    assert "django_advisory_cron.E070" in missing.stderr, missing.stderr
    assert "Celery is not installed" in missing.stderr
    no_app = run_check("")
    assert "django_advisory_cron.E071" in no_app.stderr, no_app.stderr
    assert "no Celery app is loaded" in no_app.stderr
    found = run_check("from celery import Celery; app = Celery('proj')")
    assert "E07" not in found.stderr, found.stderr


@pytest.mark.usefixtures("import_db")  # django-celery-beat's and django-q2's tables
def test_cronjob_import_deliver_celery_keeps_the_tasks_and_their_queues(db_url: str) -> None:
    """``cronjob import --from celery-beat --deliver celery``: every entry that has a schedule
    here becomes a schedule sending its task by its own name (registered job or not), on its
    queue; a second import changes nothing."""
    command = ("cronjob", "import", "--from", "celery-beat", "--deliver", "celery")
    dry = _manage(db_url, *command, "--dry-run")
    assert dry.returncode == 2, dry.stdout + dry.stderr  # the solar and first-Monday entries
    said = _lines(dry)
    assert said["CELERY_BEAT_SCHEDULE['weekday-report']"].endswith(
        "would import, calling Celery task tests.jobsapp.import_tasks.send_report("
        "period=hourly) (deliver=celery:reports), 0,15,30,45 9-17 * * 1-5 in Europe/Paris"
    )
    assert (
        "would import, calling Celery task proj.tasks.gone() (deliver=celery)"
        in (said["CELERY_BEAT_SCHEDULE['unknown-task']"])
    )
    assert "6 of 8 entries would import" in dry.stdout
    assert _rows(db_url) == {}
    done = _manage(db_url, *command)
    assert done.returncode == 2, done.stdout + done.stderr
    rows = _rows(db_url)
    assert {name: (row["job"], row["deliver"]) for name, row in rows.items()} == {
        "weekday-report": ("tests.jobsapp.import_tasks.send_report", "celery:reports"),
        "purge-every-10-minutes": ("tests.jobsapp.import_tasks.purge_tokens", "celery"),
        "report-by-name": ("send_report", "celery"),
        "report-by-schedule": ("send_report", "celery"),
        "unknown-task": ("proj.tasks.gone", "celery"),
        "bad-arguments": ("purge", "celery"),
    }
    again = _manage(db_url, *command)
    assert again.stdout.count(": already there") == 6, again.stdout
    assert _rows(db_url) == rows
    other = _manage(db_url, "cronjob", "import", "--from", "crontab", "--deliver", "celery")
    assert other.returncode == 2
    assert "--deliver celery sends Celery tasks: it applies to --from celery-beat or " in (
        other.stderr
    )


#: The Celery app of the test below, made there: its broker accepts and never answers.
silent_app: Any = None


@pytest.mark.usefixtures("transactional_db")
def test_a_broker_that_never_answers_is_a_bounded_failed_tick() -> None:
    """A real TCP listener that never answers (a hung broker, a firewall dropping replies):
    the send gives up within its attempts' timeouts, and the tick is a failed run."""
    global silent_app
    from celery import Celery

    from django_advisory_cron.contrib.celery import CeleryDeliverer

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        url = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
        silent_app = Celery("silent", broker=url, set_as_current=False)
        job = to_job(Definition(name="silent", job=TASK, deliver="celery", every=60))
        due = datetime.now(tz=timezone.utc).replace(second=0, microsecond=0)
        settings = {"CELERY_APP": f"{__name__}:silent_app", "CELERY_SEND_TIMEOUT": SEND_TIMEOUT}
        started = time.monotonic()
        with override_settings(ADVISORY_CRON=settings), pytest.raises(DeliveryError) as refused:
            CeleryDeliverer().deliver(job, due)
        took = time.monotonic() - started
    assert took < SEND_ATTEMPTS * (SEND_TIMEOUT + 0.5) + 2, took
    [run] = JobRun.objects.filter(job="silent")
    assert (run.status, run.tick, run.error) == (RunStatus.FAILED, due, str(refused.value))
    assert f"Celery's broker {url} did not take it (" in run.error
    assert "\n" not in run.error
    print(f"\nsilent broker: gave up after {took:.2f} s: {run.error}")
