"""``cronjob pause``, ``resume`` and ``trigger``: the operator's say over a job's ticks, through
[control][django_advisory_cron.ops.control], each saying in a line what it did. What cannot
be done raises ``CommandError`` with the exit code the command's epilog gives it."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

from .. import exitcodes
from ..db.execute import database_now
from ..delivery import targets
from ..jobs import fanout
from ..jobs.job import Job
from ..ops import control
from ..run.runner import RunResult, execute
from ..worker.fleet import live_workers
from .runs import outcome, signals_unwind


def for_tenant(job: Job[Any, Any], tenant: str | None) -> Job[Any, Any]:
    """``job``, or with ``tenant`` its runs for that tenant schema (``name@schema``): a
    per-tenant job is paused and resumed tenant by tenant."""
    if tenant is None:
        if job.per_tenant:
            raise CommandError(
                f"job {job.name!r} runs per tenant: name one with --tenant SCHEMA",
                returncode=exitcodes.USAGE,
            )
        return job
    if not job.per_tenant:
        raise CommandError(
            f"job {job.name!r} is not per tenant: leave out --tenant", returncode=exitcodes.USAGE
        )
    for each in fanout.split(job):
        if each.tenant == tenant:
            return each
    raise CommandError(
        f"job {job.name!r} has no tenant {tenant!r}: --tenant takes a tenant's schema name",
        returncode=exitcodes.USAGE,
    )


def pause(job: Job[Any, Any], alias: str, until_text: str | None, reason: str) -> str:
    """Skip ``job``'s ticks, until resumed or ``until_text`` (a duration or a date-time)."""
    until = None
    if until_text is not None:
        try:
            until = control.parse_until(until_text, database_now(alias))
        except ValueError as error:
            raise CommandError(f"--until: {error}", returncode=exitcodes.USAGE) from None
    row = control.pause(job.name, until=until, by=control.operator(), reason=reason, using=alias)
    return (
        f"{job.name}: {control.describe_pause(row)}. Its ticks are skipped until it "
        f"ends or 'manage.py cronjob resume {job.name}'."
    )


def resume(job: Job[Any, Any], alias: str) -> str:
    """Run ``job``'s ticks again."""
    before = control.resume(job.name, using=alias)
    if before is None or not control.is_paused(before, database_now(alias)):
        return f"{job.name}: was not paused; nothing to do."
    return f"{job.name}: resumed (it was {control.describe_pause(before)})."


def trigger(job: Job[Any, Any], alias: str, here: bool) -> str:
    """Ask the running cronworkers to run ``job`` now, or, ``here``, run it in this process
    (as ``runlocked`` would, its exit code included)."""
    if here and targets.by_name(job.deliver):
        # Its body is a task of the queue: running it here is sending it, once, as a manual run.
        try:
            deliverer = targets.sender_for(job)
            handed = deliverer.deliver(job, None, using=alias, manual=True)
        except targets.DeliveryError as error:
            raise CommandError(str(error), returncode=exitcodes.CONFIG) from None
        return deliverer.sent(job.name, handed, "manual run")
    if here:
        ended: RunResult | BaseException
        try:
            with signals_unwind(job.timeout):
                ended = execute(job, using=alias, manual=True)
        except Exception as error:
            ended = error
        code, message = outcome(job.name, ended, None)
        if code != exitcodes.OK:
            raise CommandError(message, returncode=code)
        return f"{message} (manual run)"
    workers = len(live_workers(alias))
    if not workers:
        raise CommandError(
            f"no cronworker is connected to the database, so nothing would run {job.name}; "
            f"nothing was recorded. Start 'manage.py cronworker', or run it here with "
            f"'manage.py cronjob trigger --here {job.name}'",
            returncode=exitcodes.NO_WORKER,
        )
    requested = control.request_run(job.name, by=control.operator(), using=alias)
    return (
        f"{job.name}: run requested (pending since {requested:%Y-%m-%d %H:%M:%S %Z}); one "
        f"of the {workers} connected cronworker(s) starts it within about a second. The run "
        "history records it as a manual run."
    )
