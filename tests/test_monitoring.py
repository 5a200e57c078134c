"""Monitoring with real parts: the health and metrics views over HTTP, Sentry Crons and ping URLs
from real ``runlocked`` replicas to a real local HTTP server, OpenTelemetry with the real SDK."""

from __future__ import annotations

import json
import math
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.db.models import F
from django.test import Client
from django.test.utils import CaptureQueriesContext, override_settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from django_advisory_cron import exitcodes, locked_task
from django_advisory_cron.jobs.job import Job
from django_advisory_cron.models import JobRun, RunStatus
from django_advisory_cron.ops import monitoring
from django_advisory_cron.ops.charts import STATUS_COLOURS, job_charts
from tests.monitor_servers import Recorder, recorder

HEALTH, METRICS = "/cron/health/", "/cron/metrics/"
TOKEN = "s3cret-token-0123456789"


@pytest.fixture
def server() -> Iterator[Recorder]:
    yield from recorder()


def access(mode: str, **extra: Any) -> Any:
    return override_settings(ADVISORY_CRON={"ENDPOINT_ACCESS": mode, **extra})


# -- health and access ---------------------------------------------------------------------------


@pytest.fixture
def minutely(db_url: str, fresh_registry: None) -> Job[Any, Any]:
    @locked_task(name="mon.minutely", schedule="* * * * *")
    def minutely() -> None:
        """Runs every minute."""

    return minutely


def test_health_turns_503_when_a_job_becomes_overdue_and_200_when_it_runs(
    minutely: Job[Any, Any],
) -> None:
    client = Client()
    with access("open"):
        minutely.run()
        fresh = client.get(HEALTH)
        assert fresh.status_code == 200, fresh.content
        assert fresh["Cache-Control"].startswith("max-age=0")
        job = next(item for item in fresh.json()["jobs"] if item["job"] == "mon.minutely")
        assert job["last_run"]["status"] == "succeeded" and not job["overdue"]
        # Its only success slides back past MAX_SKEW + OVERDUE_GRACE: the job is overdue.
        # (with its tick: as if no replica had run since).
        JobRun.objects.filter(job="mon.minutely").update(
            started=F("started") - timedelta(minutes=10), tick=F("tick") - timedelta(minutes=10)
        )
        stale = client.get(HEALTH)
        assert stale.status_code == 503
        assert stale.json()["unhealthy"] == ["mon.minutely"]
        assert client.get(HEALTH, {"ignore": "overdue"}).status_code == 200
        unknown = client.get(HEALTH, {"ignore": "slow"})
        assert unknown.status_code == 400 and "unknown problem slow" in unknown.json()["error"]
        minutely.run()
        assert client.get(HEALTH).status_code == 200


def test_access_rules(minutely: Job[Any, Any], django_user_model: Any) -> None:
    anonymous = Client()
    with access("staff"):
        for url in (HEALTH, METRICS):
            assert anonymous.get(url).status_code == 403
        plain = Client()
        plain.force_login(django_user_model.objects.create_user("plain", password="x"))
        assert plain.get(HEALTH).status_code == 403
        staff = Client()
        staff_user = django_user_model.objects.create_user("staff", password="x", is_staff=True)
        staff.force_login(staff_user)
        # Staff alone is not enough: the pages that show the same facts need their permissions.
        assert staff.get(HEALTH).status_code == 403
        staff_user.user_permissions.add(
            *Permission.objects.filter(
                content_type__app_label="django_advisory_cron",
                codename__in=["view_registeredjob", "view_jobrun"],
            )
        )
        staff = Client()
        staff.force_login(staff_user)
        assert staff.get(HEALTH).status_code == 200
        assert staff.get(METRICS).status_code == 200
        assert staff.post(HEALTH).status_code == 405
        assert staff.head(HEALTH).status_code == 200
    with access("token", ENDPOINT_TOKEN=TOKEN):
        missing = anonymous.get(HEALTH)
        assert missing.status_code == 401 and missing["WWW-Authenticate"].startswith("Bearer")
        wrong = anonymous.get(HEALTH, headers={"Authorization": f"Bearer {TOKEN}x"})
        assert wrong.status_code == 401
        # A staff session is no token.
        assert staff.get(METRICS).status_code == 401
        good = {"Authorization": f"Bearer {TOKEN}"}
        assert anonymous.get(HEALTH, headers=good).status_code == 200
        assert anonymous.get(METRICS, headers=good).status_code == 200
    with access("open"):
        assert anonymous.get(HEALTH).status_code == 200


def scrape(client: Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get(METRICS)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_metrics_match_the_run_history(
    minutely: Job[Any, Any], raw_connect: Callable[..., psycopg.Connection[Any]]
) -> None:
    @locked_task(name="mon.broken")
    def broken() -> None:
        raise RuntimeError("disk full")

    minutely.run()
    minutely.run()  # an unscheduled rerun, or a skip of the tick already done
    with pytest.raises(RuntimeError):
        broken()
    old = JobRun.objects.create(
        job="mon.minutely",
        host="h",
        pid=1,
        status=RunStatus.SUCCEEDED,
        started=timezone.now() - timedelta(days=3),
        finished=timezone.now() - timedelta(days=3),
    )
    holder = raw_connect()
    holder.execute(f"SELECT pg_advisory_lock({broken.key.sql})", broken.key.params)

    client = Client()
    with access("open"), CaptureQueriesContext(connection) as captured:
        samples = scrape(client)
    history = [q["sql"] for q in captured.captured_queries if "django_advisory_cron" in q["sql"]]
    # The database's schedules, the history statement (the job states with it), the held locks.
    assert len(history) == 3, history

    def value(name: str, job: str, **labels: str) -> float:
        # A job that is not per tenant: its tenant label is empty.
        key = tuple(sorted({"job": job, "tenant": "", **labels}.items()))
        return samples[(f"advisory_cron_job_{name}", key)]

    runs = JobRun.objects.filter(job="mon.minutely").exclude(pk=old.pk)
    last_success = runs.filter(status="succeeded").latest("started")
    assert value("last_success_timestamp_seconds", "mon.minutely") == pytest.approx(
        last_success.started.timestamp()
    )
    last = JobRun.objects.filter(job="mon.broken").get()
    assert value("last_run_duration_seconds", "mon.broken") == pytest.approx(last.duration)
    for status in RunStatus.values:
        expected = runs.filter(status=status).count()  # the 3-day-old run is outside the window
        assert value("runs", "mon.minutely", status=status) == expected, status
    assert value("runs", "mon.broken", status="failed") == 1
    assert value("failing", "mon.broken") == 1 and value("failing", "mon.minutely") == 0
    assert value("held", "mon.broken") == 1 and value("held", "mon.minutely") == 0
    assert value("overdue", "mon.minutely") == 0 and value("stuck", "mon.broken") == 0
    never = (("job", "mon.broken"), ("tenant", ""))
    assert ("advisory_cron_job_last_success_timestamp_seconds", never) not in samples
    assert value("next_tick_timestamp_seconds", "mon.minutely") == pytest.approx(
        math.ceil(time.time() / 60) * 60, abs=61
    )


def test_the_lateness_histogram_counts_each_run_with_a_tick_at_or_below_each_bound(
    minutely: Job[Any, Any],
) -> None:
    """Runs that started 0.02, 0.1 (a bound: counted at or below it), 3 and 400 s after their
    ticks; a manual run (no tick), a skip and a run outside the window do not count."""
    now = timezone.now().replace(microsecond=0)
    for number, (late, status) in enumerate(
        [
            (0.02, "succeeded"),
            (0.1, "failed"),
            (3, "succeeded"),
            (400, "running"),
            (0.5, "skipped_tick"),
        ]
    ):
        tick = now - timedelta(minutes=10 + number)
        JobRun.objects.create(
            job="mon.minutely",
            host="h",
            pid=1,
            status=status,
            tick=tick,
            started=tick + timedelta(seconds=late),
        )
    JobRun.objects.create(job="mon.minutely", host="h", pid=1, status="succeeded", started=now)
    old = now - timedelta(days=3)
    JobRun.objects.create(
        job="mon.minutely", host="h", pid=1, status="succeeded", tick=old, started=old
    )
    with access("open"):
        samples = scrape(Client())
    job = (("job", "mon.minutely"), ("tenant", ""))

    def bucket(le: str) -> float:
        key = (job[0], ("le", le), job[1])
        return samples[("advisory_cron_job_start_lateness_seconds_bucket", key)]

    assert [bucket(le) for le in ("0.05", "0.1", "0.25", "2.5", "5.0", "300.0", "+Inf")] == [
        1,
        2,
        2,
        2,
        3,
        3,
        4,
    ]
    assert samples[("advisory_cron_job_start_lateness_seconds_count", job)] == 4
    assert samples[("advisory_cron_job_start_lateness_seconds_sum", job)] == pytest.approx(403.12)


# -- charts --------------------------------------------------------------------------------------


def test_chart_has_a_bar_per_run_coloured_by_status(
    minutely: Job[Any, Any], raw_connect: Callable[..., psycopg.Connection[Any]]
) -> None:
    now = timezone.now()
    statuses = [RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.SKIPPED_LOCKED] * 20
    JobRun.objects.bulk_create(
        JobRun(
            job="mon.minutely",
            host=f"replica-{index % 3}",
            pid=100 + index,
            status=status,
            started=now - timedelta(minutes=60 - index),
            finished=now - timedelta(minutes=60 - index) + timedelta(seconds=index),
        )
        for index, status in enumerate(statuses)
    )
    with CaptureQueriesContext(connection) as captured:
        svg = job_charts(["mon.minutely", "mon.never"])
    assert len(captured.captured_queries) == 1
    assert svg["mon.never"] == ""
    chart = svg["mon.minutely"]
    assert chart.count("<rect") == 40  # skips are not runs
    assert chart.count(f'fill="{STATUS_COLOURS[RunStatus.SUCCEEDED]}"') == 20
    assert chart.count(f'fill="{STATUS_COLOURS[RunStatus.FAILED]}"') == 20
    assert "replica-2 pid 102;" not in chart  # a skip
    assert "outside the schedule; replica-0 pid 100; succeeded; 0.0 s" in chart
    assert "replica-1 pid 158; failed; 58.0 s" in chart  # the newest, and the tallest bar
    assert 'height="24" fill="#ba2121"' in chart


# -- OpenTelemetry -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spans() -> Any:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter


@pytest.fixture
def reporting() -> Iterator[Callable[..., list[monitoring.Reporter]]]:
    def connect(**settings: Any) -> list[monitoring.Reporter]:
        with override_settings(ADVISORY_CRON=settings):
            return monitoring.connect()

    yield connect
    monitoring.disconnect()


def test_a_span_per_run(minutely: Job[Any, Any], spans: Any, reporting: Callable[..., Any]) -> None:
    @locked_task(name="mon.broken")
    def broken() -> None:
        raise RuntimeError("disk full")

    assert [r.label for r in reporting(OPENTELEMETRY=True)] == ["OpenTelemetry"]
    spans.clear()
    result = minutely.run()
    with pytest.raises(RuntimeError):
        broken()
    finished = spans.get_finished_spans()
    assert [span.name for span in finished] == ["advisory_cron.run"] * 2
    ok, failed = finished
    assert ok.attributes["advisory_cron.job"] == "mon.minutely"
    assert ok.attributes["advisory_cron.status"] == "succeeded"
    assert ok.attributes["advisory_cron.run_id"] == result.run_id
    assert 0 <= ok.attributes["advisory_cron.lock_wait"] < 5
    assert ok.status.status_code.name == "OK"
    assert failed.attributes["advisory_cron.status"] == "failed"
    assert failed.status.status_code.name == "ERROR"
    assert failed.events[0].name == "exception"
    assert "disk full" in failed.events[0].attributes["exception.message"]


def test_a_failing_reporter_never_fails_a_job_and_is_logged_once(
    db_url: str, fresh_registry: None, caplog: pytest.LogCaptureFixture
) -> None:
    @locked_task(name="mon.plain")
    def plain() -> str:
        return "done"

    class Broken:
        label = "broken monitor"

        def started(self, job: Any, run: Any) -> None:
            raise ConnectionError("monitor down")

        ended = started

    reporter = Broken()
    from django_advisory_cron import signals

    receiver = monitoring.guarded(reporter, reporter.started)
    signals.job_started.connect(receiver, weak=False, dispatch_uid="test-broken")
    signals.job_finished.connect(receiver, weak=False, dispatch_uid="test-broken-end")
    try:
        assert plain() == "done"
        assert plain() == "done"
    finally:
        signals.job_started.disconnect(dispatch_uid="test-broken")
        signals.job_finished.disconnect(dispatch_uid="test-broken-end")
        monitoring.failing.clear()
    warnings = [r.getMessage() for r in caplog.records if "broken monitor" in r.getMessage()]
    assert len(warnings) == 1
    assert "reporting job mon.plain failed (monitor down)" in warnings[0]


# -- ping URLs and Sentry Crons from real replicas -----------------------------------------------


def finish(process: subprocess.Popen[str], started: float) -> tuple[int, str, float]:
    _out, err = process.communicate(timeout=60)
    return process.returncode, err, time.monotonic() - started


@pytest.mark.slow
def test_pings_from_runlocked(
    server: Recorder, spawn: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = {"ping_ok": "ok", "ping_failing": "ok", "ping_hang": "hang", "ping_500": "500"}
    jobs["ping_500_failing"] = "500"
    urls = {job: f"{server.url}/{mode}/{job}" for job, mode in jobs.items()}
    settings = {"JOBS_MODULE": "monitoring_tasks", "PING_URL": urls}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({**settings, "PING_TIMEOUT": 2}))
    started = {job: (spawn("runlocked", job), time.monotonic()) for job in jobs}
    ended = {job: finish(process, at) for job, (process, at) in started.items()}

    # The monitors' answers never change an exit status.
    codes = {job: code for job, (code, _err, _t) in ended.items()}
    assert codes == {
        "ping_ok": exitcodes.OK,
        "ping_failing": exitcodes.JOB_FAILED,
        "ping_hang": exitcodes.OK,
        "ping_500": exitcodes.OK,
        "ping_500_failing": exitcodes.JOB_FAILED,
    }, {job: err[-500:] for job, (_c, err, _t) in ended.items()}
    # A short-lived process still sends its last ping before it exits.
    assert server.paths("/ok/ping_ok") == [("GET", "/ok/ping_ok/start"), ("GET", "/ok/ping_ok")]
    assert server.paths("/ok/ping_failing") == [
        ("GET", "/ok/ping_failing/start"),
        ("POST", "/ok/ping_failing/1"),
    ]
    body = next(r.body for r in server.requests if r.path == "/ok/ping_failing/1")
    assert body == b"job ping_failing failed: disk full"
    # A hanging monitor: the job itself is not slowed, the exit waits PING_TIMEOUT at most.
    hang = JobRun.objects.get(job="ping_hang")
    assert hang.status == RunStatus.SUCCEEDED and hang.duration is not None
    assert hang.duration < 1  # a waiting start ping would have taken PING_TIMEOUT (2 s)
    assert ended["ping_hang"][2] < ended["ping_ok"][2] + 2 + 4
    # Failing monitors are logged once per process, without the URL's secret path.
    for job in ("ping_hang", "ping_500", "ping_500_failing"):
        err = ended[job][1]
        assert err.count("ping URLs:") == 1, (job, err)
        assert f"/{job}" not in err.split("ping URLs:")[1].splitlines()[0]
    assert ("GET", "/500/ping_500/start") in server.paths("/500/")


@pytest.mark.slow
def test_sentry_check_ins_come_once_per_tick_from_the_replica_that_ran(
    server: Recorder, spawn: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    now = timezone.now()
    schedule = f"{now.minute} {now.hour} * * *"
    settings = {"JOBS_MODULE": "monitoring_tasks", "SENTRY_CRONS": True, "MAX_SKEW": 120}
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))
    monkeypatch.setenv("MONITORED_SCHEDULE", schedule)
    monkeypatch.setenv("SENTRY_DSN", f"{server.url.replace('://', '://public@')}/1")
    args = ("runlocked", "--settings=tests.settings_monitoring")

    replicas = [spawn(*args, "monitored", "1") for _ in range(3)]
    failing = spawn(*args, "monitored_failing")
    for process in [*replicas, failing]:
        process.communicate(timeout=60)
    assert [process.returncode for process in replicas] == [exitcodes.OK] * 3
    assert failing.returncode == exitcodes.JOB_FAILED
    runs = JobRun.objects.filter(job="monitored")
    assert runs.filter(status=RunStatus.SUCCEEDED).count() == 1
    server.wait_for(lambda: len(server.check_ins()) >= 4)

    # A late replica finds the tick done: it sends nothing.
    late = spawn(*args, "monitored")
    late.communicate(timeout=60)
    assert late.returncode == exitcodes.OK
    time.sleep(0.5)
    check_ins = server.check_ins()
    by_slug: dict[str, list[dict[str, Any]]] = {}
    for check_in in check_ins:
        by_slug.setdefault(check_in["monitor_slug"], []).append(check_in)
    assert sorted(by_slug) == ["monitored", "monitored_failing"]
    started, ended = by_slug["monitored"]
    assert (started["status"], ended["status"]) == ("in_progress", "ok")
    assert started["check_in_id"] == ended["check_in_id"]
    assert ended["duration"] >= 1
    assert started["monitor_config"] == {
        "schedule": {"type": "crontab", "value": schedule},
        "timezone": "UTC",
        "checkin_margin": 7,  # (MAX_SKEW 120 + OVERDUE_GRACE 300) s, in whole minutes
        "max_runtime": 2,
    }
    assert [c["status"] for c in by_slug["monitored_failing"]] == ["in_progress", "error"]
