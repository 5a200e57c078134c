"""Hand a job's tick to a queue once across every scheduler: the algorithm every deliverer
(``"tasks"``, ``"celery"``) shares; each brings only its ``send``.

Before sending, a scheduler claims ``(job, tick)`` with one statement (an
[EnqueuedTick][django_advisory_cron.models.EnqueuedTick] row, unique per job and tick, not
inserted once the tick has a run, nor while the job is paused). Only the winner sends, so 20
schedulers waking at the same tick send one message. A run outside every tick's tolerance
(``runlocked --enqueue`` off the schedule), and a manual one ("run now"), claim no tick and
are sent as asked.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.utils.dateparse import parse_datetime

from ..conf import app_settings
from ..core.moments import tick_said
from ..core.statuses import RunStatus
from ..db import sql
from ..db.aliases import lock_database
from ..db.execute import database_now, fetch_one
from ..run.history import HOST
from ..run.runner import told
from .targets import DeliverableJob, Delivery, DeliveryError

logger = logging.getLogger("django_advisory_cron")

#: Claims of ticks older than this (before the newest claim of the same job) are deleted.
CLAIM_KEEP_DAYS = 7


def hand_over(
    job: DeliverableJob,
    tick: datetime | None,
    *,
    target: str,
    send: Callable[[datetime], str],
    using: str | None = None,
    lease: float | None = None,
    record: bool = False,
    manual: bool = False,
) -> Delivery:
    """Claim ``tick`` of ``job`` (or, for an unscheduled run, the tick nearest the
    database's clock) and, if this caller won it, ``send(moment)`` (the tick, or the time of an
    unscheduled run), which returns the queue's id of the message or raises
    [DeliveryError][django_advisory_cron.delivery.targets.DeliveryError]. A ``manual`` send (run
    now, ``runlocked --manual``) claims no tick: it is sent as asked, like a manual run.

    ``target`` says where it goes (stored on the claim). A refused send gives the claim back,
    so the tick can be sent again. With ``record``, the send is the tick's run instead, for a
    queue whose task is not a job of this app, so nothing else would write it: written
    ``running`` with the claim, then succeeded with the message's id, or failed with the error.
    A send that claimed no tick is recorded after it as a run without one (``manual`` or not).

    ``lease`` is the seconds a send may take, at most. A sender that dies meanwhile (or hangs)
    leaves its claim without the message's id; the next claim of the job, by any scheduler,
    once the lease ran out, records the tick failed: the message may or may not have been
    sent, and it is not sent again (at most once: a task of this app that was enqueued finds
    its tick taken and skips).
    """
    alias = lock_database(using, job.using)
    at = tick or database_now(alias)
    schedule = job.schedule
    matched = schedule.nearest_tick(at, app_settings.MAX_SKEW) if schedule and not manual else None
    claim_id: int | None = None
    if matched is not None:
        claim = fetch_one(
            alias,
            sql.claim_enqueue(
                job=job.name,
                tick=matched,
                backend=target,
                host=HOST,
                pid=os.getpid(),
                keep_days=CLAIM_KEEP_DAYS,
                lease=lease,
                record=record,
                unsure=(
                    "the message may or may not have been sent"
                    if record
                    else "the task may or may not have been enqueued (if it was, it skips "
                    "this tick)"
                ),
            ),
        )
        assert claim is not None
        claim_id, ran, paused, run_id, dead = claim
        for found_id, found_tick, died in dead or ():
            when = parse_datetime(found_tick)
            logger.warning("job %s: tick %s: %s", job.name, when, died)
            _told(job, (found_id,), when, False, alias, "", DeliveryError(died))
        if paused is not None:
            # As a paused job's ticks are not run: every scheduler logs it, none records it.
            logger.info("job %s: tick %s not handed over: %s", job.name, matched, paused)
            return Delivery(job.name, matched, target, enqueued=False, paused=paused)
        if claim_id is None:
            where = "already ran" if ran else "already enqueued elsewhere"
            logger.info("job %s: tick %s %s", job.name, matched, where)
            return Delivery(job.name, matched, target, enqueued=False, already_ran=ran)
    try:
        task_id = send(matched or at)
    except DeliveryError as error:
        if record:
            refused = (
                sql.refused_send(claim_id=claim_id, run_id=run_id, error=str(error))
                if claim_id is not None
                else _unclaimed(job, at, manual, "", str(error))
            )
            _told(job, fetch_one(alias, refused), matched, manual, alias, "", error)
        elif claim_id is not None:
            fetch_one(alias, sql.release_claim(claim_id=claim_id))
        raise
    if record:
        sent = (
            sql.enqueued(claim_id=claim_id, task_id=task_id, run_id=run_id)
            if claim_id is not None
            else _unclaimed(job, at, manual, task_id, "")
        )
        _told(job, fetch_one(alias, sent), matched, manual, alias, task_id, None)
    elif claim_id is not None:
        fetch_one(alias, sql.enqueued(claim_id=claim_id, task_id=task_id))
    what = "run now" if manual else tick_said(matched, "no tick")
    logger.info("job %s: %s enqueued to %s as task %s", job.name, what, target, task_id)
    return Delivery(job.name, matched, target, enqueued=True, task_id=task_id)


def _unclaimed(
    job: DeliverableJob, started: datetime, manual: bool, task_id: str, error: str
) -> sql.Statement:
    return sql.unclaimed_send(
        job=job.name,
        host=HOST,
        pid=os.getpid(),
        started=started,
        manual=manual,
        task_id=task_id,
        error=error,
    )


def _told(
    job: DeliverableJob,
    row: tuple[Any, ...] | None,
    tick: datetime | None,
    manual: bool,
    using: str,
    task_id: str,
    error: DeliveryError | None,
) -> None:
    """Tell the push monitors of a send recorded here as its tick's run (``row``: its id;
    ``None`` when the tick already had a run): see [told][django_advisory_cron.run.runner.told]."""
    if row is not None:
        status = RunStatus.SUCCEEDED if error is None else RunStatus.FAILED
        told(
            job,
            status,
            tick=tick,
            using=using,
            run_id=row[0],
            manual=manual,
            value=task_id,
            error=error,
        )
