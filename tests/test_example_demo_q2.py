"""The demo's django-q2 mode, run for real: ``python example_project/demo.py --q2``.

Three replicas each run ``sync_schedules`` and a real ``qcluster`` on the ORM broker for two
ticks of an every-minute job, so this waits for real ticks (about two minutes). The test
checks the demo's exit code and per-tick report, then reads the database the demo used to
confirm the report is true.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from datetime import datetime, timedelta, timezone

import psycopg
import pytest
from psycopg import sql

from django_advisory_cron.models import JobRun
from tests.test_example_demo import DEMO, ROOT, demo_env

JOB = "poll_bounces"


@pytest.mark.minutes  # two ticks of an every-minute django-q2 schedule
@pytest.mark.timeout(330)
def test_q2_demo_runs_each_tick_once_on_three_clusters(scratch_database_url: str) -> None:
    result = subprocess.run(
        [sys.executable, str(DEMO), "--q2"],
        cwd=ROOT,
        env=demo_env(DATABASE_URL=scratch_database_url),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "demo (django-q2 mode): 3 replicas, PostgreSQL" in out

    # Three concurrent syncs: one creates the rows, the other two find them in place.
    # (The example's 5-second job is for cronworker: django-q2 cannot express it.)
    tallies = re.findall(r"replica-\d   exit 0  (.+)$", out, re.MULTILINE)
    assert all("elsewhere 1" in tally for tally in tallies), out
    syncs = sorted(tally.replace("elsewhere 1", "").strip(", ") for tally in tallies)
    assert syncs == ["create 3", "unchanged 3", "unchanged 3"], out
    assert len(re.findall(r"replica-\d   qcluster pid \d+ running", out)) == 3

    # Per tick: who ran it, and the recorded skips of its duplicate deliveries.
    progress = re.findall(r"^   tick (\d\d:\d\d): ran on (replica-\d), ", out, re.MULTILINE)
    per_tick = re.findall(
        r"^     (\d\d:\d\d)  ran: (replica-\d) succeeded \([\d.]+ s\)   skips: (.+)\n"
        r"            (.+)$",
        out,
        re.MULTILINE,
    )
    assert len(progress) == 2, out
    assert [(tick, who) for tick, who, _, _ in per_tick] == progress
    first, second = (datetime.strptime(tick, "%H:%M") for tick, _ in progress)
    assert (second - first) % timedelta(days=1) == timedelta(minutes=1)
    for _, _, skips, counts in per_tick:
        assert "succeeded 1" in counts
        assert "failed" not in counts and "running" not in counts
        if skips != "none":
            assert re.fullmatch(r"(replica-\d skipped_(locked|tick) \(\+[\d.]+ s\)(; )?)+", skips)
    by_replica = re.findall(r"^     (replica-\d)  +(.+)$", out, re.MULTILINE)
    assert [name for name, _ in by_replica] == ["replica-1", "replica-2", "replica-3"]
    assert len(re.findall(r"stopped \(exit 0\)|killed its process group", out)) == 3
    ok = re.search(
        r"^OK: 2 ticks of poll_bounces through 3 django-q2 clusters, each run once; "
        r"(\d+) duplicate deliveries were recorded skips",
        out,
        re.MULTILINE,
    )
    assert ok, out

    # The report is backed by what the clusters wrote.
    jobrun = sql.Identifier(JobRun._meta.db_table)
    with psycopg.connect(scratch_database_url) as conn:
        runs = conn.execute(
            sql.SQL("SELECT tick, status FROM {} WHERE job = %s").format(jobrun), [JOB]
        ).fetchall()
        polls = conn.execute("SELECT replica FROM digest_bouncepoll ORDER BY polled_at").fetchall()
        schedules = conn.execute(
            "SELECT name, cron FROM django_q_schedule WHERE name LIKE 'advisory_cron:%%' "
            "ORDER BY name"
        ).fetchall()
        left_in_queue = conn.execute("SELECT count(*) FROM django_q_ormq").fetchone()
    ticks = sorted({tick for tick, _ in runs})
    assert len(ticks) == 2
    assert ticks[1] - ticks[0] == timedelta(minutes=1)
    assert [f"{tick.astimezone(timezone.utc):%H:%M}" for tick in ticks] == [
        tick for tick, _ in progress
    ]
    for tick in ticks:
        statuses = Counter(status for at, status in runs if at == tick)
        assert statuses["succeeded"] == 1, statuses
        assert set(statuses) <= {"succeeded", "skipped_locked", "skipped_tick"}, statuses
    skipped = sum(status.startswith("skipped") for _, status in runs)
    assert skipped == int(ok[1])
    assert [replica for (replica,) in polls] == [who for _, who in progress]
    assert schedules == [
        ("advisory_cron:poll_bounces", "* * * * *"),
        ("advisory_cron:refresh_digest_stats", "* * * * *"),
        ("advisory_cron:send_daily_digest", "0 2 * * *"),
    ]
    assert left_in_queue == (0,)
