"""The delivery seam is open: a queue registered here, in a test module, with no edit of the
package, is a ``deliver=`` jobs and schedules may name, gets its ticks, and is held to the
rules of a target that sends a task by name (its words, its allow-list)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

import pytest

from django_advisory_cron import locked_task
from django_advisory_cron.delivery import targets
from django_advisory_cron.delivery.targets import (
    ByName,
    DeliverableJob,
    Delivery,
    DeliveryError,
    RemoteCall,
    Target,
)
from django_advisory_cron.jobs.definitions import Definition, to_job


class Memo:
    """A queue that keeps what it is handed."""

    def __init__(self) -> None:
        self.handed: list[tuple[str, datetime | None, Sequence[Any]]] = []

    def deliver(
        self,
        job: DeliverableJob,
        tick: datetime | None,
        *,
        args: Sequence[Any] = (),
        using: str | None = None,
        manual: bool = False,
    ) -> Delivery:
        self.handed.append((job.name, tick, args))
        return Delivery(job.name, tick, job.deliver or "memo", enqueued=True, task_id="m-1")

    def problems(self, job: DeliverableJob) -> list[str]:
        return []

    def sent(self, job: str, handed: Delivery, what: str) -> str:
        return f"{job}: memoed ({what}) as {handed.task_id}"


MEMO_TASKS = ByName(
    queue="Memo",
    task="memo task",
    workers="the memo's readers",
    allowed=lambda: {"tidy"},
    allowed_in="MEMO_TASKS",
)


@pytest.fixture
def memo() -> Iterator[Memo]:
    """The ``"memo"`` target, registered for one test."""
    queue = Memo()
    before = targets.registered()
    targets.register(Target("memo", "inbox", queue, by_name=MEMO_TASKS))
    yield queue
    targets._targets.pop("memo")
    assert targets.registered() == before


def test_a_job_may_name_a_target_registered_outside_the_package(
    memo: Memo, fresh_registry: None
) -> None:
    @locked_task(schedule="0 2 * * *", deliver="memo:inbox")
    def nightly() -> None: ...

    deliverer = targets.deliverer_for(nightly)
    assert deliverer is memo
    tick = datetime(2026, 1, 1, 2)
    handed = deliverer.deliver(nightly, tick, args=[1])
    assert memo.handed == [("nightly", tick, [1])]
    assert deliverer.sent("nightly", handed, "tick") == "nightly: memoed (tick) as m-1"
    accepted = (
        "deliver must be 'tasks' or 'tasks:<backend alias>', 'celery' or 'celery:<queue>', "
        "'memo' or 'memo:<inbox>', not 'post'"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(accepted)}$"):
        targets.parse("post")


def test_a_schedule_sent_by_name_speaks_of_its_target(memo: Memo) -> None:
    allowed = Definition("tidy", job="tidy", deliver="memo", every=60)
    assert allowed.problems() == []
    assert allowed.calls == "memo task tidy"
    (refused,) = Definition("wipe", job="wipe", deliver="memo", every=60).problems()
    assert refused == (
        "memo task wipe is not a task a schedule may send; add 'wipe' to MEMO_TASKS to allow it"
    )
    (command,) = Definition("c", command="clearsessions", deliver="memo", every=60).problems()
    assert command == (
        "a schedule sent to Memo names the memo task as its job; a management command runs "
        "here, not in Memo"
    )
    job = to_job(allowed)
    assert isinstance(job.func, RemoteCall)
    assert job.description == "memo task tidy"
    sent_elsewhere = "the memo task 'tidy' is sent to the memo's readers, not run here"
    with pytest.raises(DeliveryError, match=f"^{re.escape(sent_elsewhere)}"):
        job.func()
