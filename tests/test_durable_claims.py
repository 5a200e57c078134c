"""``SYNCHRONOUS_COMMIT``: the claim and the finish of a run wait for a synchronous standby,
where the server's own ``synchronous_commit`` (``local``) lets every other commit go on.

A real primary names its real standby in ``synchronous_standby_names`` with
``synchronous_commit = local``; the standby's replay is paused, so a commit that asks for
``remote_apply`` waits (``pg_stat_activity`` says ``SyncRep``) until the replay resumes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from django_advisory_cron import exitcodes
from django_advisory_cron.testing import (
    PostgresServer,
    Standby,
)

from .conftest import MANAGE, manage_env
from .test_standby import migrated_pair
from .waiting import CLAIM, wait_for


@pytest.fixture
def paired() -> Iterator[tuple[PostgresServer, Standby]]:
    """A migrated primary whose standby is synchronous for the commits that ask for it (one
    test uses it: a pair costs seconds of CPU to start, which every xdist worker would pay)."""
    primary, standby = migrated_pair(logged=False, synchronous=True, synchronous_commit="local")
    with primary, standby:
        yield primary, standby


def waiting_for_standby(primary: PostgresServer) -> list[str]:
    """The statements on the primary whose commit waits for the synchronous standby."""
    with psycopg.connect(primary.url(), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT query FROM pg_stat_activity WHERE wait_event = 'SyncRep'"
        ).fetchall()
    return [str(query) for (query,) in rows]


def runlocked(
    primary: PostgresServer, gate: Path, synchronous_commit: str | None
) -> subprocess.Popen[str]:
    settings = {"JOBS_MODULE": "failover_tasks"}
    if synchronous_commit:
        settings["SYNCHRONOUS_COMMIT"] = synchronous_commit
    env = manage_env(
        primary.url(),
        ADVISORY_CRON_JSON=json.dumps(settings),
        FAILOVER_JOBS="0",
        FAILOVER_GATE=str(gate),
    )
    return subprocess.Popen(
        [sys.executable, str(MANAGE), "runlocked", "failover_gate"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_only_claims_under_the_setting_wait_for_the_standby(
    paired: tuple[PostgresServer, Standby], tmp_path: Path, db_url: str
) -> None:
    primary, standby = paired
    by_default(primary, standby, tmp_path / "open")
    checked(primary, db_url)
    gate = tmp_path / "gate"
    standby.pause_replay()
    process = runlocked(primary, gate, "remote_apply")
    try:
        claim = wait_for(lambda: waiting_for_standby(primary))
        # The claim: pg_stat_activity shows its call of the claim function.
        assert CLAIM in claim[0], claim
        assert process.poll() is None
        standby.resume_replay()
        wait_for(lambda: not waiting_for_standby(primary))
        # The body runs (the gate is shut); the finish waits once the replay is paused again.
        standby.pause_replay()
        gate.touch()
        finish = wait_for(lambda: waiting_for_standby(primary))
        assert "UPDATE" in finish[0] and "pg_advisory_unlock" in finish[0]
        assert process.poll() is None
        standby.resume_replay()
        assert process.wait(timeout=30) == exitcodes.OK, process.communicate()
    finally:
        standby.resume_replay()
        if process.poll() is None:
            process.kill()
    with psycopg.connect(standby.url(), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT status FROM django_advisory_cron_jobrun WHERE job = 'failover_gate'"
        ).fetchall()
    assert ("succeeded",) in rows


def by_default(primary: PostgresServer, standby: Standby, gate: Path) -> None:
    """Without the setting nothing waits for the standby, its replay paused or not."""
    gate.touch()
    standby.pause_replay()
    try:
        process = runlocked(primary, gate, None)
        assert process.wait(timeout=60) == exitcodes.OK, process.communicate()
    finally:
        standby.resume_replay()


def check(url: str, **settings: object) -> subprocess.CompletedProcess[str]:
    env = manage_env(url, ADVISORY_CRON_JSON=json.dumps(settings))
    return subprocess.run(
        [sys.executable, str(MANAGE), "check", "--database", "default"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def checked(primary: PostgresServer, db_url: str) -> None:
    """W014 where no synchronous standby is named (the test cluster has no standby at all);
    E132 for a value that waits for no standby."""
    alone = check(db_url, SYNCHRONOUS_COMMIT="on")
    assert "django_advisory_cron.W014" in alone.stderr, alone
    assert "synchronous_standby_names is empty" in alone.stderr
    named = check(primary.url(), SYNCHRONOUS_COMMIT="on")
    assert named.returncode == 0 and "W014" not in named.stderr, named
    invalid = check(primary.url(), SYNCHRONOUS_COMMIT="local")
    assert "django_advisory_cron.E132" in invalid.stderr, invalid
