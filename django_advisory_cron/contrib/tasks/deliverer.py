"""Enqueue a job's tick to a Tasks backend, once across every scheduler.

The claim before the enqueue is [hand_over][django_advisory_cron.delivery.handover.hand_over]'s:
only the scheduler that wins a tick enqueues it. A duplicate that gets through anyway (a
backend's retry, a redelivery, a task re-enqueued by hand) is absorbed when it runs: the run
claims the tick in the run history and every later delivery finds it taken and skips.
A scheduler that dies (or hangs) while it enqueues leaves its claim without a task id: once
``send_lease()`` has passed, the job's next claim records the tick failed, and a task that was
enqueued after all finds the tick taken and skips.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ...conf import app_settings
from ...db.connections import connect_timeout
from ...delivery.handover import CLAIM_KEEP_DAYS as CLAIM_KEEP_DAYS
from ...delivery.handover import hand_over
from ...delivery.targets import DeliverableJob, Delivery, DeliveryError, parse
from ...jobs.job import Job
from .framework import NOT_INSTALLED, errors, framework, installed


def backend_alias(job: DeliverableJob) -> str:
    """The Tasks backend alias ``job`` is delivered to (``"tasks"`` alone: the default)."""
    _scheme, alias = parse(job.deliver or "tasks")
    return alias or str(framework().DEFAULT_TASK_BACKEND_ALIAS)


def check_arguments(job_name: str, args: Sequence[Any]) -> list[Any]:
    """The arguments as the JSON list the task carries; raises
    [DeliveryError][django_advisory_cron.delivery.targets.DeliveryError] for one that is not
    JSON-serialisable (the Tasks framework's own rule)."""
    values = list(args)
    try:
        return list(json.loads(json.dumps(values)))
    except (TypeError, ValueError) as error:
        raise DeliveryError(
            f"job {job_name!r} cannot be enqueued: its arguments must be JSON-serialisable "
            f"for the Tasks framework ({error}); pass ids or strings instead"
        ) from None


def task_for(job: DeliverableJob) -> Any:
    """The internal task bound to ``job``'s backend; raises
    [DeliveryError][django_advisory_cron.delivery.targets.DeliveryError] when the backend is unknown
    or cannot take it."""
    tasks = framework()
    alias = backend_alias(job)
    if alias not in tasks.task_backends.settings:
        configured = ", ".join(map(repr, tasks.task_backends.settings)) or "none"
        raise DeliveryError(
            f"job {job.name!r} has deliver={job.deliver!r}, but TASKS has no backend "
            f"{alias!r} (configured: {configured}); add it to TASKS or fix deliver="
        )
    # Not at the top: the task runs jobs (it needs the models), and the seam imports this
    # package before Django's apps are ready.
    from .task import tick_task

    try:
        return tick_task().using(backend=alias)
    except errors() as error:
        raise DeliveryError(
            f"job {job.name!r}: the Tasks backend {alias!r} cannot enqueue its ticks: {error}"
        ) from None


def send_lease(job: Job[..., Any], backend: Any) -> float:
    """Seconds an enqueue takes at most: what one statement of ours is given
    (``CONNECT_TIMEOUT`` to connect, ``STATEMENT_TIMEOUT`` for the answer; django-tasks-db's
    enqueue is one insert) and a second for a loaded machine; a backend that runs the task
    inside the enqueue claims the tick once the job's lock is taken, after up to its ``wait``.
    A sender with no answer by then is taken for dead."""
    waiting = job.wait if runs_in_place(backend) else 0
    return connect_timeout() + app_settings.STATEMENT_TIMEOUT + 1 + waiting


@dataclass(frozen=True)
class Problem:
    """One reason a job's ticks cannot be delivered (``is_error``) or will not run."""

    check_id: str
    message: str
    hint: str
    is_error: bool = True


def diagnose(job: DeliverableJob) -> list[Problem]:
    """What stands in the way of delivering ``job``'s ticks through the Tasks framework."""
    if not job.deliver or parse(job.deliver)[0] != "tasks":
        return []
    if not installed():
        return [
            Problem(
                "E050",
                f"Job {job.name!r} has deliver={job.deliver!r}, but {NOT_INSTALLED}.",
                "Install a Tasks framework, or remove deliver= to run the job's ticks in place.",
            )
        ]
    tasks = framework()
    alias = backend_alias(job)
    if alias not in tasks.task_backends.settings:
        configured = ", ".join(map(repr, tasks.task_backends.settings)) or "none"
        return [
            Problem(
                "E051",
                f"Job {job.name!r} has deliver={job.deliver!r}, but TASKS has no backend "
                f"{alias!r} (configured: {configured}).",
                "Add the backend to TASKS, or name a configured one in deliver='tasks:<alias>'.",
            )
        ]
    refusals: tuple[type[Exception], ...] = (DeliveryError, *errors())
    try:
        backend = tasks.task_backends[alias]
        task_for(job)
    except refusals as error:
        return [
            Problem(
                "E052",
                f"Job {job.name!r}: the Tasks backend {alias!r} cannot enqueue its ticks: "
                f"{str(error).strip().splitlines()[0]}",
                "Fix the backend in TASKS (its BACKEND path, its QUEUES must include "
                "'default'), or deliver to another backend.",
            )
        ]
    if type(backend).__name__ == "DummyBackend":
        return [
            Problem(
                "W053",
                f"Job {job.name!r} is delivered to the Tasks backend {alias!r}, a "
                "DummyBackend: its ticks are enqueued and never run.",
                "Deliver to a backend with workers (e.g. django-tasks-db's DatabaseBackend).",
                is_error=False,
            )
        ]
    if runs_in_place(backend):
        return [
            Problem(
                "W054",
                f"Job {job.name!r} is delivered to the Tasks backend {alias!r}, an "
                "ImmediateBackend (the default without a TASKS setting): nothing is queued, "
                "each tick runs inside the scheduler that enqueues it (cronworker, runlocked "
                "--enqueue).",
                "Configure TASKS with a backend that queues (e.g. django-tasks-db's "
                "DatabaseBackend) and run its workers, or remove deliver= to run the ticks in "
                "cronworker itself.",
                is_error=False,
            )
        ]
    return []


def runs_in_place(backend: Any) -> bool:
    """Whether ``backend`` runs a task inside ``enqueue()`` instead of queueing it: the
    framework's ``ImmediateBackend`` (or a subclass), the default without a ``TASKS`` setting.

    A class check: neither framework has a flag for it (``supports_defer`` says whether a
    backend can delay a task, not whether it queues one: the ``DummyBackend``'s is true)."""
    try:
        module = importlib.import_module(f"{framework().__name__}.backends.immediate")
    except ImportError:
        return False
    return isinstance(backend, module.ImmediateBackend)


class TasksDeliverer:
    """The ``"tasks"`` [Deliverer][django_advisory_cron.delivery.targets.Deliverer]."""

    def deliver(
        self,
        job: DeliverableJob,
        tick: datetime | None,
        *,
        args: Sequence[Any] = (),
        using: str | None = None,
        manual: bool = False,
    ) -> Delivery:
        """Enqueue ``job`` for ``tick`` (or, for an unscheduled run, for the database's
        current time), unless another scheduler already claimed the tick. A ``manual`` run is
        refused: the task runs the job for the tick nearest the time it is enqueued for, and a
        manual run never takes a tick; it runs in place (``runlocked --manual``)."""
        assert isinstance(job, Job)
        if manual:
            raise DeliveryError(
                f"job {job.name!r}: a manual run of a job delivered through the Tasks framework "
                "runs here, not in a task (its task takes the tick nearest the time it is "
                f"enqueued for): manage.py runlocked --manual {job.name}"
            )
        values = check_arguments(job.name, args)
        task = task_for(job)
        backend = task.backend
        lease = send_lease(job, framework().task_backends[backend])

        def send(moment: datetime) -> str:
            try:
                return str(task.enqueue(job.name, moment.isoformat(), values).id)
            except Exception as error:
                raise DeliveryError(
                    f"job {job.name!r}: the Tasks backend {backend!r} refused the task: {error}"
                ) from error

        return hand_over(job, tick, target=backend, send=send, using=using, lease=lease)

    def problems(self, job: DeliverableJob) -> list[str]:
        """Why ``job``'s ticks cannot be enqueued here (empty when they can)."""
        return [problem.message for problem in diagnose(job) if problem.is_error]

    def sent(self, job: str, handed: Delivery, what: str) -> str:
        """The line saying that ``job``'s run (``what``) was enqueued to its Tasks backend."""
        where = f"Tasks backend {handed.target!r}"
        return f"{job}: enqueued ({what}) to {where} as task {handed.task_id}"
