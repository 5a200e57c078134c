"""What a run does about its job's other runs, by the job's ``overlap`` policy (see
[overlap][django_advisory_cron.core.overlap]): the ticks that wait for the run going to end
(``buffer_one``, ``buffer_all``), and the runs a new one replaces (``terminate_other``) or
asks to stop (``cancel_other``), leaderless.

A tick that finds its job busy (its lock held, or a run of it still alive) is recorded as a
row of its own, status ``waiting``, once per tick whichever replicas found it busy (a unique
index on the waiting rows' job and tick, and a transaction lock on the job's waiting key that
makes replicas record them one at a time, so the bound holds). A waiting row is nobody's run:
it has no lease, counts as no live run, and takes no tick. Whoever sees the job free next, the
process whose run just ended or any replica at the job's next tick, starts the oldest waiting
tick through the normal claim, so exactly one process runs it (the tick's unique run row), and
deletes its waiting row. A waiting tick whose replicas all died is started by the first
replica that runs the job again, once the dead run's lease has expired (as any claim treats a
dead run); it is never run twice, since its run is claimed like any other.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from django.db import DatabaseError, transaction

from ..conf import app_settings
from ..core.keys import LockKey
from ..core.moments import tick_said
from ..core.overlap import CANCEL_GRACE, waiting_bound
from ..core.schedule import Schedule
from ..core.statuses import RunStatus
from ..db import others
from ..db.execute import fetch_all, fetch_fresh, fetch_one
from ..exceptions import first_line
from ..run import handlers, history
from ..run.history import HOST

logger = logging.getLogger("django_advisory_cron")


class Overlapping(Protocol):
    """What a job's overlap policy needs of it (a [Job][django_advisory_cron.jobs.job.Job])."""

    @property
    def name(self) -> str: ...
    @property
    def key(self) -> LockKey: ...
    @property
    def overlap(self) -> str: ...
    @property
    def schedule(self) -> Schedule | None: ...


def wait(
    alias: str, key: LockKey, *, job: str, tick: datetime, policy: str
) -> tuple[str, str] | None:
    """Record ``tick`` of ``job`` (whose lock is ``key``), which found the job busy, as
    waiting, or as skipped when its policy's bound is reached; ``(status, text)`` of the row
    written (or of the one another process wrote for it), ``None`` when the tick has run or
    is running."""
    with transaction.atomic(using=alias):
        fetch_one(alias, others.lock_waiting(key.waiting_key()))
        row = fetch_one(
            alias,
            others.wait_tick(
                job=job,
                tick=tick,
                policy=policy,
                bound=waiting_bound(policy),
                host=HOST,
                pid=os.getpid(),
            ),
        )
    return None if row is None else (str(row[0]), str(row[1]))


def oldest(alias: str, job: str, before: datetime | None = None) -> datetime | None:
    """The oldest tick of ``job`` still waiting (before ``before``, if given), or ``None``."""
    row = fetch_one(alias, others.next_waiting(job=job, before=before))
    return None if row is None or row[0] is None else row[0]


def started(alias: str, job: str, tick: datetime) -> None:
    """The run of ``tick`` was claimed: its waiting row, if any, goes."""
    fetch_one(alias, others.unwait_tick(job=job, tick=tick))


class Policy:
    """``skip`` and ``allow_all``: the claim alone decides (a tick that finds its job busy is
    skipped; ``allow_all``'s runs at once are its job's run slots, which the claim takes). The
    other policies change what a run does before its claim, once it has claimed, or around the
    whole run; the runner and the worker ask the job's policy, never its name."""

    #: It acts on its job's runs going (replaces them, asks them to stop, or keeps the tick
    #: waiting for them). So a tick that comes while a run of the job goes in the same worker
    #: still goes to its claim instead of being skipped in the worker, and its runs are claimed
    #: alone, each on a connection of its own, never in a worker's batch on a connection shared
    #: with other runs' locks (a replaced run's lock backend is terminated).
    acts_on_runs_going = False

    def start(
        self,
        job: Overlapping,
        alias: str,
        once: Callable[[datetime | None], history.Run],
        now: datetime | None,
        keep_going: Callable[[], bool] | None,
        *,
        manual: bool,
    ) -> history.Run:
        """The run of the tick nearest ``now`` (``once`` runs one), and what else the policy
        starts around it."""
        return once(now)

    def before_claim(self, job: Overlapping, run: history.Run, around: datetime) -> None:
        """What a run does about its job's runs going before it claims its tick."""

    def claimed(self, job: Overlapping, run: history.Run) -> None:
        """What a run does once its claim took its tick, before its body starts."""


class Buffer(Policy):
    """``buffer_one`` and ``buffer_all``: a tick that finds its job busy waits for the run
    going to end; the process whose run ends starts the ticks waiting."""

    acts_on_runs_going = True

    def start(
        self,
        job: Overlapping,
        alias: str,
        once: Callable[[datetime | None], history.Run],
        now: datetime | None,
        keep_going: Callable[[], bool] | None,
        *,
        manual: bool,
    ) -> history.Run:
        if manual or job.schedule is None:  # a "run now", or no tick: nothing to keep waiting
            return once(now)
        return buffered(job, alias, once, now, keep_going)

    def claimed(self, job: Overlapping, run: history.Run) -> None:
        if run.tick is None or run.using is None:
            return
        try:  # a waiting tick's run: its waiting row goes (else the next look deletes it)
            started(run.using, job.name, run.tick)
        except DatabaseError as error:
            logger.warning("job %s: its waiting row not deleted: %s", job.name, first_line(error))


class Terminate(Policy):
    """``terminate_other``: a new tick's run ends the job's runs going, wherever they run (its
    lock's backend is terminated, so it must hold no other run's lock)."""

    acts_on_runs_going = True

    def before_claim(self, job: Overlapping, run: history.Run, around: datetime) -> None:
        if not run.manual:
            replace_others(job, run, around)


class Cancel(Policy):
    """``cancel_other``: a new tick's run asks the job's runs going to stop, and terminates
    those still going after ``CANCEL_GRACE`` seconds; each run watches for such a request."""

    acts_on_runs_going = True

    def before_claim(self, job: Overlapping, run: history.Run, around: datetime) -> None:
        if run.manual:
            return
        run.watch_stop = True
        run.held_by.loss.on_stop = stop_in_main_thread(threading.current_thread(), run)
        cancel_others(job, run, around)


#: Each policy's behaviour, by its name (``core.overlap.OVERLAPS``).
POLICIES: dict[str, Policy] = {
    "skip": Policy(),
    "allow_all": Policy(),
    "buffer_one": Buffer(),
    "buffer_all": Buffer(),
    "terminate_other": Terminate(),
    "cancel_other": Cancel(),
}


def buffered(
    job: Overlapping,
    alias: str,
    once: Callable[[datetime | None], history.Run],
    now: datetime | None,
    keep_going: Callable[[], bool] | None,
) -> history.Run:
    """``overlap`` buffer_one and buffer_all: the tick's run, or its wait when its job is
    busy or older ticks wait before it; then, when a run ended here, the ticks waiting."""
    schedule = job.schedule
    assert schedule is not None
    around = now or datetime.now().astimezone()
    matches = schedule.matches(around, app_settings.MAX_SKEW)
    tick = _nearest(matches, around)
    if tick is None:  # an unscheduled run: there is no tick to keep waiting
        return once(now)
    if oldest(alias, job.name, before=tick) is not None:
        # Older ticks wait: this one waits behind them, and the oldest is started if it can be.
        result = history.new_run(job.name, tick=tick, using=alias)
        _wait(job, alias, result)
        _drain(job, alias, once, keep_going)
        return result
    result = once(now)
    if result.status == RunStatus.SKIPPED_LOCKED and result.tick is not None:
        _wait(job, alias, result)
    elif result.ran:
        _drain(job, alias, once, keep_going)
    return result


def _wait(job: Overlapping, alias: str, result: history.Run) -> None:
    """Record the tick of ``result``, which found its job busy, as waiting (or skipped, past
    its policy's bound), and say so in ``result``."""
    assert result.tick is not None
    recorded = wait(alias, job.key, job=job.name, tick=result.tick, policy=job.overlap)
    if recorded is None:  # its run started meanwhile, elsewhere
        result.status = RunStatus.SKIPPED_TICK
        return
    status, result.waited = recorded
    result.status = RunStatus(status)
    logger.info("job %s, %s: %s", job.name, tick_said(result.tick), result.waited)


def _drain(
    job: Overlapping,
    alias: str,
    once: Callable[[datetime | None], history.Run],
    keep_going: Callable[[], bool] | None,
) -> None:
    """Start the job's waiting ticks, oldest first, each once its previous run has ended here,
    until none waits, another process runs the job, or ``keep_going()`` says stop."""
    tried: set[datetime] = set()
    try:
        while keep_going is None or keep_going():
            tick = oldest(alias, job.name)
            if tick is None or tick in tried:
                return
            tried.add(tick)
            result = once(tick)
            if not result.ran and not result.skipped_tick:
                return  # busy again (another process started it), paused, or stopped
    except Exception as error:  # the database went away: the next tick of the job starts them
        logger.error("job %s: its waiting ticks not started: %s", job.name, first_line(error))


def replace_others(job: Overlapping, run: history.Run, around: datetime) -> None:
    """``overlap="terminate_other"``: before claiming its tick (the match nearest ``around``;
    none for an unscheduled run), stop the job's runs of earlier ticks, wherever they run."""
    tick = _nearest(run.matches, around)
    runs, backends = _replace(run, tick)
    if runs:
        logger.warning(
            "job %s: its run of %s replaces %d run(s) going (overlap terminate_other); %d "
            "lock holder(s) terminated",
            job.name,
            tick_said(tick, "no tick"),
            runs,
            backends,
        )


def cancel_others(job: Overlapping, run: history.Run, around: datetime) -> None:
    """``overlap="cancel_other"``: before claiming its tick, ask the job's runs of earlier
    ticks to stop, wherever they run, and wait up to ``CANCEL_GRACE`` seconds for them to end;
    those still going then are terminated as ``terminate_other`` does."""
    tick = _nearest(run.matches, around)
    assert run.using is not None
    statement = others.request_cancel(job=run.job, tick=tick, host=HOST, pid=run.pid)
    asked = [int(row[0]) for row in fetch_all(run.using, statement)]
    if not asked:
        return
    logger.warning(
        "job %s: its run of %s asks %d run(s) going to stop (overlap cancel_other)",
        job.name,
        tick_said(tick, "no tick"),
        len(asked),
    )
    deadline = time.monotonic() + CANCEL_GRACE
    while _still_going(run.using, asked):
        if time.monotonic() >= deadline:
            runs, backends = _replace(run, tick, policy="cancel_other", grace=CANCEL_GRACE)
            logger.warning(
                "job %s: %d run(s) still going %g s after being asked to stop: %d lock "
                "holder(s) terminated (overlap cancel_other)",
                job.name,
                runs,
                CANCEL_GRACE,
                backends,
            )
            return
        time.sleep(CANCEL_POLL)


#: How often a ``cancel_other`` run looks whether the runs it asked to stop have ended.
CANCEL_POLL = 0.1


def stop_in_main_thread(body_thread: threading.Thread, run: history.Run) -> Callable[[str], bool]:
    """How ``run``, asked to stop, is told when its body runs in its process's main thread
    under a handler of SIGTERM (``runlocked``, a worker's child process): SIGTERM, as a
    shutdown tells it. Elsewhere (a thread, or no handler), nothing: its next query raises
    ``RunCancelled``."""

    def stop(text: str) -> bool:
        if body_thread is not threading.main_thread():
            return False
        return handlers.ask_main_thread_to_stop(lambda: not run.body_ended)

    return stop


def _replace(
    run: history.Run, tick: datetime | None, policy: str = "terminate_other", grace: float = 0
) -> tuple[int, int]:
    """End the job's runs going for ticks before ``tick`` (with ``cancel_other``: those asked
    to stop ``grace`` seconds ago), wherever they run: their rows say they were replaced (or
    cancelled), their lock's backends are terminated, so each stops as on a lost lock, and the
    lock is free once this returns; through a fresh connection. How many runs and backends."""
    statement = others.replace_runs(
        run.held_by.key, job=run.job, tick=tick, host=HOST, pid=run.pid, policy=policy, grace=grace
    )
    assert run.using is not None
    row = fetch_fresh(run.using, statement, patience=app_settings.HEARTBEAT)
    return (0, 0) if row is None else (int(row[0]), int(row[1]))


def _still_going(alias: str, ids: list[int]) -> int:
    """How many of the runs ``ids`` still go."""
    row = fetch_one(alias, others.runs_going(ids))
    return 0 if row is None else int(row[0])


def _nearest(matches: list[tuple[datetime, datetime]], around: datetime) -> datetime | None:
    """The tick of the match nearest ``around`` (``None``: an unscheduled run, no match)."""
    return min(matches, key=lambda match: abs(match[0] - around), default=(None, None))[1]
