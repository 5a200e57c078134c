"""``runlocked --enqueue --manual NAME`` of a job delivered through the Tasks framework: the
task it enqueues runs the job for the tick nearest the time it was enqueued for, so it cannot be
a manual run (which never takes a tick). It is refused with what to type instead, and nothing is
enqueued or recorded."""

from __future__ import annotations

from typing import Any

import pytest

from django_advisory_cron import exitcodes
from django_advisory_cron.models import EnqueuedTick, JobRun
from tests.test_tasks_delivery import SETTINGS, _results
from tests.test_tasks_delivery import tasks_db as tasks_db  # a fixture

pytestmark = pytest.mark.usefixtures("transactional_db")


def test_a_manual_enqueue_is_refused_with_what_to_type(tasks_db: str, manage: Any) -> None:
    done = manage("runlocked", SETTINGS, "--enqueue", "--manual", "tasks_every2")
    assert done.returncode == exitcodes.CONFIG, done.stdout + done.stderr
    assert done.stderr.strip().endswith(
        "job 'tasks_every2': a manual run of a job delivered through the Tasks framework runs "
        "here, not in a task (its task takes the tick nearest the time it is enqueued for): "
        "manage.py runlocked --manual tasks_every2"
    ), done.stderr
    assert _results(tasks_db) == []
    assert not EnqueuedTick.objects.exists() and not JobRun.objects.exists()
