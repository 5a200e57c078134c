"""Where a scheduled tick runs: in place, or handed to a task queue (``Job.deliver``).

A scheduler (``cronworker``'s dispatch, ``runlocked --enqueue``) asks
[deliverer_for][django_advisory_cron.run.delivery.deliverer_for] for a job: ``None`` runs the tick
in place; a [Deliverer][django_advisory_cron.run.delivery.Deliverer] hands it over instead. The
deliverers live above this layer (``contrib.tasks`` registers ``"tasks"``, ``contrib.celery``
``"celery"``, when the app is ready), so the scheduler never imports an integration, and an
integration never needs the scheduler. Both hand a tick over the same way:
[hand_over][django_advisory_cron.run.handover.hand_over].
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from ..exceptions import AdvisoryCronError

#: The kinds of ``deliver=`` a job may name: ``"tasks"`` (the default Tasks backend) or
#: ``"tasks:<backend alias>"``; ``"celery"`` (the Celery task's own route) or
#: ``"celery:<queue>"``.
SCHEMES = ("tasks", "celery")
#: What follows the colon, per scheme, for the messages.
TARGETS = {"tasks": "backend alias", "celery": "queue"}


class DeliveryError(AdvisoryCronError):
    """A tick could not be handed to its task queue (not installed, bad backend, bad args)."""


def parse(deliver: str) -> tuple[str, str | None]:
    """``"tasks"`` -> ``("tasks", None)``; ``"celery:emails"`` -> ``("celery", "emails")``.

    Raises ``ValueError`` with a message naming what is accepted.
    """
    scheme, colon, target = deliver.partition(":")
    if scheme not in SCHEMES or (colon and not target.strip()) or target != target.strip():
        accepted = ", ".join(f"'{name}' or '{name}:<{TARGETS[name]}>'" for name in SCHEMES)
        raise ValueError(f"deliver must be {accepted}, not {deliver!r}")
    return scheme, target or None


def sends_by_name(deliver: str | None) -> bool:
    """Whether ``deliver`` sends a task of another queue by name (``"celery..."``): the schedule
    that has it names that task as its ``job`` instead of a registered job. Whether ``deliver``
    is valid is ``parse``'s to say."""
    return (deliver or "").partition(":")[0] == "celery"


@dataclass(frozen=True, slots=True)
class RemoteCall:
    """What a schedule delivered by name (``deliver="celery"``) sends each tick: the task's
    name and its arguments. It is the job's function, but never runs here: its body is the
    task, in the queue's workers."""

    task: str
    args: list[Any]
    kwargs: dict[str, Any]

    def __call__(self) -> None:
        raise DeliveryError(
            f"the Celery task {self.task!r} is sent to Celery's workers, not run here: "
            "send a tick now with runlocked --enqueue"
        )


class DeliverableJob(Protocol):
    """What this module needs of a job (a [Job][django_advisory_cron.jobs.job.Job]; this module
    is imported by ``jobs``, so it cannot name the class)."""

    @property
    def name(self) -> str: ...

    @property
    def deliver(self) -> str | None: ...


@dataclass
class Delivery:
    """What one scheduler did with one tick."""

    job: str
    tick: datetime | None
    #: Where it went (for Tasks: the backend alias).
    target: str
    #: True when this scheduler enqueued it; False when another one had claimed the tick, or
    #: the tick already has a run.
    enqueued: bool
    #: The task result id the backend returned, when this scheduler enqueued it.
    task_id: str = ""
    #: True when it was not enqueued because the tick already has a run (say, ``runlocked``
    #: ran it), not because another scheduler enqueued it.
    already_ran: bool = False
    #: Why the job is paused, when the tick was not handed over for that (empty otherwise).
    paused: str = ""


class Deliverer(Protocol):
    """Hands a job's tick over to a queue instead of running it here."""

    def deliver(
        self,
        job: DeliverableJob,
        tick: datetime | None,
        *,
        args: Sequence[Any] = (),
        using: str | None = None,
        manual: bool = False,
    ) -> Delivery:
        """Enqueue ``tick`` of ``job`` once across schedulers (``manual``: now, claiming no
        tick); raise [DeliveryError][django_advisory_cron.run.delivery.DeliveryError] when it
        cannot."""
        ...

    def problems(self, job: DeliverableJob) -> list[str]:
        """Why ``job``'s ``deliver`` cannot work here (empty when it can)."""
        ...


_deliverers: dict[str, Deliverer] = {}


def register(scheme: str, deliverer: Deliverer) -> None:
    """Make ``deliver="<scheme>..."`` jobs go through ``deliverer``."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown delivery {scheme!r}; known: {', '.join(SCHEMES)}")
    _deliverers[scheme] = deliverer


def deliverer_for(job: DeliverableJob) -> Deliverer | None:
    """The deliverer of ``job``, or ``None`` when its ticks run in place."""
    if job.deliver is None:
        return None
    return deliverer_for_scheme(parse(job.deliver)[0])


def deliverer_for_scheme(scheme: str) -> Deliverer:
    """The deliverer registered for ``scheme`` (``"tasks"``, ``"celery"``)."""
    try:
        return _deliverers[scheme]
    except KeyError:
        raise DeliveryError(
            f"nothing delivers {scheme!r} in this process (is django_advisory_cron in "
            "INSTALLED_APPS?)"
        ) from None
