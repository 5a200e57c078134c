"""A lost run is recorded on its own row only.

After a failover to an asynchronous standby, a run's claim may be missing on the new primary,
and its id with it: the sequence lost the value too, so the new primary can give the same id
to another run. Recording the lost run through a fresh connection must not touch that row.
The state is made here on the test server: the run's row is replaced by another replica's
running row with the same id, then the run's lock backend is terminated.
"""

from __future__ import annotations

from typing import Any

import pytest

from django_advisory_cron import exitcodes
from django_advisory_cron.models import JobRun, RunStatus

from .test_lock_loss import _running_sleepy, terminate

pytestmark = pytest.mark.usefixtures("transactional_db")


def test_a_lost_run_whose_id_was_given_to_another_run(spawn: Any, raw_connect: Any) -> None:
    observer = raw_connect()
    process = spawn("runlocked", "sleepy", "30")
    pid = _running_sleepy(observer, process)
    mine = JobRun.objects.get(job="sleepy")
    run_id = mine.id
    mine.delete()
    other = JobRun.objects.create(
        id=run_id,
        job="other_job",
        host="elsewhere",
        pid=1,
        started=mine.started,
        status=RunStatus.RUNNING,
    )
    terminate(observer, pid)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == exitcodes.LOCK_LOST, stderr
    other.refresh_from_db()
    assert (other.status, other.error, other.finished) == (RunStatus.RUNNING, "", None)
    recorded = JobRun.objects.get(job="sleepy")
    assert recorded.status == RunStatus.LOCK_LOST and recorded.finished is not None
