"""Jobs due together, claimed together: one statement per database takes their locks and
claims their ticks (see [claims][django_advisory_cron.lock.shared]), each first by the live
worker it is dealt to ([share_out][django_advisory_cron.worker.fleet.share_out]), so the wins
spread across replicas instead of going to the fastest one. The others look a moment later
which of those ticks are still unclaimed, with one read that tries no lock, and claim only
those: a tick costs the database about one claim whatever the number of replicas, and the
share of a worker that is gone still runs.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime

from django.db import DatabaseError

from ..conf import app_settings
from ..core.statuses import RunStatus
from ..db import sql
from ..db.aliases import lock_database
from ..exceptions import DatabaseUnavailable, first_line
from ..jobs.job import Job
from ..run.runner import claim_together, told
from .dispatch import Dispatcher
from .fleet import peers, share_out
from .narration import DETAILS

logger = logging.getLogger("django_advisory_cron")

#: At most this many jobs' ticks are claimed by one statement.
CLAIM_BATCH = 1000

#: Seconds a worker leaves the jobs dealt to other live workers (see ``share_out``) to them
#: before it looks which are still unclaimed, and claims those.
SPREAD_DELAY = 0.1

Due = list[tuple[Job[..., object], datetime]]


class Batches:
    """Claims the ticks due together of one worker's jobs, and starts the winners through
    ``dispatcher``."""

    def __init__(self, dispatcher: Dispatcher, stop: threading.Event) -> None:
        self.dispatcher = dispatcher
        self.presence = dispatcher.claims
        assert self.presence.presence is not None
        self.presence_name = self.presence.presence
        self._stop = stop

    def claimable(self, job: Job[..., object]) -> bool:
        """Whether ``job``'s tick can be claimed in a batch with others' (see
        [claimable][django_advisory_cron.worker.dispatch.Dispatcher.claimable]), at once (no
        ``wait``), and its runs here leave it room (its previous one is over, or it may run
        several at once). Others are claimed one by one."""
        if job.wait or not self.dispatcher.claimable(job):
            return False
        with self.dispatcher.lock:
            return len(self.dispatcher.going(job.name)) < job.slots

    def claim(self, due: Due) -> None:
        """Claim the ticks of ``due`` in as few statements as possible, then start the
        winners. The jobs dealt to this worker (``share_out``, among the live workers) are
        claimed at once; ``SPREAD_DELAY`` seconds later, of the others, those whose tick is
        still unclaimed (``_unclaimed``), so the runs are shared between the replicas instead
        of all going to the fastest one, each tick is tried by about one replica, and a job
        whose worker is busy, gone or does not run it still runs.

        One statement per database (per ``CLAIM_BATCH`` jobs; a database with one job due
        claims it alone). Winners beyond ``--max-concurrency`` wait for a free slot holding
        their locks, so the other replicas skip them at once instead of each trying later."""
        live = peers(self.presence)
        first, later = due, []
        if live is not None:
            shares = share_out([job.name for job, _tick in due], live, min(t for _j, t in due))
            first = [(job, tick) for job, tick in due if shares[job.name] == self.presence_name]
            later = [(job, tick) for job, tick in due if shares[job.name] != self.presence_name]
        for alias, jobs in self._by_alias(first).items():
            self._claim_on(alias, jobs)
        if later and not self._stop.wait(SPREAD_DELAY):
            for alias, jobs in self._by_alias(later).items():
                self._claim_on(alias, self._unclaimed(alias, jobs))

    def _by_alias(self, due: Due) -> dict[str, Due]:
        """``due`` by the database its ticks are claimed on."""
        by_alias: dict[str, Due] = {}
        for job, tick in due:
            by_alias.setdefault(lock_database(job.using, self.dispatcher.using), []).append(
                (job, tick)
            )
        return by_alias

    def _claim_on(self, alias: str, due: Due) -> None:
        for start in range(0, len(due), CLAIM_BATCH):
            self._claim_together(alias, due[start : start + CLAIM_BATCH])

    def _unclaimed(self, alias: str, due: Due) -> Due:
        """Those of ``due`` whose tick no run has taken yet, read in one statement that tries
        no lock (``unclaimed_ticks``); the others are skipped here, counted and said like a
        claim's skips. With ``RECORD_SKIPS`` every replica's attempt is recorded, so all of
        ``due`` are claimed; so they are when the look fails (the claim decides, and says why
        it could not)."""
        if app_settings.RECORD_SKIPS:
            return due
        try:
            rows = self.dispatcher.claims_on(alias).read(
                sql.unclaimed_ticks([(job.name, tick) for job, tick in due])
            )
        except (DatabaseError, DatabaseUnavailable):
            return due
        positions = {int(n) - 1 for (n,) in rows}
        taken = [entry for index, entry in enumerate(due) if index not in positions]
        with self.dispatcher.lock:
            self.dispatcher.stats.skipped += len(taken)
            self.dispatcher.stats.seen_claimed += len(taken)
        for job, tick in taken:
            told(job, RunStatus.SKIPPED_TICK, tick=tick, using=alias)
            self.dispatcher.narrator.say(
                DETAILS, f"cronworker: {job.name}, tick {tick}: already claimed by another worker"
            )
        return [entry for index, entry in enumerate(due) if index in positions]

    def _claim_together(self, alias: str, batch: Due) -> None:
        if len(batch) == 1:
            job, tick = batch[0]
            self.dispatcher.dispatch(job, [tick])
            return
        claims = self.dispatcher.claims_on(alias)
        try:
            runs, skipped = claim_together(batch, claims)
        except (DatabaseError, DatabaseUnavailable) as error:
            logger.error(
                "cronworker: could not claim %d jobs together (%s); claiming each alone",
                len(batch),
                first_line(error),
            )
            for job, tick in batch:
                self.dispatcher.dispatch(job, [tick])
            return
        with self.dispatcher.lock:
            self.dispatcher.stats.batches += 1
            for result in skipped:
                self.dispatcher.stats.count(result.status)
        for result in skipped:
            self.dispatcher.narrator.say(
                DETAILS,
                f"cronworker: {result.job}, tick {result.tick}: {RunStatus(result.status).label}",
            )
        for claimed in runs:
            self.dispatcher.start_claimed(claimed)
