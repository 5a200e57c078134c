"""Admin pages against real locks held by real second connections."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from django_advisory_cron import exitcodes, locked_task
from django_advisory_cron.jobs.job import Job
from django_advisory_cron.models import HeldLock, JobRun, RunStatus
from django_advisory_cron.ops.heldlocks import held_locks, terminate

Connect = Callable[..., psycopg.Connection[Any]]

LOCKS_URL = reverse("admin:django_advisory_cron_heldlock_changelist")
JOBS_URL = reverse("admin:django_advisory_cron_registeredjob_changelist")
RUNS_URL = reverse("admin:django_advisory_cron_jobrun_changelist")
VIEW_PERMS = ("view_heldlock", "view_registeredjob", "view_jobrun")


def make_client(django_user_model: Any, *perms: str, staff: bool = True) -> Client:
    user = django_user_model.objects.create_user(
        f"user{django_user_model.objects.count()}", password="pw", is_staff=staff
    )
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="django_advisory_cron", codename__in=perms
        )
    )
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def viewer(db_url: str, django_user_model: Any) -> Client:
    return make_client(django_user_model, *VIEW_PERMS)


@pytest.fixture
def operator(db_url: str, django_user_model: Any) -> Client:
    return make_client(django_user_model, *VIEW_PERMS, "terminate_backend")


def hold(conn: psycopg.Connection[Any], job: Job[Any, Any]) -> int:
    """Take ``job``'s session lock on ``conn``; return the backend pid."""
    conn.execute(f"SELECT pg_advisory_lock({job.key.sql})", job.key.params)
    return int(conn.info.backend_pid)


def lock_rows(conn: psycopg.Connection[Any], pid: int) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = %s", [pid]
    ).fetchone()
    assert row is not None
    return int(row[0])


def app_queries(captured: CaptureQueriesContext) -> list[str]:
    """Captured SQL minus the session, user and permission lookups of every admin request."""
    auth = ('FROM "django_session"', 'FROM "auth_')
    return [q["sql"] for q in captured.captured_queries if not any(a in q["sql"] for a in auth)]


def result_list(page: str) -> str:
    """The changelist's table, without the filter sidebar."""
    return page.split('id="result_list"')[1].split("</table>")[0]


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


@pytest.fixture
def probe_job(fresh_registry: None) -> Job[Any, Any]:
    @locked_task(name="admin.probe", schedule="*/5 * * * *", max_runtime=1)
    def probe() -> None:
        """Used by the admin tests."""

    return probe


@pytest.fixture
def slow_job(fresh_registry: None) -> Job[Any, Any]:
    @locked_task(name="admin.slow", max_runtime=3600)
    def slow() -> None:
        pass

    return slow


@pytest.fixture
def lock_queries() -> Iterator[list[str]]:
    """SQL templates (before parameters are bound) that touch the held-locks view."""
    seen: list[str] = []

    def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        yield seen


def test_held_lock_shows_job_name_in_one_query(
    raw_connect: Connect, operator: Client, probe_job: Job[Any, Any]
) -> None:
    pid = hold(raw_connect(), probe_job)
    with CaptureQueriesContext(connection) as captured:
        response = operator.get(LOCKS_URL)
    assert response.status_code == 200
    body = response.content.decode()
    assert "admin.probe" in body
    assert f">{pid}<" in body
    assert str(probe_job.key) in body
    lock_sql = [q["sql"] for q in captured.captured_queries if "heldlock" in q["sql"]]
    assert len(lock_sql) == 1, lock_sql
    # Session, user and permission lookups aside, the page costs that one query.
    assert app_queries(captured) == lock_sql


def test_query_count_does_not_grow_with_rows_and_pages_work(
    raw_connect: Connect, operator: Client
) -> None:
    viewer = operator
    conn = raw_connect()
    conn.execute("SELECT pg_advisory_lock(424242, g) FROM generate_series(1, 5) AS g")
    with CaptureQueriesContext(connection) as few:
        assert viewer.get(LOCKS_URL).status_code == 200
    conn.execute("SELECT pg_advisory_lock(424242, g) FROM generate_series(6, 250) AS g")
    with CaptureQueriesContext(connection) as many:
        first = viewer.get(LOCKS_URL)
    assert len(many.captured_queries) == len(few.captured_queries)
    assert "250 held locks" in first.content.decode()
    assert first.content.decode().count('name="_selected_action"') == 100
    third = viewer.get(LOCKS_URL, {"p": 3})
    assert third.content.decode().count('name="_selected_action"') == 50
    # A page past the end is an invalid lookup: the admin redirects with ?e=1.
    assert viewer.get(LOCKS_URL, {"p": 9}).status_code == 302
    assert viewer.get(LOCKS_URL, {"p": 0}).status_code == 302
    shown = viewer.get(LOCKS_URL, {"all": ""}).content.decode()
    assert shown.count('name="_selected_action"') == 250


def test_one_query_for_show_all_and_later_pages(raw_connect: Connect, operator: Client) -> None:
    conn = raw_connect()
    conn.execute("SELECT pg_advisory_lock(424243, g) FROM generate_series(1, 3) AS g")
    for params, rows in (({"all": ""}, 3), ({}, 3), ({"q": "matches-nothing"}, 0)):
        with CaptureQueriesContext(connection) as captured:
            page = operator.get(LOCKS_URL, params).content.decode()
        assert page.count('name="_selected_action"') == rows
        assert len([q for q in captured.captured_queries if "heldlock" in q["sql"]]) == 1
    # Every row fits on page 1: other page numbers are still invalid lookups.
    assert operator.get(LOCKS_URL, {"p": 2}).status_code == 302
    conn.execute("SELECT pg_advisory_lock(424243, g) FROM generate_series(4, 150) AS g")
    with CaptureQueriesContext(connection) as captured:
        second = operator.get(LOCKS_URL, {"p": 2}).content.decode()
    assert second.count('name="_selected_action"') == 50
    assert len([q for q in captured.captured_queries if "heldlock" in q["sql"]]) == 1


def test_held_lock_manager_is_read_only_and_plain(db_url: str) -> None:

    with pytest.raises(TypeError, match="read-only"):
        HeldLock.objects.update(mode="ShareLock")
    with pytest.raises(TypeError, match="read-only"):
        HeldLock.objects.all().delete()
    with pytest.raises(TypeError, match="read-only"):
        HeldLock.objects.create(pid=1)
    assert "job" not in HeldLock.objects.all().query.annotations
    assert "job" in held_locks().query.annotations
    # That the models import nothing of the package but the statuses: tests/test_layers.py.


def test_stale_flag_and_filter(
    raw_connect: Connect,
    viewer: Client,
    probe_job: Job[Any, Any],
    slow_job: Job[Any, Any],
) -> None:
    hold(raw_connect(), probe_job)
    hold(raw_connect(), slow_job)
    time.sleep(1.2)  # probe's max_runtime is 1 s; slow's is an hour
    stale = viewer.get(LOCKS_URL, {"stale": "yes"}).content.decode()
    assert "admin.probe" in stale
    assert "STALE" in stale
    assert "admin.slow" not in stale
    fresh = viewer.get(LOCKS_URL, {"stale": "no"}).content.decode()
    assert "admin.slow" in fresh
    assert "admin.probe" not in fresh
    rows = {lock.job: lock for lock in held_locks().filter(job__isnull=False)}
    assert rows["admin.probe"].stale and not rows["admin.slow"].stale


def test_ours_and_waiting_filters(
    raw_connect: Connect, viewer: Client, probe_job: Job[Any, Any]
) -> None:
    holder = raw_connect()
    hold(holder, probe_job)
    foreign = raw_connect()
    foreign.execute("SELECT pg_advisory_lock(987654321987)")
    waiter = raw_connect()
    waiter_pid = waiter.info.backend_pid
    thread = threading.Thread(target=hold, args=(waiter, probe_job))
    thread.start()
    try:
        assert wait_until(lambda: held_locks().filter(pid=waiter_pid, granted=False).exists())
        # The list shows who holds a lock, its keys are on its own page: the foreign lock is
        # told by its holder's pid.
        foreign_pid = f">{foreign.info.backend_pid}<"
        ours = viewer.get(LOCKS_URL, {"ours": "yes"}).content.decode()
        assert "admin.probe" in ours and foreign_pid not in ours
        others = viewer.get(LOCKS_URL, {"ours": "no"}).content.decode()
        assert foreign_pid in others and "admin.probe" not in others
        waiting = viewer.get(LOCKS_URL, {"granted": "waiting"}).content.decode()
        assert f">{waiter_pid}<" in waiting
        assert f">{holder.info.backend_pid}<" not in waiting
    finally:
        holder.execute(f"SELECT pg_advisory_unlock({probe_job.key.sql})", probe_job.key.params)
        thread.join(10)
    assert not thread.is_alive()


def test_terminate_with_confirmation_removes_the_lock(
    raw_connect: Connect, operator: Client, probe_job: Job[Any, Any]
) -> None:
    victim = raw_connect()
    pid = hold(victim, probe_job)
    watcher = raw_connect()
    lock = held_locks().get(pid=pid)
    form = {"action": "terminate_backends", "_selected_action": [lock.pk]}
    confirm = operator.post(LOCKS_URL, form)
    assert confirm.status_code == 200
    page = confirm.content.decode()
    assert "Yes, terminate" in page and "admin.probe" in page
    assert lock_rows(watcher, pid) == 1  # nothing happens before confirmation
    done = operator.post(LOCKS_URL, {**form, "post": "yes"})
    assert done.status_code == 302
    assert wait_until(lambda: lock_rows(watcher, pid) == 0)
    with pytest.raises(psycopg.OperationalError):
        victim.execute("SELECT 1")
    entry = LogEntry.objects.get()
    assert f"Terminated backend pid {pid}" in entry.get_change_message()
    assert "admin.probe" in entry.get_change_message()
    assert entry.user.username.startswith("user")


def test_terminate_refuses_pids_without_a_lock(
    raw_connect: Connect, operator: Client, probe_job: Job[Any, Any]
) -> None:
    idle = raw_connect()
    assert terminate([int(idle.info.backend_pid)]) == ([], [idle.info.backend_pid])
    idle.execute("SELECT 1")  # still alive
    # Released between the list and the confirmation: nothing is terminated.
    holder = raw_connect()
    pid = hold(holder, probe_job)
    lock = held_locks().get(pid=pid)
    holder.execute(f"SELECT pg_advisory_unlock({probe_job.key.sql})", probe_job.key.params)
    form = {"action": "terminate_backends", "_selected_action": [lock.pk], "post": "yes"}
    response = operator.post(LOCKS_URL, form, follow=True)
    assert "already been released" in response.content.decode()
    holder.execute("SELECT 1")
    assert not LogEntry.objects.exists()


def test_terminate_needs_its_own_permission(
    raw_connect: Connect, viewer: Client, probe_job: Job[Any, Any]
) -> None:
    victim = raw_connect()
    pid = hold(victim, probe_job)
    page = viewer.get(LOCKS_URL).content.decode()
    assert "terminate_backends" not in page
    lock = held_locks().get(pid=pid)
    form = {"action": "terminate_backends", "_selected_action": [lock.pk], "post": "yes"}
    viewer.post(LOCKS_URL, form)
    victim.execute("SELECT 1")
    assert lock_rows(victim, pid) == 1


@pytest.mark.parametrize("url", [LOCKS_URL, JOBS_URL, RUNS_URL])
def test_staff_without_view_permission_gets_403(
    url: str, db_url: str, django_user_model: Any
) -> None:
    client = make_client(django_user_model, "terminate_backend")
    assert client.get(url).status_code == 403


@pytest.mark.parametrize("url", [LOCKS_URL, JOBS_URL, RUNS_URL])
def test_non_staff_and_anonymous_are_sent_to_login(
    url: str, db_url: str, django_user_model: Any
) -> None:
    for client in (make_client(django_user_model, *VIEW_PERMS, staff=False), Client()):
        response = client.get(url)
        assert response.status_code == 302
        assert reverse("admin:login") in response["Location"]


def test_nothing_is_editable(db_url: str, admin_client_tx: Client) -> None:
    run = JobRun.objects.create(
        job="x", host="h", pid=1, started="2026-01-01T00:00Z", status=RunStatus.SUCCEEDED
    )
    change = reverse("admin:django_advisory_cron_jobrun_change", args=[run.pk])
    assert admin_client_tx.get(reverse("admin:django_advisory_cron_jobrun_add")).status_code == 403
    assert admin_client_tx.post(change, {"job": "y"}).status_code == 403
    assert JobRun.objects.get().job == "x"
    delete = reverse("admin:django_advisory_cron_jobrun_delete", args=[run.pk])
    assert admin_client_tx.post(delete, {"post": "yes"}).status_code == 403
    assert (
        admin_client_tx.get(reverse("admin:django_advisory_cron_heldlock_add")).status_code == 403
    )
    page = admin_client_tx.get(RUNS_URL).content.decode()
    assert "delete_selected" not in page


@pytest.fixture
def admin_client_tx(db_url: str, django_user_model: Any) -> Client:
    user = django_user_model.objects.create_superuser("root", password="pw")
    client = Client()
    client.force_login(user)
    return client


def test_search_filters_and_job_names_are_parameters(
    raw_connect: Connect,
    viewer: Client,
    fresh_registry: None,
    lock_queries: list[str],
) -> None:
    nasty = "x'); DROP VIEW django_advisory_cron_heldlock; --"

    @locked_task(name=nasty, max_runtime=1)
    def nasty_job() -> None:
        pass

    hold(raw_connect(), nasty_job)
    for params in ({"q": nasty}, {"stale": nasty}, {"ours": "yes' OR 1=1 --"}, {"o": nasty}):
        response = viewer.get(LOCKS_URL, params)
        assert response.status_code in (200, 302)
    page = viewer.get(LOCKS_URL, {"q": nasty}).content.decode()
    assert "DROP VIEW" in page  # found by search: the job name shown, escaped
    assert held_locks().filter(job=nasty).count() == 1
    touching = [sql for sql in lock_queries if "heldlock" in sql]
    assert touching
    assert not [sql for sql in lock_queries if "DROP VIEW" in sql or "OR 1=1" in sql]
    runs = viewer.get(RUNS_URL, {"q": nasty, "job": nasty, "status": nasty})
    assert runs.status_code in (200, 302)
    assert not [sql for sql in lock_queries if "DROP VIEW" in sql]


def test_detail_page_is_read_only(
    raw_connect: Connect, viewer: Client, probe_job: Job[Any, Any]
) -> None:
    pid = hold(raw_connect(application_name="legacy-script"), probe_job)
    lock = held_locks().get(pid=pid)
    from django.contrib.admin.utils import quote

    url = reverse("admin:django_advisory_cron_heldlock_change", args=[quote(lock.pk)])
    page = viewer.get(url).content.decode()
    assert "legacy-script" in page and "admin.probe" in page
    assert 'name="_save"' not in page
    history = reverse("admin:django_advisory_cron_heldlock_history", args=[quote(lock.pk)])
    assert viewer.get(history).status_code == 200


SECRET = "password=hunter2"


def test_query_text_needs_its_own_permission(
    raw_connect: Connect, django_user_model: Any, probe_job: Job[Any, Any]
) -> None:
    """Another application's session, idle after a query with a secret in it, holds a lock:
    ``view_heldlock`` shows the lock but neither shows nor searches the query text."""
    from django.contrib.admin.utils import quote

    other_app = raw_connect(application_name="billing")
    pid = hold(other_app, probe_job)
    other_app.execute(f"SELECT 'connect {SECRET}' AS last_statement")
    (lock,) = held_locks().filter(pid=pid)
    assert SECRET in lock.query  # what pg_stat_activity shows for the session
    detail_url = reverse("admin:django_advisory_cron_heldlock_change", args=[quote(lock.pk)])

    viewer = make_client(django_user_model, "view_heldlock")
    listed = viewer.get(LOCKS_URL).content.decode()
    assert f">{pid}<" in listed and "billing" in listed
    assert "hunter2" not in listed
    detail = viewer.get(detail_url)
    assert detail.status_code == 200
    assert "billing" in detail.content.decode()
    assert "hunter2" not in detail.content.decode()
    searched = viewer.get(LOCKS_URL, {"q": "hunter2"}).content.decode()
    assert f">{pid}<" not in searched and SECRET not in searched  # "hunter2": the search box
    assert f">{pid}<" in viewer.get(LOCKS_URL, {"q": "billing"}).content.decode()
    # Nor through a URL lookup on the column (refused: 400 Bad Request).
    filtered = viewer.get(LOCKS_URL, {"query__contains": "hunter2"})
    assert filtered.status_code == 400 and f">{pid}<" not in filtered.content.decode()
    # Terminating does not need the query either: its confirmation leaves it out too.
    terminator = make_client(django_user_model, "view_heldlock", "terminate_backend")
    form = {"action": "terminate_backends", "_selected_action": [lock.pk]}
    confirm = terminator.post(LOCKS_URL, form).content.decode()
    assert "Yes, terminate" in confirm and f"<td>{pid}</td>" in confirm
    assert "hunter2" not in confirm

    reader = make_client(django_user_model, "view_heldlock", "view_query", "terminate_backend")
    assert SECRET in reader.get(LOCKS_URL).content.decode()
    assert SECRET in reader.get(detail_url).content.decode()
    found = reader.get(LOCKS_URL, {"q": "hunter2"}).content.decode()
    assert f">{pid}<" in found and SECRET in result_list(found)
    assert f">{pid}<" in reader.get(LOCKS_URL, {"query__contains": "hunter2"}).content.decode()
    assert SECRET in reader.post(LOCKS_URL, form).content.decode()
    assert lock_rows(other_app, pid) == 1


def test_jobs_page(
    raw_connect: Connect, viewer: Client, probe_job: Job[Any, Any], slow_job: Job[Any, Any]
) -> None:
    slow_job.run()
    pid = hold(raw_connect(), probe_job)
    with CaptureQueriesContext(connection) as captured:
        response = viewer.get(JOBS_URL)
    assert response.status_code == 200
    page = response.content.decode()
    assert "admin.probe" in page and "admin.slow" in page
    assert "Every 5 minutes" in page
    assert str(probe_job.key) in page
    assert f"backend pid {pid}" in page
    assert str(RunStatus.SUCCEEDED.label) in page
    assert "?job=admin.slow" in page
    # Whatever the number of jobs: the database's schedules; the run history with the job
    # states and the live workers; held locks; the charts' runs.
    assert len(app_queries(captured)) == 4


def test_jobs_page_flags_overdue_and_failing(viewer: Client, probe_job: Job[Any, Any]) -> None:
    JobRun.objects.create(
        job="admin.probe",
        host="h",
        pid=1,
        started="2020-01-01T00:00Z",
        finished="2020-01-01T00:00:01Z",
        status=RunStatus.SUCCEEDED,
    )
    page = viewer.get(JOBS_URL).content.decode()
    assert "OVERDUE" in page
    JobRun.objects.create(
        job="admin.probe",
        host="h",
        pid=1,
        started="2020-01-02T00:00Z",
        finished="2020-01-02T00:00:01Z",
        status=RunStatus.FAILED,
        error="Traceback ...\nRuntimeError: boom",
    )
    page = viewer.get(JOBS_URL).content.decode()
    assert "FAILING" in page
    index = viewer.get(reverse("admin:app_list", args=["django_advisory_cron"])).content.decode()
    assert "Job health" in index and "admin.probe" in index and "failing" in index


def test_job_runs_page(viewer: Client, fresh_registry: None) -> None:
    @locked_task(name="admin.failing")
    def failing() -> None:
        raise ValueError("no good")

    @locked_task(name="admin.fine")
    def fine() -> None:
        pass

    with pytest.raises(ValueError, match="no good"):
        failing()
    fine()
    page = viewer.get(RUNS_URL).content.decode()
    assert "admin.failing" in page and "admin.fine" in page
    assert "ValueError: no good" in page
    only_failed = viewer.get(RUNS_URL, {"status": "failed"}).content.decode()
    only_failed = result_list(only_failed).replace("<wbr>", "")  # job names wrap after dots
    assert "admin.failing" in only_failed and "admin.fine" not in only_failed
    by_job = viewer.get(RUNS_URL, {"job": "admin.fine"}).content.decode()
    assert "admin.failing" not in result_list(by_job).replace("<wbr>", "")
    searched = viewer.get(RUNS_URL, {"q": "no good"}).content.decode()
    assert "1 job run" in searched
    run = JobRun.objects.get(job="admin.failing")
    detail = viewer.get(reverse("admin:django_advisory_cron_jobrun_change", args=[run.pk]))
    assert "Traceback" in detail.content.decode()


def test_a_run_page_shows_its_times_to_the_second(viewer: Client, fresh_registry: None) -> None:
    """Runs seconds apart read as different times on their own pages too."""

    @locked_task(name="admin.tick_seconds")
    def ticking() -> None:
        pass

    ticking.run()
    run = JobRun.objects.get(job="admin.tick_seconds")
    run.tick = run.started.replace(second=10, microsecond=0)
    run.save(update_fields=["tick"])
    detail = viewer.get(reverse("admin:django_advisory_cron_jobrun_change", args=[run.pk]))
    text = " ".join(detail.content.decode().split())
    for label, value in (("Tick", run.tick), ("Started", run.started), ("Finished", run.finished)):
        assert value is not None
        shown = text.split(f"{label}:</label>")[1].split("</div>")[0]
        assert f"{value:%H:%M:%S}" in shown, (label, shown)


def test_a_run_with_a_tick_says_how_late_it_started(viewer: Client, fresh_registry: None) -> None:
    """In the list under its start, and on its page (a manual run, with no tick, says "-")."""
    tick = timezone.now().replace(microsecond=0) - timedelta(minutes=5)
    late = JobRun.objects.create(
        job="admin.late",
        host="h",
        pid=1,
        status="succeeded",
        tick=tick,
        started=tick + timedelta(milliseconds=40),
        finished=tick + timedelta(seconds=1),
    )
    manual = JobRun.objects.create(
        job="admin.late", host="h", pid=1, status="succeeded", started=tick, manual=True
    )
    listed = " ".join(viewer.get(RUNS_URL).content.decode().split())
    local = tick.astimezone(timezone.get_current_timezone())
    assert f"{local:%H:%M:%S}</span></time>, 40 ms late" in listed, listed
    for run, said in ((late, "40 ms"), (manual, "-")):
        page = viewer.get(reverse("admin:django_advisory_cron_jobrun_change", args=[run.pk]))
        text = " ".join(page.content.decode().split())
        assert text.split("Late:</label>")[1].split("</div>")[0].strip().endswith(said), text


def test_hashtext_keys_are_named_too(
    raw_connect: Connect, viewer: Client, fresh_registry: None
) -> None:
    @locked_task(name="legacy.nightly", key="hashtext", max_runtime=1)
    def legacy() -> None:
        pass

    conn = raw_connect()
    # What the widely copied snippet does, from a script that knows nothing of this app.
    conn.execute("SELECT pg_advisory_lock(hashtext('legacy.nightly'))")
    (lock,) = held_locks().filter(pid=conn.info.backend_pid)
    assert lock.job == "legacy.nightly" and lock.ours and lock.objsubid == 1
    assert "legacy.nightly" in viewer.get(LOCKS_URL, {"ours": "yes"}).content.decode()


def test_terminate_requires_csrf_token(
    raw_connect: Connect, django_user_model: Any, probe_job: Job[Any, Any]
) -> None:
    victim = raw_connect()
    pid = hold(victim, probe_job)
    user = django_user_model.objects.create_superuser("csrf", password="pw")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    lock = held_locks().get(pid=pid)
    form = {"action": "terminate_backends", "_selected_action": [lock.pk], "post": "yes"}
    assert client.post(LOCKS_URL, form).status_code == 403
    victim.execute("SELECT 1")
    assert lock_rows(victim, pid) == 1


def test_a_real_runner_terminated_from_the_admin(
    spawn: Callable[..., Any], operator: Client, raw_connect: Connect
) -> None:
    """``runlocked sleepy`` in another process: its lock is named, timed from its run row,
    and terminating it makes the runner record ``lock_lost`` and exit 75."""
    process = spawn("runlocked", "sleepy", "6")
    watcher = raw_connect()
    # The process may take a while to start on a busy host.
    assert wait_until(lambda: held_locks().filter(job="sleepy").exists(), timeout=60)
    lock = held_locks().get(job="sleepy")
    run = JobRun.objects.get(job="sleepy", status=RunStatus.RUNNING)
    assert (lock.run_host, lock.run_pid) == (run.host, process.pid)
    assert lock.since == run.started
    assert lock.application_name == "django-advisory-cron"
    page = operator.get(LOCKS_URL, {"q": "sleepy"}).content.decode()
    assert f"{run.host} pid {process.pid}" in page
    assert f"{run.host} pid {process.pid}" in operator.get(JOBS_URL).content.decode()
    form = {"action": "terminate_backends", "_selected_action": [lock.pk], "post": "yes"}
    assert operator.post(LOCKS_URL, form).status_code == 302
    assert wait_until(lambda: lock_rows(watcher, lock.pid) == 0)
    assert process.wait(timeout=30) == exitcodes.LOCK_LOST
    run.refresh_from_db()
    assert run.status == RunStatus.LOCK_LOST


def test_no_tenant_filter_without_django_tenants(viewer: Client) -> None:
    """The tenant filter is django-tenants' (tests/test_tenants.py): a project without it, even
    with a run named like a tenant's, is offered none, and its run list reads no tenant."""
    JobRun.objects.create(
        job="report@acme", host="h", pid=1, started=timezone.now(), status=RunStatus.FAILED
    )
    with CaptureQueriesContext(connection) as captured:
        page = viewer.get(RUNS_URL).content.decode()
    assert "report@acme" in result_list(page)
    assert "By tenant" not in page and "tenant=" not in page
    # No reading of the tenants (the schedules' rows name their per_tenant column, as every
    # column, and are not one).
    assert not [q for q in app_queries(captured) if "tenant" in q.lower() and "per_tenant" not in q]
