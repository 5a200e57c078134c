"""Send a job's tick to Celery as the task it names, once across every scheduler.

The winner of the tick's claim ([hand_over][django_advisory_cron.delivery.handover.hand_over])
sends the task by name (``app.send_task``), with the schedule's arguments and the tick in the
message's headers. The send is bounded: each attempt to reach the broker (connect, read,
write) has ``CELERY_SEND_TIMEOUT`` seconds, and there are at most ``SEND_ATTEMPTS``. The run
history records each tick: ``succeeded`` when sent (with the Celery task id), ``failed`` with
a one-line error when the broker could not take it, or when its sender died before the broker
answered (found once the send's bound, ``send_lease()``, has passed). What the task then does
is Celery's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ...delivery.handover import hand_over
from ...delivery.targets import (
    ByName,
    DeliverableJob,
    Delivery,
    DeliveryError,
    RemoteCall,
    parse,
)
from ...exceptions import first_line
from ...jobs.job import Job
from .app import NOT_INSTALLED, SET_THE_APP, celery_app, installed
from .conf import schedule_tasks, send_timeout

#: The message headers a sent tick carries; a task reads them with ``tick_of()``.
TICK_HEADER = "advisory_cron_tick"
JOB_HEADER = "advisory_cron_job"
#: How a schedule sent to Celery names its task, and which tasks a database schedule may send.
BY_NAME = ByName(
    queue="Celery",
    task="Celery task",
    workers="Celery's workers",
    allowed=schedule_tasks,
    allowed_in="ADVISORY_CRON['SCHEDULE_CELERY_TASKS']",
)
#: Attempts to reach the broker per tick (the first one and two retries).
SEND_ATTEMPTS = 3
#: The transport options that bound one attempt, per kombu transport (its ``driver_type``).
TIMEOUT_OPTIONS = {
    "redis": ("socket_timeout", "socket_connect_timeout"),
    "amqp": ("read_timeout", "write_timeout"),
}


def send_lease() -> float:
    """Seconds a send takes at most: each attempt connects, writes and reads within
    ``CELERY_SEND_TIMEOUT`` each, with half a second between the attempts; a second more for
    a loaded machine. A sender not done by then is taken for dead."""
    return SEND_ATTEMPTS * 3 * send_timeout() + 0.5 * (SEND_ATTEMPTS - 1) + 1


def call_of(job: DeliverableJob, args: Sequence[Any] = ()) -> RemoteCall:
    """What ``job``'s ticks send: the task its schedule names (``job=``) with its arguments,
    else (a job defined in code) the task named like the job; ``args`` go after them."""
    assert isinstance(job, Job)
    call = job.func if isinstance(job.func, RemoteCall) else RemoteCall(job.name, [], {}, BY_NAME)
    return RemoteCall(call.task, [*call.args, *args], dict(call.kwargs), BY_NAME)


def queue_of(job: DeliverableJob) -> str | None:
    """The queue ``deliver="celery:<queue>"`` names (``None``: the task's own route)."""
    return parse(job.deliver or "celery")[1]


@dataclass(frozen=True)
class Problem:
    """Why a job's ticks cannot be sent to Celery here."""

    check_id: str
    message: str
    hint: str


def diagnose(job: DeliverableJob) -> list[Problem]:
    """What stands in the way of sending ``job``'s ticks to Celery."""
    if not installed():
        return [
            Problem(
                "E070",
                f"Job {job.name!r} has deliver={job.deliver!r}, but {NOT_INSTALLED}.",
                "Install Celery, or remove deliver= to run the job's ticks in place.",
            )
        ]
    try:
        celery_app()
    except DeliveryError as error:
        return [
            Problem(
                "E071",
                f"Job {job.name!r} has deliver={job.deliver!r}, but {error}.",
                SET_THE_APP[0].upper() + SET_THE_APP[1:] + ".",
            )
        ]
    return []


def app_for(job: DeliverableJob) -> Any:
    """The Celery app ``job``'s ticks go through; raises
    [DeliveryError][django_advisory_cron.delivery.targets.DeliveryError] naming the job."""
    try:
        return celery_app()
    except DeliveryError as error:
        raise DeliveryError(f"job {job.name!r} cannot be sent to Celery: {error}") from None


def send(app: Any, job: DeliverableJob, call: RemoteCall, moment: datetime) -> str:
    """Publish ``call`` through ``app`` for the tick ``moment``; its Celery task id. Raises
    [DeliveryError][django_advisory_cron.delivery.targets.DeliveryError], in one line naming the
    job and the broker, when the broker cannot take it within the bound."""
    timeout = send_timeout()
    with app.connection_for_write() as unopened:  # which transport: no connection yet
        driver = unopened.transport.driver_type
    options = dict.fromkeys(TIMEOUT_OPTIONS.get(driver, ()), timeout)
    queue = queue_of(job)
    with app.connection_for_write(connect_timeout=timeout, transport_options=options) as broker:
        where = broker.as_uri(include_password=not broker.password)  # no ":**@" for none
        try:
            result = app.send_task(
                call.task,
                args=call.args,
                kwargs=call.kwargs,
                headers={TICK_HEADER: moment.isoformat(), JOB_HEADER: job.name},
                connection=broker,
                retry=True,
                retry_policy={
                    "max_retries": SEND_ATTEMPTS - 1,
                    "interval_start": 0,
                    "interval_step": 0.5,
                    "interval_max": 0.5,
                },
                **({"queue": queue} if queue else {}),
            )
        except Exception as error:
            # kombu re-raises the transport's connection errors as its OperationalError.
            from kombu.exceptions import OperationalError

            unreachable = isinstance(error, (OperationalError, *broker.connection_errors, OSError))
            what = (
                f"Celery's broker {where} did not take it ({first_line(error)}); start the "
                "broker or fix the Celery app's broker_url"
                if unreachable
                else f"Celery refused it ({type(error).__name__}: {first_line(error)})"
            )
            raise DeliveryError(
                f"job {job.name!r}: Celery task {call.task!r} for tick {moment.isoformat()} "
                f"not sent: {what}"
            ) from error
    return str(result.id)


class CeleryDeliverer:
    """The ``"celery"`` [Deliverer][django_advisory_cron.delivery.targets.Deliverer]."""

    def deliver(
        self,
        job: DeliverableJob,
        tick: datetime | None,
        *,
        args: Sequence[Any] = (),
        using: str | None = None,
        manual: bool = False,
    ) -> Delivery:
        """Send ``job``'s task for ``tick`` (or, for an unscheduled or ``manual`` run, the
        database's current time), unless another scheduler already claimed the tick; the
        tick's run (or the manual run) records the send."""
        assert isinstance(job, Job)
        call = call_of(job, args)
        app = app_for(job)  # refused before the tick is claimed
        return hand_over(
            job,
            tick,
            target=job.deliver or "celery",
            send=lambda moment: send(app, job, call, moment),
            using=using,
            lease=send_lease(),
            record=True,
            manual=manual,
        )

    def problems(self, job: DeliverableJob) -> list[str]:
        """Why ``job``'s ticks cannot be sent here (empty when they can)."""
        return [problem.message for problem in diagnose(job)]

    def sent(self, job: str, handed: Delivery, what: str) -> str:
        """The line saying that ``job``'s run (``what``) was sent to Celery."""
        return f"{job}: sent ({what}) to Celery ({handed.target}) as task {handed.task_id}"
