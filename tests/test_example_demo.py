"""The README's demo, run for real: ``python example_project/demo.py`` as a subprocess.

The demo starts real ``manage.py runlocked`` processes against one PostgreSQL; these tests check
its exit code and report, and then read the database it used to confirm the report is true.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from django_advisory_cron.models import JobRun

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "example_project" / "demo.py"


def run_demo(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(DEMO), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def demo_env(**extra: str) -> dict[str, str]:
    """The test's environment without its Django settings or database, plus ``extra``."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.pop("DATABASE_URL", None)
    return {**env, **extra}


#: The demo's own note when its replicas did not overlap (a busy host started them too slowly).
NOT_TOGETHER = "the replicas did not start together"


def printed_ticks(out: str) -> list[int]:
    """The ticks the demo's ``JobRun:`` lines name, in the order printed, as seconds of the day."""
    found = re.findall(r"JobRun: +tick (\d\d):(\d\d)(?::(\d\d))?", out)
    return [
        int(hour) * 3600 + int(minute) * 60 + int(second or 0) for hour, minute, second in found
    ]


def assert_ticks_in_order(out: str) -> None:
    """Each tick the demo prints is the one before or a later one (a day's end wraps round)."""
    ticks = printed_ticks(out)
    assert len(ticks) >= 3, out  # part 2's tick and part 3's
    assert all((later - earlier) % 86400 < 3600 for earlier, later in pairwise(ticks)), out


def ticks_of_part_two(out: str) -> int:
    """How many ticks part 2's replicas, run one after another, belonged to: one, or two on
    a machine so slow that they straddled a tick (the demo says so, and still checks that
    each tick ran once)."""
    return 2 if "the runs straddled two ticks" in out else 1


# Part 2 waits for a real minute boundary when the minute is too far on (up to a minute, and
# its five replicas make that likelier): CI's `-m minutes` step.
@pytest.mark.minutes
def test_demo_five_replicas_on_a_given_database(scratch_database_url: str) -> None:
    for _attempt in range(3):  # again while the demo says the host was too busy to overlap them
        result = run_demo("--replicas", "5", env=demo_env(DATABASE_URL=scratch_database_url))
        if NOT_TOGETHER not in result.stdout:
            break
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "5 replicas, PostgreSQL" in out
    assert "from DATABASE_URL" in out
    assert len(re.findall(r"exit 0  send_daily_digest: ran \(run \d+", out)) == 1
    assert out.count("send_daily_digest: skipped, locked by another process") == 4
    ticks_run = ticks_of_part_two(out)
    assert (
        len(re.findall(r"exit 0  refresh_digest_stats: ran \(run \d+, tick 20", out)) == ticks_run
    )
    assert len(re.findall(r"refresh_digest_stats: skipped, tick .+ already ran", out)) == (
        5 - ticks_run
    )
    assert "5 users, 5 DigestEmail rows" in out
    assert "one per user" in out
    assert ticks_run == 2 or "4 skipped_tick (already ran this tick)" in out
    assert out.rstrip().splitlines()[-1].startswith("OK: one replica ran the job")
    assert "throwaway" not in out  # it used the database it was given

    # The report is backed by what the replicas wrote.
    jobrun = sql.Identifier(JobRun._meta.db_table)
    with psycopg.connect(scratch_database_url) as conn:
        per_user = conn.execute(
            "SELECT user_id, count(*) FROM digest_digestemail GROUP BY user_id"
        ).fetchall()
        senders = conn.execute("SELECT DISTINCT replica FROM digest_digestemail").fetchall()
        statuses = conn.execute(
            sql.SQL("SELECT job, status, count(*) FROM {} GROUP BY job, status").format(jobrun)
        ).fetchall()
        ticks = conn.execute(
            sql.SQL(
                "SELECT count(DISTINCT tick) FROM {} WHERE job = 'refresh_digest_stats'"
            ).format(jobrun)
        ).fetchone()
        stats_rows = conn.execute("SELECT count(*) FROM digest_digeststats").fetchone()
        uptime = conn.execute(
            sql.SQL(
                "SELECT tick, count(*) FILTER (WHERE status = 'succeeded') FROM {} "
                "WHERE job = 'sample_uptime' GROUP BY tick"
            ).format(jobrun)
        ).fetchall()
        samples = conn.execute("SELECT count(*) FROM digest_uptimesample").fetchone()
    assert len(per_user) == 5
    assert all(count == 1 for _, count in per_user)
    assert len(senders) == 1
    assert senders[0][0].startswith("replica-")
    assert sorted(item for item in statuses if item[0] != "sample_uptime") == [
        ("refresh_digest_stats", "skipped_tick", 5 - ticks_run),
        ("refresh_digest_stats", "succeeded", ticks_run),
        ("send_daily_digest", "skipped_locked", 4),
        ("send_daily_digest", "succeeded", 1),
    ]
    assert ticks == (ticks_run,)
    assert stats_rows == (ticks_run,)
    # Part 3: five cronworker replicas; each tick of the 5-second job ran once.
    ran = [count for tick, count in uptime if count]
    assert len(ran) >= 2 and set(ran) == {1}, uptime
    assert all(tick is not None for tick, _count in uptime)
    assert samples == (len(ran),)
    assert len(re.findall(r"tick \d\d:\d\d:\d\d: replica-\d succeeded", out)) >= 2
    # Every replica's part in each tick is named: a skip, or nothing while it was not up yet;
    # never "another replica had it" for a replica that did not try.
    lines = re.findall(r"tick \d\d:\d\d:\d\d: replica-\d succeeded.*", out)
    assert all(line.count("replica-") == 5 for line in lines), out
    assert "another replica had it" not in out
    assert "'run N' is the run's id in the history" in out
    assert_ticks_in_order(out)


# The same part 2 with three replicas: CI's `-m minutes` step too.
@pytest.mark.minutes
def test_readme_command_starts_and_stops_its_own_postgres() -> None:
    result = run_demo(env=demo_env())
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    match = re.search(r"3 replicas, throwaway PostgreSQL [\d.]+ on ([\d.]+):(\d+)", out)
    assert match, out
    assert out.count("send_daily_digest: skipped, locked by another process") == 2
    ticks_run = ticks_of_part_two(out)
    assert len(re.findall(r"refresh_digest_stats: skipped, tick .+ already ran", out)) == (
        3 - ticks_run
    )
    assert ticks_run == 2 or "2 skipped_tick (already ran this tick)" in out
    assert "`manage.py cronworker` (no cron)" in out
    assert_ticks_in_order(out)
    assert "Stopped the throwaway PostgreSQL and deleted its data." in out
    # Stopped means stopped: nothing listens on its port any more.
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(
            f"postgresql://postgres@{match[1]}:{match[2]}/postgres", connect_timeout=3
        ).close()


def test_demo_refuses_a_single_replica() -> None:
    result = run_demo("--replicas", "1", env=demo_env(DATABASE_URL="postgresql://unused@h/x"))
    assert result.returncode == 2
    assert "--replicas must be between 2 and 20" in result.stderr
    assert result.stdout == ""


def test_demo_reports_an_unreachable_database() -> None:
    with socket.socket() as sock:  # a port nothing listens on: bound, never listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        result = run_demo(env=demo_env(DATABASE_URL=f"postgresql://postgres@127.0.0.1:{port}/x"))
    assert result.returncode == 69
    assert result.stderr.startswith("demo: cannot use the database: connection failed")
    assert "Traceback" not in result.stderr
