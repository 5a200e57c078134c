"""Per-tenant jobs with a real django-tenants project (issue 40): real schemas made by the
tenant model's save, two real ``cronworker`` processes, a per-tenant job that writes into the
tenant's own table. Each (job, schema, tick) runs once across both workers, in its own
schema; a tenant created while they run is picked up, a dropped one is no longer run."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from django_advisory_cron import exitcodes
from django_advisory_cron.core.jitter import TENANT_STEP, offset
from django_advisory_cron.core.moments import UTC
from django_advisory_cron.core.statuses import TICK_TAKING, RunStatus
from django_advisory_cron.ops.charts import human_lateness
from django_advisory_cron.worker.fleet import PRESENCE_NAME
from tests.conftest import manage_env, scratch_database
from tests.monitor_servers import Recorder, recorder
from tests.waiting import wait_for
from tests.warm_start import run_manage, start_manage

pytest.importorskip("django_tenants", reason="django-tenants is not installed (the test extra)")

pytestmark = pytest.mark.slow

SETTINGS = "--settings=tests.settings_tenants"
JOB = "tenant_digest"
#: The statuses of a run that took its tick.
TOOK = [status.value for status in TICK_TAKING]


def manage(url: str, command: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run a command of the tenants' project to its end; fail the test on its failure."""
    done = run_manage(command, SETTINGS, *args, env=manage_env(url, **env), timeout=180)
    assert done.returncode == 0, done.stderr
    return done


def add_tenant(url: str, schema: str) -> None:
    """A tenant saved through the tenant model: its schema made and migrated."""
    manage(
        url,
        "shell",
        "-c",
        "from tests.tenantsapp.models import Client, Domain; "
        f"tenant = Client.objects.create(schema_name={schema!r}, name={schema!r}); "
        f"Domain.objects.create(domain='{schema}.example.com', tenant=tenant, is_primary=True)",
    )


def cronworker(url: str, *names: str, grace: str = "5", **env: str) -> subprocess.Popen[str]:
    """A real ``cronworker`` of the tenants' project running ``names``, started, not waited
    for (its output kept for the test's report)."""
    return start_manage(
        "cronworker", *names, "--grace", grace, SETTINGS, env=manage_env(url, **env)
    )


def drop_tenant(url: str, schema: str) -> None:
    """A tenant deleted through the tenant model: its schema dropped."""
    manage(
        url,
        "shell",
        "-c",
        "from tests.tenantsapp.models import Client; "
        f"Client.objects.get(schema_name={schema!r}).delete(force_drop=True)",
    )


@pytest.fixture(scope="session")
def tenants_template() -> Iterator[str]:
    """The tenants' project, made once in each test process that runs these tests (kept for
    the session: these tests are dealt out among the others, not run in a row): the
    shared schema migrated, the public tenant, and the tenants acme and globex (their schemas
    made and migrated by the tenant model's save); the name of its database."""
    with scratch_database() as url:
        manage(url, "migrate_schemas", "--shared", "-v", "0")
        manage(
            url,
            "shell",
            "-c",
            "from tests.tenantsapp.models import Client; "
            "Client.objects.create(schema_name='public', name='public')",
        )
        for schema in ("acme", "globex"):
            add_tenant(url, schema)
        yield urlsplit(url).path.lstrip("/")


@pytest.fixture
def project(tenants_template: str) -> Iterator[str]:
    """A copy of the tenants' project on a database of its own, for one test."""
    with scratch_database(template=tenants_template) as url:
        yield url


def alive(workers: list[subprocess.Popen[str]]) -> bool:
    """Whether every worker still runs (a worker that exited fails the test at once)."""
    assert all(worker.poll() is None for worker in workers), "a cronworker exited"
    return True


def runs(observer: psycopg.Connection[Any], schema: str) -> int:
    """The runs of the per-tenant job that succeeded for ``schema``."""
    row = observer.execute(
        "SELECT count(*) FROM django_advisory_cron_jobrun WHERE job = %s AND status = %s",
        (f"{JOB}@{schema}", RunStatus.SUCCEEDED.value),
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_each_job_schema_tick_runs_once_in_its_schema_as_tenants_come_and_go(
    project: str,
) -> None:
    observer = psycopg.connect(project, autocommit=True)
    workers = [cronworker(project, JOB) for _ in range(2)]
    try:
        alive = lambda: all(worker.poll() is None for worker in workers)  # noqa: E731
        wait_for(
            lambda: alive() and runs(observer, "acme") >= 2 and runs(observer, "globex") >= 2, 90
        )
        add_tenant(project, "initech")  # while the workers run: no restart
        wait_for(lambda: runs(observer, "initech") >= 2, 60)
        drop_tenant(project, "globex")
        dropped_at = runs(observer, "globex")
        later = runs(observer, "initech") + 2
        wait_for(lambda: runs(observer, "initech") >= later, 60)
        # At most the tick read before the drop committed may still have been claimed.
        assert runs(observer, "globex") <= dropped_at + 1
        # One tenant paused: its ticks are skipped, the others' run.
        manage(project, "cronjob", "pause", JOB, "--tenant", "acme")
        paused_at = runs(observer, "acme")
        later = runs(observer, "initech") + 2
        wait_for(lambda: runs(observer, "initech") >= later, 60)
        assert runs(observer, "acme") <= paused_at + 1  # a tick claimed before the pause
        manage(project, "cronjob", "resume", JOB, "--tenant", "acme")
        resumed_at = runs(observer, "acme")
        wait_for(lambda: runs(observer, "acme") > resumed_at, 30)
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
        errors = [worker.communicate(timeout=60)[1] for worker in workers]
        print(*errors, sep="\n----\n")  # shown when the test fails
    assert [worker.returncode for worker in workers] == [exitcodes.SIGTERM] * 2, errors

    doubled = observer.execute(
        "SELECT job, tick, count(*) FROM django_advisory_cron_jobrun "
        "WHERE status = ANY(%s) GROUP BY job, tick HAVING count(*) > 1",
        (TOOK,),
    ).fetchall()
    assert doubled == []
    for schema in ("acme", "initech"):
        written = observer.execute(
            f'SELECT schema, count(*) FROM "{schema}".tenantdata_digest GROUP BY schema'
        ).fetchall()
        # Every run wrote its row in its own schema, and only there: one row a run.
        assert written == [(schema, runs(observer, schema))], schema
    assert (
        observer.execute(
            "SELECT 1 FROM information_schema.schemata WHERE schema_name = 'globex'"
        ).fetchall()
        == []
    )
    pids = observer.execute(
        "SELECT count(DISTINCT pid) FROM django_advisory_cron_jobrun WHERE job LIKE %s",
        (f"{JOB}@%",),
    ).fetchone()
    assert pids == (2,)  # both workers ran tenants' runs
    assert not observer.execute(
        "SELECT 1 FROM django_advisory_cron_jobrun WHERE job = %s", (JOB,)
    ).fetchall()  # the per-tenant job itself never runs outside a tenant
    status = json.loads(
        manage(project, "cronstatus", "--json", "--all", "--tenant", "initech", "--job", JOB).stdout
    )
    assert [(job["job"], job["tenant"]) for job in status["jobs"]] == [
        (f"{JOB}@initech", "initech")
    ]
    observer.close()


def refused(url: str, *args: str) -> str:
    """The one line a command of the tenants' project refuses ``args`` with (exit 2)."""
    done = run_manage(args[0], SETTINGS, *args[1:], env=manage_env(url), timeout=180)
    assert done.returncode == exitcodes.USAGE, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_a_bad_tenant_is_refused_in_one_line(project: str) -> None:
    said = refused(project, "cronjob", "pause", JOB, "--tenant", "nosuch")
    assert JOB in said and "'nosuch'" in said and "--tenant" in said
    said = refused(project, "cronjob", "resume", "tenants_cleanup", "--tenant", "acme")
    assert "tenants_cleanup" in said and "not per tenant" in said and "leave out --tenant" in said
    said = refused(project, "cronjob", "pause", JOB)
    assert JOB in said and "--tenant SCHEMA" in said
    said = refused(project, "cronstatus", "--tenant", "nosuch")
    assert "'nosuch'" in said
    paused = manage(project, "cronjob", SETTINGS, "pause", JOB, "--tenant", "acme")
    assert f"{JOB}@acme" in paused.stdout


def test_a_per_tenant_jitter_starts_each_tenant_at_its_own_offset(project: str) -> None:
    """Two workers, a per-tenant job with ``jitter=5``: each tenant's run of a tick starts at
    the offset computed from ``name@schema`` and the tick (whole seconds), claimed once."""
    name = "tenant_spread"
    observer = psycopg.connect(project, autocommit=True)
    workers = [cronworker(project, name) for _ in range(2)]

    def started() -> list[tuple[str, datetime, datetime]]:
        return observer.execute(
            "SELECT job, tick, started FROM django_advisory_cron_jobrun "
            "WHERE job LIKE %s AND status = ANY(%s) ORDER BY tick, job",
            (f"{name}@%", TOOK),
        ).fetchall()

    try:
        # Two ticks of each tenant, and (most often at once) two offsets among them.
        wait_for(
            lambda: (
                alive(workers)
                and all(
                    sum(job == f"{name}@{schema}" for job, _t, _s in started()) >= 2
                    for schema in ("acme", "globex")
                )
                and len({offset(job, tick, 5, TENANT_STEP) for job, tick, _s in started()}) > 1
            ),
            120,
        )
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
        errors = [worker.communicate(timeout=60)[1] for worker in workers]
        print(*errors, sep="\n----\n")  # shown when the test fails
    runs = started()
    offsets = set()
    for job, tick, began in runs:
        assert job.endswith(("@acme", "@globex")), job
        expected = offset(job, tick, 5, TENANT_STEP)
        offsets.add(expected)
        # Not before its offset; claimed soon after it (the worker wakes at its start).
        assert expected <= began - tick < expected + timedelta(seconds=3), (job, tick, began)
    assert len(offsets) > 1  # the tenants and ticks do not all start at one moment
    assert len({(job, tick) for job, tick, _began in runs}) == len(runs)  # each once
    observer.close()


def test_a_per_tenant_job_catches_up_each_tenant_after_downtime(project: str) -> None:
    """Every worker down for some ticks: the next one to start runs each tenant's latest
    missed tick at once (``CATCH_UP = "latest"``), under ``name@schema``, as its catch-up says
    for any job, then goes on with the next ticks."""
    observer = psycopg.connect(project, autocommit=True)

    def ticks(schema: str) -> list[datetime]:
        return [
            tick
            for (tick,) in observer.execute(
                "SELECT tick FROM django_advisory_cron_jobrun WHERE job = %s AND status = %s "
                "ORDER BY tick",
                (f"{JOB}@{schema}", RunStatus.SUCCEEDED.value),
            ).fetchall()
        ]

    def database_now() -> datetime:
        row = observer.execute("SELECT now()").fetchone()
        assert row is not None
        return cast(datetime, row[0])

    def presence_started(worker: subprocess.Popen[str]) -> datetime | None:
        row = observer.execute(
            "SELECT backend_start FROM pg_stat_activity WHERE application_name LIKE %s",
            (f"{PRESENCE_NAME} %:{worker.pid}",),
        ).fetchone()
        return None if row is None else cast(datetime, row[0])

    def stop(worker: subprocess.Popen[str]) -> None:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
        _out, error = worker.communicate(timeout=60)
        print(error)  # shown when the test fails
        assert worker.returncode == exitcodes.SIGTERM, error

    first = cronworker(project, JOB)
    try:
        wait_for(lambda: alive([first]) and ticks("acme") and ticks("globex"), 90)
    finally:
        stop(first)
    last = max(max(ticks("acme")), max(ticks("globex")))
    # Down for at least two ticks (every 2 s) on the database's clock.
    wait_for(lambda: database_now() > last + timedelta(seconds=5), 30, interval=0.2)
    second = cronworker(project, JOB)
    try:
        # Its ticks before its presence connection opened were missed: it planned after that.
        restarted = wait_for(lambda: alive([second]) and presence_started(second), 60)
        assert restarted > last + timedelta(seconds=5)
        missed = lambda schema: [t for t in ticks(schema) if last < t < restarted]  # noqa: E731
        wait_for(lambda: alive([second]) and missed("acme") and missed("globex"), 60)
        wait_for(lambda: [t for t in ticks("acme") if t > restarted], 60)  # then on time
    finally:
        stop(second)
    for schema in ("acme", "globex"):
        # "latest": the last missed tick alone, not the ones before it.
        [caught_up] = missed(schema)
        assert restarted - caught_up < timedelta(seconds=2), (schema, caught_up, restarted)
    assert not observer.execute(
        "SELECT 1 FROM django_advisory_cron_jobrun WHERE job = %s", (JOB,)
    ).fetchall()  # never under the per-tenant job's own name
    observer.close()


def manual_runs(observer: psycopg.Connection[Any], schema: str) -> int:
    """The run-now runs (no tick) of the per-tenant job that succeeded for ``schema``."""
    row = observer.execute(
        "SELECT count(*) FROM django_advisory_cron_jobrun "
        "WHERE job = %s AND tick IS NULL AND status = %s",
        (f"{JOB}@{schema}", RunStatus.SUCCEEDED.value),
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_run_now_for_one_tenant(project: str) -> None:
    """``cronjob trigger NAME --tenant S``: a running worker runs that tenant's job now, in its
    schema, as a manual run of ``name@schema``; ``--here`` runs it in the command."""
    observer = psycopg.connect(project, autocommit=True)
    said = refused(project, "cronjob", "trigger", JOB)
    assert JOB in said and "--tenant SCHEMA" in said
    said = refused(project, "cronjob", "trigger", JOB, "--tenant", "nosuch")
    assert "'nosuch'" in said

    here = manage(project, "cronjob", SETTINGS, "trigger", JOB, "--tenant", "globex", "--here")
    assert f"{JOB}@globex" in here.stdout
    assert manual_runs(observer, "globex") == 1 and manual_runs(observer, "acme") == 0

    worker = cronworker(project, JOB)
    try:
        wait_for(lambda: alive([worker]) and runs(observer, "acme") >= 1, 60)
        asked = manage(project, "cronjob", SETTINGS, "trigger", JOB, "--tenant", "acme")
        assert f"{JOB}@acme: run requested" in asked.stdout
        wait_for(lambda: alive([worker]) and manual_runs(observer, "acme") == 1, 60)
    finally:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
        print(worker.communicate(timeout=60)[1])  # shown when the test fails
    assert manual_runs(observer, "globex") == 1  # the request named acme alone
    for schema in ("acme", "globex"):
        written = observer.execute(
            f'SELECT schema, count(*) FROM "{schema}".tenantdata_digest GROUP BY schema'
        ).fetchall()
        assert written == [(schema, runs(observer, schema))], schema  # in its own schema
    observer.close()


def test_a_worker_stopped_while_tenants_runs_go_on_records_them_interrupted(
    project: str, tmp_path: Path
) -> None:
    """SIGTERM while tenants' runs are going: after its grace the worker records them
    interrupted and exits as told (it once failed looking the runs' jobs up by name)."""
    name = "tenant_held"
    observer = psycopg.connect(project, autocommit=True)
    worker = cronworker(project, name, grace="1", TENANT_HELD_UNTIL=str(tmp_path / "go"))

    def going() -> int:
        row = observer.execute(
            "SELECT count(*) FROM django_advisory_cron_jobrun WHERE job LIKE %s AND status = %s",
            (f"{name}@%", RunStatus.RUNNING.value),
        ).fetchone()
        assert row is not None
        return int(row[0])

    try:
        wait_for(lambda: alive([worker]) and going() == 2, 60)
    finally:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
        _out, error = worker.communicate(timeout=60)
        (tmp_path / "go").touch()  # let any body still going end
    assert worker.returncode == exitcodes.SIGTERM, error
    statuses = observer.execute(
        "SELECT job, status FROM django_advisory_cron_jobrun WHERE job LIKE %s ORDER BY job",
        (f"{name}@%",),
    ).fetchall()
    assert statuses == [
        (f"{name}@acme", RunStatus.INTERRUPTED.value),
        (f"{name}@globex", RunStatus.INTERRUPTED.value),
    ], error
    observer.close()


def test_runlocked_runs_one_tenant_by_its_name_and_refuses_the_per_tenant_name(
    project: str,
) -> None:
    observer = psycopg.connect(project, autocommit=True)
    said = refused(project, "runlocked", JOB)
    assert f"job '{JOB}' runs per tenant" in said and f"{JOB}@SCHEMA" in said
    said = refused(project, "runlocked", f"{JOB}@nosuch")
    assert f"'{JOB}@nosuch'" in said
    ran = manage(project, "runlocked", f"{JOB}@acme")
    assert f"{JOB}@acme" in ran.stdout
    assert runs(observer, "acme") == 1 and runs(observer, "globex") == 0
    written = observer.execute(
        'SELECT schema, count(*) FROM "acme".tenantdata_digest GROUP BY schema'
    ).fetchall()
    assert written == [("acme", 1)]  # in the tenant's schema
    lines = manage(project, "cronjob", SETTINGS, "crontab").stdout.splitlines()
    assert (
        f"# {JOB}: runs per tenant, for the tenants of each tick: run it with manage.py "
        "cronworker" in lines
    )
    assert not [line for line in lines if f"runlocked {JOB}" in line]
    observer.close()


def test_a_schedule_kept_as_data_runs_for_the_tenants_it_names(project: str) -> None:
    """A schedule added with ``cronjob add --per-tenant acme`` and one in ``SCHEDULES`` with
    ``"per_tenant": "globex"`` call the per-tenant job: each runs for its tenant only, in
    that tenant's schema, as ``NAME@SCHEMA``; a name no schema can have is refused in one
    line; ``cronjob list --json`` shows the tenants."""
    said = refused(
        project, "cronjob", "add", "bad_digest", "--job", JOB, "--every", "2",
        "--per-tenant", "pg_toast",
    )  # fmt: skip
    assert "bad_digest" in said and "'pg_toast' is no tenant schema's name" in said
    manage(
        project, "cronjob", "add", "acme_digest", "--job", JOB, "--every", "2",
        "--per-tenant", "acme",
    )  # fmt: skip
    listed = json.loads(manage(project, "cronjob", "list", "--json", TENANTS_SCHEDULES="1").stdout)
    # Listed tenant by tenant, as the worker runs them.
    tenants = {job["job"]: (job["tenant"], job["per_tenant"]) for job in listed["jobs"]}
    assert tenants["acme_digest@acme"] == ("acme", ["acme"])
    assert tenants["globex_digest@globex"] == ("globex", ["globex"])
    assert "acme_digest@globex" not in tenants and "globex_digest@acme" not in tenants
    assert tenants[f"{JOB}@acme"] == ("acme", ["acme"])
    assert tenants["tenants_cleanup"] == (None, False)
    observer = psycopg.connect(project, autocommit=True)

    def succeeded(job: str) -> int:
        row = observer.execute(
            "SELECT count(*) FROM django_advisory_cron_jobrun WHERE job = %s AND status = %s",
            (job, RunStatus.SUCCEEDED.value),
        ).fetchone()
        assert row is not None
        return int(row[0])

    worker = cronworker(project, "acme_digest", "globex_digest", TENANTS_SCHEDULES="1")
    try:
        wait_for(
            lambda: (
                alive([worker])
                and succeeded("acme_digest@acme") >= 2
                and succeeded("globex_digest@globex") >= 2
            ),
            90,
        )
    finally:
        worker.send_signal(signal.SIGTERM)
        _out, errors = worker.communicate(timeout=60)
        print(errors)  # shown when the test fails
    assert worker.returncode == exitcodes.SIGTERM, errors
    recorded = observer.execute(
        "SELECT DISTINCT job FROM django_advisory_cron_jobrun WHERE job LIKE %s ORDER BY job",
        ("%_digest%",),
    ).fetchall()
    assert recorded == [("acme_digest@acme",), ("globex_digest@globex",)]
    for schema, job in (("acme", "acme_digest@acme"), ("globex", "globex_digest@globex")):
        written = observer.execute(
            f'SELECT schema, count(*) FROM "{schema}".tenantdata_digest GROUP BY schema'
        ).fetchall()
        assert written == [(schema, succeeded(job))]  # in its own schema, one row a run
    observer.close()


def pages(url: str, *paths: str) -> dict[str, dict[str, Any]]:
    """The tenants' project's pages at ``paths`` as a superuser sees them, by path: each its
    status, its text and the statements it sent (tests/tenantsapp/pages.py)."""
    done = manage(
        url, "shell", "-c", f"from tests.tenantsapp.pages import show; show(*{list(paths)!r})"
    )
    found = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {page["url"]: page for page in found}


def listed(page: dict[str, Any]) -> list[str]:
    """The jobs of the run list's rows."""
    table = page["text"].split('id="result_list"')[1].split("</table>")[0]
    cells = re.findall(r'class="field-job_display"><a [^>]*>(.*?)</a>', table)
    return [re.sub(r"<[^>]*>", "", cell) for cell in cells]


def test_the_admin_and_the_metrics_name_each_runs_tenant(project: str) -> None:
    """The run list's tenant filter lists the per-tenant jobs' tenants and keeps one
    tenant's runs, for the statements the page sends without it; the Jobs page, a tenant run's
    page (its jitter offset, in the worker's whole seconds) and the metrics name the tenant."""
    observer = psycopg.connect(project, autocommit=True)
    tick = datetime(2026, 12, 6, 2, 0, tzinfo=UTC)
    spread = "tenant_spread@acme"
    # A tick whose offset shows otherwise in whole seconds than to the tenth.
    while human_lateness(offset(spread, tick, 5, TENANT_STEP).total_seconds()) == human_lateness(
        offset(spread, tick, 5).total_seconds()
    ):
        tick += timedelta(seconds=6)
    stepped = offset(spread, tick, 5, TENANT_STEP)
    rows = [
        (f"{JOB}@acme", RunStatus.FAILED, None),
        (f"{JOB}@globex", RunStatus.SUCCEEDED, None),
        ("tenants_cleanup", RunStatus.SUCCEEDED, None),
        (spread, RunStatus.SUCCEEDED, tick),
    ]
    for job, status, at in rows:
        observer.execute(
            "INSERT INTO django_advisory_cron_jobrun (job, tick, host, pid, started, finished, "
            "status, error) VALUES "
            "(%s, %s, 'web', 1, COALESCE(%s, now()), COALESCE(%s, now()), %s, '')",
            (job, at, at and at + stepped, at and at + stepped, status.value),
        )
    (spread_id,) = observer.execute(
        "SELECT id FROM django_advisory_cron_jobrun WHERE job = %s", (spread,)
    ).fetchone() or (None,)
    runs_url = "/admin/django_advisory_cron/jobrun/"
    shown = pages(
        project,
        runs_url,
        f"{runs_url}?tenant=acme",
        f"{runs_url}{spread_id}/change/",
        "/admin/django_advisory_cron/registeredjob/",
        "/cron/metrics/",
    )
    assert {url: page["status"] for url, page in shown.items()} == dict.fromkeys(shown, 200)
    plain, acme = shown[runs_url], shown[f"{runs_url}?tenant=acme"]
    sidebar = plain["text"].split('id="changelist-filter"')[1]
    assert "By tenant" in sidebar and "?tenant=acme" in sidebar and "?tenant=globex" in sidebar
    assert sorted(listed(acme)) == sorted([f"{JOB}@acme", spread])
    assert sorted(listed(plain)) == sorted(job for job, _s, _t in rows)
    # The tenants are one read of the tenant model; filtering sends no statement more.
    history = lambda page: [s for s in page["statements"] if "_jobrun" in s]  # noqa: E731
    assert len(history(acme)) == len(history(plain))
    # The choices: one read of the tenant model (reused for a second), and the catalog once.
    assert len([s for s in plain["statements"] if "tenantsapp_client" in s]) == 1
    assert len([s for s in plain["statements"] if "s.name, s.job" in s]) == 1
    assert (
        f"its jitter offset: +{human_lateness(stepped.total_seconds())}"
        in (shown[f"{runs_url}{spread_id}/change/"]["text"])
    )
    jobs = shown["/admin/django_advisory_cron/registeredjob/"]["text"]
    assert f'data-job="{JOB}@acme"' in jobs and f'data-job="{JOB}@globex"' in jobs
    samples = {
        (sample.name, sample.labels.get("job"), sample.labels.get("tenant"))
        for family in text_string_to_metric_families(shown["/cron/metrics/"]["text"])
        for sample in family.samples
    }
    failing = "advisory_cron_job_failing"
    assert (failing, f"{JOB}@acme", "acme") in samples
    assert (failing, f"{JOB}@globex", "globex") in samples
    assert (failing, "tenants_cleanup", "") in samples
    observer.close()


def operated(url: str, *forms: dict[str, str]) -> list[list[list[str]]]:
    """The messages (level, text) the Jobs page answers each form POSTed to its Pause /
    Resume / Run now view with, as a superuser of the tenants' project."""
    done = manage(
        url,
        "shell",
        "-c",
        "from tests.tenantsapp.pages import operate; "
        f"operate('/admin/django_advisory_cron/registeredjob/operate/', *{list(forms)!r})",
    )
    found = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [page["status"] for page in found] == [302] * len(forms), found
    return [page["messages"] for page in found]


def test_the_jobs_page_operates_one_tenant_as_cronjob_does(project: str) -> None:
    """Pause, Resume and Run now on a tenant's row of the Jobs page (``name@schema``) act on
    that tenant alone, as ``cronjob pause/resume/trigger NAME --tenant SCHEMA`` do; a tenant
    that does not exist (or no longer does), and the per-tenant job's own name, are refused in
    one line."""
    observer = psycopg.connect(project, autocommit=True)

    def paused() -> list[tuple[str, str, str]]:
        return observer.execute(
            "SELECT job, paused_by, reason FROM django_advisory_cron_jobstate WHERE paused "
            "ORDER BY job"
        ).fetchall()

    acme = f"{JOB}@acme"
    said = operated(
        project,
        {"job": acme, "operation": "pause", "reason": "migrating acme"},
        {"job": f"{JOB}@nosuch", "operation": "pause"},
        {"job": JOB, "operation": "pause"},
    )
    [[level, text]] = said[0]
    assert level == "success" and text.startswith(f"Job {acme}: paused"), said
    assert said[1] == [["error", f"There is no job named {JOB}@nosuch."]]
    [[level, text]] = said[2]
    assert level == "error" and JOB in text and "runs per tenant" in text, said
    assert paused() == [(acme, "ops", "migrating acme")]  # that tenant only
    assert operated(project, {"job": acme, "operation": "resume"}) == [
        [["success", f"Job {acme}: resumed"]]
    ]
    assert paused() == []

    worker = cronworker(project, JOB)
    try:
        wait_for(lambda: alive([worker]) and runs(observer, "acme") >= 1, 60)
        [[[level, text]]] = operated(project, {"job": acme, "operation": "run"})
        assert level in ("success", "warning") and text.startswith(f"Job {acme}: run requested")
        # Run as `cronjob trigger --tenant acme` has it run: a manual run of acme's job alone.
        wait_for(lambda: alive([worker]) and manual_runs(observer, "acme") == 1, 60)
    finally:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
        print(worker.communicate(timeout=60)[1])  # shown when the test fails
    assert manual_runs(observer, "globex") == 0
    assert not observer.execute(
        "SELECT 1 FROM django_advisory_cron_jobstate WHERE job = %s", (JOB,)
    ).fetchall()  # nothing recorded under the per-tenant job's own name
    drop_tenant(project, "globex")  # its row still on a page drawn before
    assert operated(project, {"job": f"{JOB}@globex", "operation": "pause"}) == [
        [["error", f"There is no job named {JOB}@globex."]]
    ]
    observer.close()


def test_runlocked_starts_a_tenants_tick_when_the_worker_would(project: str) -> None:
    """``runlocked name@schema`` of a per-tenant job with a jitter waits for the tenant's
    offset in whole seconds, as ``cronworker`` does: the tenant's tick starts at the same
    moment whichever of them starts it (it waited for the offset to the microsecond)."""
    name, every, jitter = "tenant_spread", 6, 5
    observer = psycopg.connect(project, autocommit=True)
    # The first coming tick (at least 2.9 s ahead, with time to spare) whose whole-second
    # offset for a tenant is at least 1 s, so the command, started 2.9 s before the tick, has
    # about 4 s to start, and falls at least 0.5 s short of the offset to the microsecond.
    now = datetime.now(UTC)
    first = datetime.fromtimestamp((int(now.timestamp() + 3.5) // every + 1) * every, UTC)
    tick, schema = next(
        (first + timedelta(seconds=every * number), schema)
        for number in range(200)
        for schema in ("acme", "globex")
        if offset(
            f"{name}@{schema}", first + timedelta(seconds=every * number), jitter, TENANT_STEP
        )
        >= timedelta(seconds=1)
        and offset(f"{name}@{schema}", first + timedelta(seconds=every * number), jitter)
        - offset(f"{name}@{schema}", first + timedelta(seconds=every * number), jitter, TENANT_STEP)
        >= timedelta(seconds=0.5)
    )
    job = f"{name}@{schema}"
    stepped, exact = offset(job, tick, jitter, TENANT_STEP), offset(job, tick, jitter)
    # Started as cron would, just before the tick: the tick is the one nearest its start.
    wait_for(lambda: datetime.now(UTC) >= tick - timedelta(seconds=2.9), 1300, interval=0.01)
    manage(project, "runlocked", job)
    ran = observer.execute(
        "SELECT tick, started FROM django_advisory_cron_jobrun WHERE job = %s", (job,)
    ).fetchall()
    assert len(ran) == 1 and ran[0][0] == tick, (ran, tick)
    began = ran[0][1] - tick
    assert stepped <= began < exact, (job, tick, began, stepped, exact)
    observer.close()


@pytest.fixture
def server() -> Iterator[Recorder]:
    yield from recorder()


def test_a_failure_notice_names_the_tenant(project: str, server: Recorder) -> None:
    """A tenant's run that fails: its notice's text names the per-tenant job and the tenant,
    its payload the run's job (``name@schema``) and the tenant; the tenant alone is paused."""
    path = "/ok/hooks/tenants"
    notices = {"after": 1, "webhook": f"{server.url}{path}", "pause": True}
    done = run_manage(
        "runlocked",
        SETTINGS,
        "tenant_broken@acme",
        env=manage_env(project, ADVISORY_CRON_JSON=json.dumps({"FAILURE_NOTICES": notices})),
        timeout=180,
    )
    assert done.returncode == exitcodes.JOB_FAILED, done.stderr
    server.wait_for(lambda: server.paths(path) != [])
    with server.lock:
        (notice,) = [json.loads(request.body) for request in server.requests]
    assert notice["text"] == (
        "Job tenant_broken for tenant acme failed (failed: no ledger in acme); "
        "it is paused until someone resumes it"
    ), notice
    assert (notice["job"], notice["tenant"], notice["event"]) == (
        "tenant_broken@acme",
        "acme",
        "failing",
    )
    said = run_manage(  # exit 3: acme's job is failing
        "cronstatus",
        SETTINGS,
        "--json",
        "--job",
        "tenant_broken",
        env=manage_env(project),
        timeout=180,
    )
    status = json.loads(said.stdout)
    paused = {job["tenant"]: bool(job.get("paused")) for job in status["jobs"]}
    assert paused == {"acme": True, "globex": False}, status
