"""A lock database that refuses writes (``default_transaction_read_only``, a primary switched to
read-only): nothing runs, and every command says so in one line with exit 69 (the database is
unavailable), not as a failed job; ``cronworker`` says it at each attempt and runs the job once
the database accepts writes again. A job's own query refused as read-only stays the job's
failure. Real processes against the test server, its database switched read-only."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, connections
from psycopg import sql as pgsql

from django_advisory_cron import exitcodes
from django_advisory_cron.core.keys import job_key
from django_advisory_cron.models import JobRun, RunStatus
from tests.jobsapp.models import Marker
from tests.test_worker_edges import Lines
from tests.waiting import wait_for

pytestmark = pytest.mark.usefixtures("transactional_db")

READ_ONLY = "is read-only: it refuses writes"


@pytest.fixture(autouse=True)
def read_only_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "read_only_tasks"}))


class Switch:
    """Turns the test database's ``default_transaction_read_only`` on and off (new
    connections see it)."""

    def __init__(self, admin: Any) -> None:
        self.admin = admin
        self.name = pgsql.Identifier(connection.settings_dict["NAME"])

    def on(self) -> None:
        statement = "ALTER DATABASE {} SET default_transaction_read_only = on"
        self.admin.execute(pgsql.SQL(statement).format(self.name))

    def off(self) -> None:
        statement = "ALTER DATABASE {} RESET default_transaction_read_only"
        self.admin.execute(pgsql.SQL(statement).format(self.name))
        connections.close_all()  # one opened meanwhile would stay read-only


@pytest.fixture
def read_only(raw_connect: Any) -> Iterator[Switch]:
    switch = Switch(raw_connect())
    switch.on()
    try:
        yield switch
    finally:
        switch.off()


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def test_runlocked_says_the_database_is_read_only_and_exits_69(
    read_only: Switch, manage: Any
) -> None:
    for scope in ("session", "transaction"):
        done = manage("runlocked", "--scope", scope, "ro_tick")
        assert done.returncode == exitcodes.DATABASE_UNAVAILABLE, done.stderr
        line = one_line(done.stderr)
        assert READ_ONLY in line and line.endswith("; ro_tick did not run"), line
    read_only.off()
    assert not JobRun.objects.exists() and not Marker.objects.exists()


def test_cronjob_says_the_database_is_read_only_and_exits_69(
    read_only: Switch, manage: Any
) -> None:
    for args in (["pause", "ro_tick"], ["edit", "ro_tick", "--disable"]):
        done = manage("cronjob", *args)
        assert done.returncode == exitcodes.DATABASE_UNAVAILABLE, done.stderr
        line = one_line(done.stderr)
        assert READ_ONLY in line and line.endswith("; nothing was changed"), line


def test_a_jobs_own_read_only_query_is_its_failure(manage: Any) -> None:
    done = manage("runlocked", "ro_body")
    assert done.returncode == exitcodes.JOB_FAILED, done.stderr
    assert JobRun.objects.get(job="ro_body").status == RunStatus.FAILED


def test_cronworker_says_so_at_each_attempt_and_runs_once_writes_are_accepted(
    read_only: Switch, spawn: Any
) -> None:
    worker = spawn("cronworker", "ro_tick")
    lines = Lines(worker)
    wait_for(lambda: len(lines.times(READ_ONLY)) >= 2)
    assert worker.poll() is None
    read_only.off()
    wait_for(lambda: Marker.objects.filter(job="ro_tick").exists())
    worker.terminate()
    said = lines.finish()
    assert "Traceback" not in said and "reachable again" not in said
    refused = [line for line in said.splitlines() if READ_ONLY in line]
    assert all(line.endswith(" s") and "ran nothing, retrying in" in line for line in refused)


class ServerSwitch:
    """Switches the whole server read-only (``ALTER SYSTEM``, reloaded), as an operator does:
    running sessions see it from their next transaction. The switching session keeps writing."""

    def __init__(self, admin: Any) -> None:
        self.admin = admin
        admin.execute("SET default_transaction_read_only = off")

    def set(self, read_only: bool) -> None:
        value = "on" if read_only else "DEFAULT"
        self.admin.execute(f"ALTER SYSTEM SET default_transaction_read_only = {value}")
        self.admin.execute("SELECT pg_reload_conf()")

    def held(self, job: str) -> bool:
        """Whether some session holds job ``job``'s lock (others' advisory locks aside)."""
        ids = job_key(job).lock_ids
        assert ids is not None
        row = self.admin.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND (classid, objid, objsubid) = (%s::oid, %s::oid, %s)",
            ids,
        ).fetchone()
        return bool(row[0])

    def go(self, job: str) -> None:
        """Tell a holding job to end (the test's session can still write)."""
        self.admin.execute(
            "INSERT INTO jobsapp_marker (job, pid, note, created) VALUES (%s, 0, 'go', now())",
            [job],
        )


@pytest.fixture
def server_switch(raw_connect: Any) -> Iterator[ServerSwitch]:
    switch = ServerSwitch(raw_connect())
    try:
        yield switch
    finally:
        switch.set(False)
        connections.close_all()


#: Short heartbeats, so the switch spans several of them.
BEATING = {"JOBS_MODULE": "read_only_tasks", "HEARTBEAT": 0.2, "LEASE": 1}


@pytest.mark.parametrize("writes_back", [True, False], ids=["writes-back", "still-read-only"])
def test_a_server_switched_read_only_while_a_job_runs(
    server_switch: ServerSwitch, spawn: Any, writes_back: bool
) -> None:
    """Refused heartbeats are no lost lock (the server answered: the session and its lock are
    alive), so the job goes on. Its end, refused as a write, is recorded once writes are
    accepted again; if they are not, runlocked says so with exit 69 and records nothing false
    (it said "lock lost" with exit 75 and claimed a record it never made)."""
    process = spawn("runlocked", "ro_hold", env={"ADVISORY_CRON_JSON": json.dumps(BEATING)})
    lines = Lines(process)
    wait_for(lambda: Marker.objects.filter(job="ro_hold").exists())
    server_switch.set(True)
    wait_for(lambda: lines.times("the locks are still held and their jobs go on"))
    server_switch.go("ro_hold")
    if writes_back:
        # The end was refused and the lock unlocked alone: writes come back meanwhile.
        wait_for(lambda: not server_switch.held("ro_hold"), timeout=30)
        server_switch.set(False)
    said = lines.finish()
    connections.close_all()
    run = JobRun.objects.get(job="ro_hold")
    assert "lock lost" not in said, said
    if writes_back:
        assert process.returncode == exitcodes.OK, said
        assert run.status == RunStatus.SUCCEEDED, run.error
    else:
        assert process.returncode == exitcodes.DATABASE_UNAVAILABLE, said
        last = said.strip().splitlines()[-1]
        assert last.startswith("runlocked: ro_hold: succeeded, but its end could not be "), last
        assert READ_ONLY in last and last.endswith("until a later run of ro_hold ends it"), last
        assert run.status == RunStatus.RUNNING


def test_cronworker_keeps_a_run_going_through_a_read_only_spell(
    server_switch: ServerSwitch, spawn: Any
) -> None:
    """The same under ``cronworker``, whose runs share the worker's lock connection: it was
    lost as a whole ("the connection holding the locks of 1 run(s) claimed together was
    lost"), the run recorded ``lock_lost`` and the worker reconnected."""
    worker = spawn("cronworker", "ro_hold_every", env={"ADVISORY_CRON_JSON": json.dumps(BEATING)})
    lines = Lines(worker)
    wait_for(lambda: Marker.objects.filter(job="ro_hold_every").exists(), timeout=30)
    first = JobRun.objects.get(job="ro_hold_every", status=RunStatus.RUNNING)
    server_switch.set(True)
    wait_for(lambda: lines.times("the locks are still held and their jobs go on"))
    server_switch.go("ro_hold_every")
    server_switch.set(False)
    wait_for(lambda: JobRun.objects.get(pk=first.pk).status == RunStatus.SUCCEEDED)
    worker.terminate()
    said = lines.finish()
    assert "lock lost" not in said and "was lost" not in said, said
    runs = JobRun.objects.filter(job="ro_hold_every").exclude(status=RunStatus.SKIPPED_TICK)
    assert len({run.tick for run in runs}) == runs.count(), list(runs.values("tick", "status"))
    assert {run.status for run in runs} <= {RunStatus.SUCCEEDED, RunStatus.INTERRUPTED}
