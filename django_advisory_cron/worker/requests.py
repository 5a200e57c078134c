""" "Run now" requests (``manage.py cronjob trigger JOB``, the admin): one worker takes each.

A worker hears of them through ``LISTEN`` on its presence connection where it can (a direct
connection). In case a notification was missed (an older driver drops those that arrive
during another statement), each of its claims also says whether a request is pending (its
[Sighting][django_advisory_cron.lock.shared.Sighting]): it looks when one is (at most every
``CLOCK_REFRESH`` seconds: a request for a job no worker runs stays pending), and every
``REQUEST_RECHECK`` seconds without a claim. Behind a transaction pooler it looks every
``REQUEST_POLL`` seconds instead.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from django.db import DatabaseError, ProgrammingError

from ..db import sql
from ..db.execute import fetch_all
from ..lock.shared import ClaimConnection
from .clock import CLOCK_REFRESH, CLOCK_TRUST, Wakeup

logger = logging.getLogger("django_advisory_cron")

#: Seconds between looks for "run now" requests when the worker cannot LISTEN for them.
REQUEST_POLL = 1.0

#: Seconds between looks for "run now" requests, listening, while no claim says whether one
#: is pending.
REQUEST_RECHECK = CLOCK_TRUST


class RunRequests:
    """One worker's "run now" requests: it takes those of ``jobs`` and calls ``start`` with
    each job's name."""

    def __init__(
        self,
        jobs: Iterable[str],
        *,
        identity: str,
        wakeup: Wakeup,
        stop: threading.Event,
        start: Callable[[str], None],
        per_tenant: Callable[[], list[str]] = list,
    ) -> None:
        self.jobs = sorted(jobs)
        #: The per-tenant jobs among them, whose tenants' requests (``name@schema``) it takes.
        self._per_tenant = per_tenant
        self.identity = identity
        self._wakeup = wakeup
        self._stop = stop
        self._start = start
        #: Whether this worker is woken by NOTIFY for "run now" requests (else it polls).
        self.listening = False
        self._notified = True  # look for requests made while no worker ran
        self._seen = 0.0

    def listen(self, presence: ClaimConnection) -> None:
        """LISTEN for "run now" requests on the presence connection, where it can."""
        self.listening = self._wakeup.listen(presence)
        self._notified = True  # requests made while this worker was not listening
        logger.info(
            "cronworker %s: %s",
            self.identity,
            "listening for run-now requests (LISTEN/NOTIFY)"
            if self.listening
            else f"looks for run-now requests every {REQUEST_POLL:g} s (cannot LISTEN here)",
        )

    def sleep(self, seconds: float) -> None:
        """Wait until the next tick is due, until stopped, or until a "run now" request is
        announced (or, without LISTEN, until it is time to look for requests)."""
        seconds = min(seconds, self._seen + self._interval - time.monotonic())
        if self.listening:
            self._wakeup.sleep(max(0.0, seconds))
            if self._wakeup.heard(sql.RUN_CHANNEL):
                self._notified = True
            self.listening = self._wakeup.raw is not None
        else:
            self._stop.wait(max(0.0, seconds))

    @property
    def _interval(self) -> float:
        return REQUEST_RECHECK if self.listening else REQUEST_POLL

    def take(self, presence: ClaimConnection) -> None:
        """Claim and start the pending "run now" requests of this worker's jobs. Only one
        worker gets each request. Listening, it looks when notified, and in case a
        notification was missed (see the module docstring); else every ``REQUEST_POLL``
        seconds."""
        if not self._notified:
            waited = time.monotonic() - self._seen
            seen = presence.sighting
            if self.listening and seen is not None and seen.at > self._seen:
                if not seen.requests:
                    self._seen = seen.at  # none pending then: none was missed before
                    return
                if waited < CLOCK_REFRESH:
                    return
            elif waited < self._interval - 0.01:
                return
        self._notified, self._seen = False, time.monotonic()
        try:
            with presence.turn() as connection:
                claimed = fetch_all(connection, sql.claim_run_requests(self.jobs))
                per_tenant = self._per_tenant()
                if per_tenant:  # a request for one tenant: cronjob trigger NAME --tenant S
                    claimed += fetch_all(connection, sql.claim_tenant_run_requests(per_tenant))
        except DatabaseError as error:
            if not presence.connected:
                raise  # the connection is gone: the loop reconnects
            if isinstance(error, ProgrammingError):
                raise  # a missing table: the worker cannot work here (see the loop)
            logger.error("cronworker: could not look for run-now requests: %s", error)
            return
        for name, requested, by in claimed:
            logger.info(
                "cronworker %s: running %s now, as requested by %s at %s",
                self.identity,
                name,
                by or "someone",
                requested,
            )
            self._start(name)
