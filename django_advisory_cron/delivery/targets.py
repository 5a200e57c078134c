"""Where a scheduled tick runs: in place, or handed to a task queue (``Job.deliver``).

A scheduler (``cronworker``'s dispatch, ``runlocked --enqueue``) asks
[deliverer_for][django_advisory_cron.delivery.targets.deliverer_for] for a job: ``None`` runs the
tick in place; a [Deliverer][django_advisory_cron.delivery.targets.Deliverer] hands it over
instead. Each queue is a [Target][django_advisory_cron.delivery.targets.Target] that registers
itself by its scheme (``deliver="<scheme>"`` or ``"<scheme>:<where>"``) and says whether it
sends a task by name, so nothing outside its own folder branches on it: this package's own
targets are named once, in ``BUILT_IN``, as Django names its session engines in a setting;
another package's target calls [register][django_advisory_cron.delivery.targets.register]
from its ``AppConfig.ready()``. Every target hands a tick over the same way:
[hand_over][django_advisory_cron.delivery.handover.hand_over].
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from importlib import import_module
from typing import TYPE_CHECKING, Any, Protocol

from ..core.schedule import Schedule
from ..exceptions import AdvisoryCronError

if TYPE_CHECKING:
    from django.db.models import QuerySet

#: The modules of this package's own targets, in the order the messages list them; each has an
#: ``install()`` that registers its target. Imported when the seam is first asked (a job may
#: name its target before Django's apps are ready), else when the app is.
BUILT_IN = ("django_advisory_cron.contrib.tasks", "django_advisory_cron.contrib.celery")


class DeliveryError(AdvisoryCronError):
    """A tick could not be handed to its task queue (not installed, bad backend, bad args)."""


@dataclass(frozen=True)
class ByName:
    """How a target that sends a task by name speaks of it: a schedule sent there names a task
    of the queue as its ``job`` (the queue's workers know it; this process need not), and a
    schedule kept in the database may send only the tasks its setting allows."""

    #: The queue, as people call it: "a schedule sent to <queue>".
    queue: str
    #: What the schedule's ``job`` names: "<task> <name>".
    task: str
    #: Where the task runs: "runs in <workers>".
    workers: str
    #: The tasks a schedule kept in the database may send (read when asked), and where the
    #: site allows more: "add it to <allowed_in>".
    allowed: Callable[[], Collection[str]]
    allowed_in: str


@dataclass(frozen=True, slots=True)
class RemoteCall:
    """What a schedule delivered by name sends each tick: the task's name and its arguments.
    It is the job's function, but never runs here: its body is the task, in the queue's
    workers."""

    task: str
    args: list[Any]
    kwargs: dict[str, Any]
    by: ByName

    def __call__(self) -> None:
        raise DeliveryError(
            f"the {self.by.task} {self.task!r} is sent to {self.by.workers}, not run here: "
            "send a tick now with runlocked --enqueue"
        )


class DeliverableJob(Protocol):
    """What delivery needs of a job (a [Job][django_advisory_cron.jobs.job.Job]; the jobs sit
    above delivery, so it cannot name the class)."""

    @property
    def name(self) -> str: ...

    @property
    def deliver(self) -> str | None: ...

    @property
    def using(self) -> str | None: ...

    @property
    def schedule(self) -> Schedule | None: ...


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
        tick); raise [DeliveryError][django_advisory_cron.delivery.targets.DeliveryError] when it
        cannot."""
        ...

    def problems(self, job: DeliverableJob) -> list[str]:
        """Why ``job``'s ``deliver`` cannot work here (empty when it can)."""
        ...

    def sent(self, job: str, handed: Delivery, what: str) -> str:
        """The one line saying that ``job``'s run (``what``: its tick, or a manual run) was
        handed to the queue."""
        ...


class TaskLinks(Protocol):
    """How the admin links a delivered run to its task's result page, for a target whose
    results have one."""

    def annotate(self, runs: QuerySet[Any]) -> QuerySet[Any]:
        """``runs`` with what ``link`` needs, in the page's own query (no query per row)."""
        ...

    def link(self, task_id: str, run: Any) -> str | None:
        """The run's task id, linked where its result is; ``None``: not this target's."""
        ...


@dataclass(frozen=True)
class Target:
    """A task queue a job's ticks may be handed to: ``deliver="<scheme>"`` or
    ``"<scheme>:<where>"``."""

    scheme: str
    #: What may follow the colon ("queue", "backend alias"), for the messages.
    where: str
    deliverer: Deliverer
    #: Set when its schedules send a task of the queue by name instead of a registered job.
    by_name: ByName | None = None
    #: Whether ``runlocked --enqueue`` of a job with no ``deliver=`` goes here.
    default: bool = False
    #: Set when the admin can link a run to its task's result.
    links: TaskLinks | None = None


_targets: dict[str, Target] = {}
_built_in: list[str] = []


def register(target: Target) -> None:
    """Make ``deliver="<scheme>..."`` jobs go through ``target``."""
    _targets[target.scheme] = target


def install() -> None:
    """Register this package's own targets (once; from the app's ``ready()``, or from the
    first question asked of the seam)."""
    for module in BUILT_IN:
        if module not in _built_in:
            _built_in.append(module)  # first: a target's module may ask the seam
            import_module(module).install()


def registered() -> list[Target]:
    """Every target, this package's own first."""
    install()
    return list(_targets.values())


def parse(deliver: str) -> tuple[str, str | None]:
    """``"tasks"`` -> ``("tasks", None)``; ``"celery:emails"`` -> ``("celery", "emails")``.

    Raises ``ValueError`` with a message naming what is accepted.
    """
    known = registered()
    scheme, colon, where = deliver.partition(":")
    if scheme not in _targets or (colon and not where.strip()) or where != where.strip():
        accepted = ", ".join(f"'{t.scheme}' or '{t.scheme}:<{t.where}>'" for t in known)
        raise ValueError(f"deliver must be {accepted}, not {deliver!r}")
    return scheme, where or None


def by_name(deliver: str | None) -> ByName | None:
    """How the target ``deliver`` names speaks of the task it sends by name, when it sends one
    (the schedule that has it names that task as its ``job`` instead of a registered job);
    ``None`` otherwise. Whether ``deliver`` is valid is ``parse``'s to say."""
    install()
    target = _targets.get((deliver or "").partition(":")[0])
    return target.by_name if target else None


def deliverer_for(job: DeliverableJob) -> Deliverer | None:
    """The deliverer of ``job``, or ``None`` when its ticks run in place."""
    if job.deliver is None:
        return None
    return _deliverer(parse(job.deliver)[0])


def sender_for(job: DeliverableJob) -> Deliverer:
    """Where ``job``'s tick goes when it is sent instead of run (``runlocked --enqueue``): its
    deliverer, else the default target's."""
    deliverer = deliverer_for(job)
    if deliverer is not None:
        return deliverer
    for target in registered():
        if target.default:
            return target.deliverer
    raise DeliveryError(f"job {job.name!r} has no deliver=, and no queue takes such a job here")


def _deliverer(scheme: str) -> Deliverer:
    try:
        return _targets[scheme].deliverer
    except KeyError:
        raise DeliveryError(
            f"nothing delivers {scheme!r} in this process (is django_advisory_cron in "
            "INSTALLED_APPS?)"
        ) from None


def with_task_links(runs: QuerySet[Any]) -> QuerySet[Any]:
    """``runs`` with what each target needs to link a run to its task's result."""
    for target in registered():
        if target.links:
            runs = target.links.annotate(runs)
    return runs


def task_link(task_id: str, run: Any) -> str:
    """A delivered run's task id (``run``'s, from ``with_task_links``), linked to its result's
    page by the first target that has one; ``"—"`` without a task."""
    if not task_id:
        return "—"
    for target in registered():
        shown = target.links.link(task_id, run) if target.links else None
        if shown is not None:
            return shown
    return task_id
