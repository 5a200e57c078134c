"""Starting a worker's runs, and keeping track of every run it started.

A run goes to a pool thread (at most ``--max-concurrency`` at once, in threads and child
processes together), which runs it in place or waits for its child process (see
[children][django_advisory_cron.worker.children]). A session lock of the worker's database is
taken on the worker's one connection, its presence (see
[claims][django_advisory_cron.lock.shared]), whether the run was claimed with others or alone:
the pool threads' own connections are the job bodies'. A job whose previous run here is still
going when its next tick comes is not started again; the tick is recorded as skipped
(Kubernetes' ``concurrencyPolicy: Forbid``), unless its ``overlap="allow_all"`` leaves room
for another beside it (``Allow``, bounded by its ``max_concurrent``), or its
``overlap="buffer_one"`` or ``"buffer_all"`` keeps the tick waiting until the run going ends.
A job with ``deliver=`` is handed to its deliverer instead (see
[delivery][django_advisory_cron.delivery.targets]). At shutdown running jobs get the grace.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import DatabaseError, connections

from .. import signals
from ..core.moments import tick_said
from ..core.scopes import ResolvedScope, Scope
from ..core.statuses import FAILING, SKIPS, RunStatus
from ..db import pooler, sql
from ..db.aliases import lock_database
from ..db.execute import fetch_one
from ..delivery import targets
from ..exceptions import DatabaseUnavailable, first_line
from ..jobs import fanout
from ..jobs.job import Job
from ..lock.shared import ClaimConnection
from ..run.history import HOST
from ..run.runner import ClaimedRun, RunResult, claim_waiting, execute
from .children import STOP_GRACE, Children, Isolation, in_process
from .narration import DETAILS, ERRORS, RUNS, Narrator

logger = logging.getLogger("django_advisory_cron")

RUN_THREAD = "advisory-cron-run"

#: A run that waited longer than this for a free slot (``--max-concurrency``) is logged.
SLOT_WAIT_LOGGED = 1.0

#: Statuses counted as failed in the worker's line at shutdown: the job's own failures, and
#: runs a stop cut short.
NOT_COMPLETED = (*FAILING, RunStatus.INTERRUPTED)


@dataclass
class WorkerStats:
    """What this worker did, for its line at shutdown. Each tick and "run now" request it
    took up to run is counted once, in one of ``ran``, ``skipped``, ``paused``,
    ``overlapped`` and ``not_run``: ``taken`` is their sum."""

    #: Runs started here, whatever their end.
    ran: int = 0
    #: Of ``ran``: those that did not succeed (failed, timed out, lock lost, interrupted).
    failed: int = 0
    #: Ticks another replica had (it holds the job's lock, or already ran the tick).
    skipped: int = 0
    #: Of ``skipped``: those seen claimed before their locks were tried (the look before
    #: claiming the jobs dealt to other workers); the others' claims lost.
    seen_claimed: int = 0
    #: Ticks skipped because the job is paused.
    paused: int = 0
    #: Ticks not started because the job's previous run here was still going.
    overlapped: int = 0
    #: Ticks that found their job busy and wait for its run going to end, or were skipped
    #: because as many ticks as the bound already wait (overlap buffer_one, buffer_all).
    waiting: int = 0
    #: Ticks and requests taken up that never started: the worker stopped first, or the
    #: database could not record them.
    not_run: int = 0
    #: Of ``taken``: "run now" requests.
    manual: int = 0
    #: Ticks of ``deliver=`` jobs handed to their task queue (deliveries, not runs: a task
    #: worker runs them): enqueued here, found enqueued by another scheduler, found already
    #: run (say, by ``runlocked``), refused (the queue failed), or not handed over (paused).
    enqueued: int = 0
    enqueued_elsewhere: int = 0
    already_ran: int = 0
    not_enqueued: int = 0
    delivery_paused: int = 0
    #: Statements that claimed several jobs' ticks at once (see ``claims``).
    batches: int = 0

    @property
    def taken(self) -> int:
        """Ticks and "run now" requests taken up to run here, whatever became of them."""
        return self.ran + self.skipped + self.paused + self.overlapped + self.not_run + self.waiting

    @property
    def delivered(self) -> int:
        """Ticks handed to a task queue, whatever became of them."""
        return (
            self.enqueued
            + self.enqueued_elsewhere
            + self.already_ran
            + self.not_enqueued
            + self.delivery_paused
        )

    def count(self, status: RunStatus) -> None:
        """Count a tick or request that ended ``status`` (hold the dispatcher's lock)."""
        if status == RunStatus.SKIPPED_PAUSED:
            self.paused += 1
        elif status == RunStatus.WAITING:
            self.waiting += 1
        elif status in SKIPS:
            self.skipped += 1
        else:
            self.ran += 1
            self.failed += status in NOT_COMPLETED


class Dispatcher:
    """Starts one worker's runs in its pool threads and tracks them until they end."""

    def __init__(
        self,
        jobs: dict[str, Job[..., object]],
        *,
        using: str,
        claims: ClaimConnection,
        identity: str,
        max_concurrency: int,
        isolation: Isolation,
        stop: threading.Event,
        narrator: Narrator,
    ) -> None:
        #: Every job the worker was given, by name.
        self.jobs = jobs
        #: What the worker says on its stdout of each run.
        self.narrator = narrator
        self.using = using
        self.identity = identity
        self.max_concurrency = max_concurrency
        self.isolation = isolation
        self.children = Children(identity)
        self.stats = WorkerStats()
        #: Guards ``stats`` and the runs below.
        self.lock = threading.Lock()
        #: The worker's presence connection: it claims the runs of its database and holds
        #: their locks, and records skipped overlapping ticks.
        self.claims = claims
        #: Per database alias: the connection that claims its ticks (see ``claims_on``).
        self._claims: dict[str, ClaimConnection] = {claims.alias: claims}
        #: The scope of a lock on an alias, as resolved during this wake (see ``new_wake``).
        self._scopes: dict[tuple[Scope, str], ResolvedScope] = {}
        self._stop = stop
        self._uid = f"{identity}:{id(self)}"  # several workers may share one process
        self._pool: ThreadPoolExecutor
        #: Every run this worker started and that may still be going, per job, whatever
        #: started it (a tick, a catch-up, a "run now", a delivery), with what it is for (named
        #: when a tick overlaps it). Shutdown waits for all of them; done ones are dropped as
        #: they are looked at.
        self._runs: dict[str, dict[Future[Any], str]] = {}
        #: Runs in progress, by pool thread: their rows are finished here if the grace ends.
        self._active: dict[int, RunResult] = {}
        #: Set in this worker's pool threads while they run a job of its (see ``_track``).
        self._mine = threading.local()

    def open(self) -> None:
        """Start the pool, and remember the runs its threads start."""
        self._pool = ThreadPoolExecutor(self.max_concurrency, thread_name_prefix=RUN_THREAD)
        signals.job_started.connect(self._track, weak=False, dispatch_uid=self._uid)

    def close(self) -> None:
        """Stop tracking runs, and close the claim connections (each once the last run whose
        lock it holds has ended; the worker's presence among them)."""
        signals.job_started.disconnect(dispatch_uid=self._uid)
        for claims in self._claims.values():
            claims.close()

    def claims_on(self, alias: str) -> ClaimConnection:
        """The connection that claims ticks and holds session locks on the database
        ``alias``: the worker's presence for its own, one more per other database."""
        with self.lock:
            claims = self._claims.get(alias)
            if claims is None:
                claims = self._claims[alias] = ClaimConnection(alias)
            return claims

    def in_process(self, job: Job[..., object]) -> bool:
        return in_process(job, self.isolation)

    def claimable(self, job: Job[..., object]) -> bool:
        """Whether ``job``'s ticks are claimed on a claim connection: it runs in a thread
        here and takes a session lock (either key form), or, behind a transaction pooler,
        its scope is ``auto`` (the row's lease protects it there; a job that asks for
        transaction scope keeps its writes and its run row in one transaction). Other runs
        take their own."""
        if self.in_process(job) or job.deliver is not None or job.policy.acts_on_runs_going:
            return False
        using = lock_database(job.using, self.using)
        key = (job.scope, using)
        scope = self._scopes.get(key)
        if scope is None:
            leased = self.claims_on(using).find_pooled
            scope = self._scopes[key] = pooler.resolve_scope(job.scope, using, leased=leased)
        return scope != "transaction"

    def new_wake(self) -> None:
        """A new wake of the worker: scopes are resolved afresh. Within one wake they are
        resolved once per scope and database, not once per job due (whether a database is
        pooled reads the settings and the process's probe: hundreds of jobs due together read
        the same answer)."""
        self._scopes = {}

    @property
    def latest(self) -> dict[str, Future[Any]]:
        """The latest run started per job."""
        with self.lock:
            return {name: list(runs)[-1] for name, runs in self._runs.items() if runs}

    def dispatch(self, job: Job[..., object], ticks: list[datetime]) -> None:
        """Start the runs of ``job`` for ``ticks`` (oldest first, one after another: a
        catch-up) without waiting for them; if the job's previous run here is still going,
        record the ticks as skipped instead (no thread, no process). A job with ``deliver=`` is
        handed to its deliverer instead, tick by tick."""
        try:
            deliverer = targets.deliverer_for(job)
        except targets.DeliveryError as error:
            logger.error(
                "cronworker: %s: %s not run: %s",
                job.name,
                ", ".join(tick_said(tick) for tick in ticks),
                error,
            )
            with self.lock:
                self.stats.not_run += len(ticks)
            return
        if deliverer is not None:
            with self.lock:
                for tick in ticks:
                    try:
                        handing = self._pool.submit(self._deliver_one, deliverer, job, tick)
                    except RuntimeError:  # the interpreter is exiting: start nothing more
                        self._stop.set()
                        return
                    self._add_running(job.name, handing, f"tick {tick.isoformat()}, enqueued")
            return
        with self.lock:
            previous = self.going(job.name)
            # allow_all: up to max_concurrent at once; others by their policy (see jobs.overlap)
            room = len(previous) < job.slots or job.policy.acts_on_runs_going
            if room:
                try:
                    future = self._pool.submit(self._run_ticks, job, ticks, time.monotonic())
                except RuntimeError:  # the interpreter is exiting: start nothing more
                    self._stop.set()
                    self.stats.not_run += len(ticks)
                    return
                self._add_running(job.name, future, f"tick {ticks[-1].isoformat()}")
            else:
                waiting = not any(future.running() for future in previous)
                what = " and ".join(sorted(previous.values()))
        if room:
            future.add_done_callback(self._not_run_if_cancelled(len(ticks)))
            return
        for tick in ticks:
            self._skip_overlapping(job, tick, waiting, what)

    def start_claimed(self, claimed: ClaimedRun) -> None:
        """Start a run claimed in a batch; if it cannot start (the worker is stopping), record
        it interrupted and release its lock."""
        name, tick = claimed.job.name, claimed.result.tick
        assert tick is not None
        why = f"cronworker {self.identity} stopped before the run started"

        not_run = self._not_run_if_cancelled(1)

        def abandon_if_cancelled(future: Future[Any]) -> None:
            if future.cancelled():  # the worker stopped before a thread took it
                claimed.abandon(why)
                not_run(future)

        job = self.jobs.get(name)
        if job is None:  # made for this tick alone: a tenant's run of a per-tenant job
            assert isinstance(claimed.job, Job)
            job = claimed.job
        with self.lock:
            try:
                future = self._pool.submit(self._run_one, job, tick, time.monotonic(), claimed)
            except RuntimeError:  # the interpreter is exiting: start nothing more
                self._stop.set()
                self.stats.not_run += 1
                started = False
            else:
                self._add_running(name, future, f"tick {tick.isoformat()}")
                started = True
        if started:
            future.add_done_callback(abandon_if_cancelled)
        else:
            claimed.abandon(why)

    def start_manual(self, name: str) -> None:
        """Start a "run now" of the job ``name``: no tick; under the lock like any run, so it
        is skipped (and recorded) while another run of the job holds it. A job whose body is
        a task of another queue (its ``deliver=`` sends a task by name) is sent to it instead,
        as a manual run. A per-tenant job's tenant (``name@schema``) runs in its schema."""
        found = self.jobs.get(name) or fanout.tenant_job(self.jobs, name)
        if found is None:
            logger.error(
                "cronworker: %s: run now not started: no such tenant of a per-tenant job here; "
                "see manage.py cronstatus --all",
                name,
            )
            return
        job = found
        try:
            sender = targets.deliverer_for(job) if targets.by_name(job.deliver) else None
        except targets.DeliveryError as error:
            logger.error("cronworker: %s: run now not sent: %s", job.name, error)
            return
        with self.lock:
            if sender is None:  # a send is counted with the ticks handed to a queue
                self.stats.manual += 1
            try:
                future = (
                    self._pool.submit(self._deliver_one, sender, job, None)
                    if sender is not None
                    else self._pool.submit(self._run_one, job, None, time.monotonic())
                )
            except RuntimeError:  # the interpreter is exiting: start nothing more
                self._stop.set()
                self.stats.not_run += sender is None
                return
            self._add_running(job.name, future, "a run-now request")
        if sender is None:
            future.add_done_callback(self._not_run_if_cancelled(1))

    def going(self, name: str) -> dict[Future[Any], str]:
        """The runs of ``name`` this worker started that are not over (hold ``lock``)."""
        runs = self._runs.get(name, {})
        for future in [future for future in runs if future.done()]:
            del runs[future]
        return dict(runs)

    def drain(self, grace: float) -> list[RunResult]:
        """Start nothing new; give running jobs ``grace`` seconds; return those still running
        then (with a run row).

        Child processes get SIGTERM before the grace ends (``STOP_GRACE`` s before, at most
        half of it), so they record their end and release their locks themselves; those still
        alive when it ends are killed and recorded by the pool thread waiting for them."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + grace
        self.children.stop_by(deadline, grace)
        with self.lock:
            running = [(name, future) for name in self._runs for future in self.going(name)]
        for name, future in running:
            # A child killed at the deadline is recorded by its pool thread: wait for that.
            # A tenant's run (name@schema, made for its tick) runs in a thread.
            job = self.jobs.get(name)
            until = deadline + (STOP_GRACE if job and self.in_process(job) else 0.0)
            try:
                future.result(timeout=max(0.0, until - time.monotonic()))
            except FutureTimeout:
                pass
            except Exception:  # recorded and logged by the runner
                pass
        with self.lock:
            return [result for result in self._active.values() if result.run_id]

    def _not_run_if_cancelled(self, ticks: int) -> Callable[[Future[Any]], None]:
        """A done callback: count ``ticks`` as not run if the worker stopped before a pool
        thread took them (call outside ``lock``: a done future calls it at once)."""

        def count(future: Future[Any]) -> None:
            if future.cancelled():
                with self.lock:
                    self.stats.not_run += ticks

        return count

    def _add_running(self, name: str, future: Future[Any], what: str) -> None:
        """Remember a run this worker started (hold ``lock``)."""
        self._runs.setdefault(name, {})[future] = what

    def _skip_overlapping(
        self, job: Job[..., object], tick: datetime, waiting: bool, what: str
    ) -> None:
        """Record ``tick`` as skipped because the job's previous run (for ``what``) is still
        going."""
        previous = f"its previous run ({what})"
        otherwise = (
            f"{previous} is still waiting for a free slot (--max-concurrency "
            f"{self.max_concurrency})"
            if waiting
            else f"{previous} is still going"
        )
        text, params = sql.skip_overlapping(
            job=job.name, host=HOST, pid=os.getpid(), tick=tick, otherwise=otherwise
        )
        try:
            with self.claims.turn() as connection:
                row = fetch_one(connection, (text, params))
        except (DatabaseError, DatabaseUnavailable) as error:
            logger.error(
                "cronworker: %s: could not record tick %s as skipped: %s", job.name, tick, error
            )
            row = None
        with self.lock:
            self.stats.overlapped += 1
        said = row[0] if row else otherwise
        logger.warning("cronworker: %s skipped tick %s: %s", job.name, tick, said)
        self.narrator.say(DETAILS, f"cronworker: {job.name}, tick {tick}: skipped: {said}")

    def _track(self, sender: object, run: RunResult, **kwargs: object) -> None:
        """``job_started`` receiver: remember the runs of this worker's pool threads (not
        those of another worker in the same process). A send recorded as its tick's run
        (a queue whose task is not a job of this app) is announced finished: nothing of it is
        left to wait for."""
        if getattr(self._mine, "running", False) and run.status == RunStatus.RUNNING:
            with self.lock:
                self._active[threading.get_ident()] = run

    @contextlib.contextmanager
    def _tracking(self) -> Iterator[None]:
        """Around a job run in this thread: ``_track`` remembers it while it runs."""
        self._mine.running = True
        try:
            yield
        finally:
            self._mine.running = False
            with self.lock:
                self._active.pop(threading.get_ident(), None)

    def _run_ticks(
        self, job: Job[..., object], ticks: list[datetime], submitted: float
    ) -> RunResult | None:
        """Run ``job`` for each of ``ticks`` in turn (stopping early if the worker stops)."""
        result = None
        for number, tick in enumerate(ticks):
            if number and self._stop.is_set():
                with self.lock:
                    self.stats.not_run += len(ticks) - number
                break
            result = self._run_one(job, tick, submitted)
        return result

    def _run_one(
        self,
        job: Job[..., object],
        tick: datetime | None,
        submitted: float,
        claimed: ClaimedRun | None = None,
    ) -> RunResult | None:
        """One run: for ``tick``, or a manual run ("run now") when ``tick`` is ``None``; or
        the run ``claimed`` in a batch."""
        waited = time.monotonic() - submitted
        if waited > SLOT_WAIT_LOGGED:
            logger.warning(
                "cronworker: %s (%s) waited %.1f s for a free slot (--max-concurrency %d)",
                job.name,
                tick_said(tick),
                waited,
                self.max_concurrency,
            )
        using = lock_database(job.using, self.using)
        began = time.monotonic()
        try:
            if self.in_process(job):
                result = self.children.run(job, tick, using)
            else:
                try:
                    with self._tracking():
                        if claimed is not None:
                            result = claimed.run()
                        elif self.claimable(job):
                            result = self._claim_alone(job, tick, using)
                        else:
                            result = execute(
                                job,
                                now=tick,
                                using=using,
                                manual=tick is None,
                                keep_going=lambda: not self._stop.is_set(),
                            )
                finally:
                    connections.close_all()  # this pool thread's own connections
        except Exception as error:  # nothing could be recorded (the database is away)
            logger.error(
                "cronworker: job %s, %s, did not run: %s",
                job.name,
                tick_said(tick),
                first_line(error),
            )
            with self.lock:
                self.stats.not_run += 1
            said = f"cronworker: {job.name}, {tick_said(tick)}: did not run: {first_line(error)}"
            self.narrator.say(ERRORS, said)
            return None
        with self.lock:
            self.stats.count(result.status)
        self._narrate(job, tick, result, time.monotonic() - began)
        return result

    def _narrate(
        self, job: Job[..., object], tick: datetime | None, result: RunResult, took: float
    ) -> None:
        """Say on stdout how a run ended: a skip at ``-v 2``, a run at ``-v 1``, a run that
        did not succeed at any verbosity."""
        what = f"cronworker: {job.name}, {tick_said(tick)}: {RunStatus(result.status).label}"
        if result.status in SKIPS:
            self.narrator.say(DETAILS, what)
            return
        why = f": {first_line(result.error)}" if result.error is not None else ""
        run = f"run {result.run_id}" if result.run_id is not None else "not recorded"
        level = ERRORS if result.status in NOT_COMPLETED else RUNS
        self.narrator.say(level, f"{what} in {took:.1f} s ({run}){why}")

    def _claim_alone(self, job: Job[..., object], tick: datetime | None, using: str) -> RunResult:
        """Claim one tick (``None``: a manual run) on the claim connection of its database
        (one statement, like a batch's; tried again for up to the job's ``wait``), and run it
        if won."""
        claims = self.claims_on(using)
        claimed = claim_waiting(job, tick, claims, wait=job.wait, stop=self._stop)
        return claimed.run() if isinstance(claimed, ClaimedRun) else claimed

    def _deliver_one(
        self, deliverer: targets.Deliverer, job: Job[..., object], tick: datetime | None
    ) -> targets.Delivery | None:
        """Hand ``tick`` of ``job`` to its queue; ``None``: a "run now", sent as a manual
        run."""
        using = lock_database(job.using, self.using)
        what = tick_said(tick)
        try:
            # A queue that runs its tasks at once runs the job in this thread.
            with self._tracking():
                handed = deliverer.deliver(job, tick, using=using, manual=tick is None)
        except Exception as error:
            logger.error("cronworker: %s of %s not enqueued: %s", what, job.name, error)
            with self.lock:
                self.stats.not_enqueued += 1
            self.narrator.say(ERRORS, f"cronworker: {job.name}, {what}: not enqueued: {error}")
            return None
        finally:
            connections.close_all()
        if tick is None:
            logger.info(
                "cronworker: %s: run now sent (deliver=%s) as task %s",
                job.name,
                handed.target,
                handed.task_id,
            )
        with self.lock:
            if handed.enqueued:
                self.stats.enqueued += 1
            elif handed.paused:
                self.stats.delivery_paused += 1
            elif handed.already_ran:
                self.stats.already_ran += 1
            else:
                self.stats.enqueued_elsewhere += 1
        if handed.enqueued:
            said = f"enqueued to {handed.target} as task {handed.task_id}"
        elif handed.paused:
            said = f"not handed over: {handed.paused}"
        else:
            said = "already ran" if handed.already_ran else "enqueued by another scheduler"
        level = RUNS if handed.enqueued else DETAILS
        self.narrator.say(level, f"cronworker: {job.name}, {what}: {said}")
        return handed
