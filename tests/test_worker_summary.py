"""The line a ``cronworker`` prints when it stops: runs and deliveries counted apart.

Two real schedulers deliver ``tasks_every2`` (``deliver="tasks"``) through django-tasks-db;
one tick was run beforehand by ``runlocked``, so every scheduler finds it already ran. Each
scheduler's summary must match what its log and the enqueue claims say it did.
"""

from __future__ import annotations

import re
import signal
import time
from datetime import datetime, timezone
from typing import Any

import pytest

from django_advisory_cron import exitcodes
from django_advisory_cron.models import EnqueuedTick, JobRun
from tests.test_tasks_delivery import SETTINGS, tasks_db  # noqa: F401 (a fixture)
from tests.waiting import wait_for, wait_for_workers

pytestmark = pytest.mark.usefixtures("transactional_db")

DELIVERIES = re.compile(
    r"^cronworker: handed (\d+) tick\(s\) to a task queue: (\d+) enqueued, (\d+) not enqueued "
    r"\((\d+) enqueued by another scheduler, (\d+) already ran\), (\d+) could not be enqueued, "
    r"0 paused$",
    re.MULTILINE,
)


@pytest.mark.slow
def test_a_delivering_worker_counts_deliveries_apart_from_runs(
    tasks_db: str,  # noqa: F811
    spawn: Any,
    manage: Any,
    raw_connect: Any,
) -> None:
    schedulers = [spawn("cronworker", "tasks_every2", SETTINGS, "--grace", "5") for _ in range(2)]
    wait_for_workers(raw_connect(), schedulers)
    # A tick 4-6 s ahead, run by hand at once (a warm-started command takes well under that,
    # even on a loaded machine), so the schedulers find it already ran when it comes. Started
    # with the schedulers instead, the run by hand took over 8 s at a load of 17 and came after.
    ahead = datetime.fromtimestamp((int(time.time()) // 2 + 3) * 2, timezone.utc)
    by_hand = manage("runlocked", SETTINGS, f"--tick={ahead.isoformat()}", "tasks_every2")
    assert by_hand.returncode == 0 and "ran (run" in by_hand.stdout, by_hand.stderr
    assert datetime.now(timezone.utc) < ahead  # else the schedulers may have enqueued it first
    wait_for(lambda: EnqueuedTick.objects.filter(tick__gt=ahead).count() >= 3, timeout=60)
    for scheduler in schedulers:
        scheduler.send_signal(signal.SIGTERM)
    for scheduler in schedulers:
        out, err = scheduler.communicate(timeout=30)
        assert scheduler.returncode == exitcodes.SIGTERM, err
        enqueued = EnqueuedTick.objects.filter(pid=scheduler.pid).count()
        elsewhere = err.count("already enqueued elsewhere")
        already_ran = err.count("already ran")
        assert already_ran == 1, err  # the tick runlocked ran
        assert re.search(r"stopped; took up 0 tick\(s\) and run-now request\(s\)", out)
        assert out.count("cronworker: tasks_every2, tick ") == enqueued, out  # a line each
        (counts,) = DELIVERIES.findall(out)
        handed = enqueued + elsewhere + already_ran
        assert counts == tuple(
            str(n) for n in (handed, enqueued, elsewhere + already_ran, elsewhere, already_ran, 0)
        ), out
    assert EnqueuedTick.objects.filter(tick=ahead).count() == 0
    assert JobRun.objects.filter(job="tasks_every2", tick=ahead).count() == 1
