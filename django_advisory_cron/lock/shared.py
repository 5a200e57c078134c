"""The shared holder: one worker connection that holds the session locks of many runs, claimed
together by one statement (the locks and the ticks of several jobs a worker has due at one
moment), while the runs go on in their own threads.

Claimed one by one, R replicas with J jobs due at once send R x J acquiring statements, nearly
all of them losers' skips; claimed together they send R (2R with the worker's spread: the
jobs dealt to it first, a moment later those of the rest still unclaimed). The guarantee is
the one of a single run: the batch's statement is the one claim of every run
([claim_runs][django_advisory_cron.db.sql.claim_runs]: pauses, live leases, dead runs, skip
rows), each lock is a session lock released by its own run's finishing statement (which
unlocks that key only: the other runs still hold theirs), and one heartbeat renews every
run's lease in one round trip. When the connection dies, every run it held learns it lost
its lock, as a run holding its own connection would.

Behind a transaction pooler a session lock cannot be held on a connection whose statements
each may reach another server connection: there the claim connection is *leased*
([leased][django_advisory_cron.lock.shared.ClaimConnection.leased]). Its claims take each
lock in the claim's own transaction (given back when it commits), the run's row carries a
lease that the heartbeat renews while it has not run out, and another replica's claim refuses
the job while a row's lease is live, so the row, not a lock, keeps a second run out: the
worker still claims together, on one client connection.

A ``cronworker``'s claim connection is also its presence: named after the worker, it reads
the clock, the live workers and "run now" requests, and LISTENs for them, so an idle worker
holds one server connection and a busy one no more, whatever ``--max-concurrency`` is. Its
claims bring the server's clock and the live workers with them
([Sighting][django_advisory_cron.lock.shared.Sighting]), so a worker that claims at every tick
sends no statement of its own to learn either.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime

from django.db import DatabaseError, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from ..conf import app_settings
from ..core.keys import LockKey
from ..db import finishes, pooler, sql
from ..db.connections import (
    LockConnection,
    checkout,
    close_connection,
    open_lock_connection,
    refused_value,
    still_open,
)
from ..db.execute import Row, rows_within
from ..db.interrupts import deferred_signals
from ..db.sql import Statement
from ..exceptions import DatabaseReadOnly, DatabaseUnavailable, LockLost
from .advisory import AdvisoryLock
from .heartbeat import Heartbeat, beat_deadline, report_lost
from .session import SessionHolder

logger = logging.getLogger("django_advisory_cron")

#: Thread name of a claim connection's heartbeat.
HEARTBEAT_THREAD = "advisory-cron-claims-heartbeat"
#: Why a run in lease scope lost its lock: its renewal found its row's lease gone.
LEASE_LOST = (
    "its run's lease could not be renewed: it ran out (this worker stalled for longer than "
    "LEASE) and another worker may have ended the run"
)


class SharedLock(AdvisoryLock):
    """A run's session lock, taken by a batch on a
    [ClaimConnection][django_advisory_cron.lock.shared.ClaimConnection] and released by the run."""

    def __init__(
        self,
        key: LockKey,
        claims: ClaimConnection,
        on_lost: Callable[[AdvisoryLock, BaseException], None],
    ) -> None:
        super().__init__(
            key, scope="session", using=claims.alias, on_lost=on_lost, whole_statements=True
        )
        self.scope = "lease" if claims.leased else "session"
        self.holder = SharedHolder(self, claims)
        #: The connection its claim was sent on: its release goes on no other one.
        self.claimed_on: LockConnection | None = None
        #: The run whose lease the heartbeat renews while the lock is held here.
        self.run_id: int | None = None


class SharedHolder(SessionHolder):
    """Holds one run's lock on the worker's claim connection: its statements take turns there,
    and its release unlocks that one key only. In lease scope (a leased claim connection) no
    lock outlives the claim: there is nothing to unlock, and the run's row lease, renewed by
    the connection's heartbeat, keeps other replicas out."""

    def __init__(self, lock: SharedLock, claims: ClaimConnection) -> None:
        super().__init__(lock)
        self.lock: SharedLock = lock
        self.claims = claims

    def send(self, statement: Statement) -> Row | None:
        return self.claims.send(statement)

    def send_release(self, statement: Statement) -> Row | None:
        return self.claims.release(self.lock, statement)

    def unlock(self) -> Statement | None:
        assert self.lock.scope is not None
        return sql.release_lock(self.lock.key, self.lock.scope, shared=True)

    def give_back(self, reusable: bool, *, taken: bool, lost: bool) -> None:
        if taken and lost and (unlock := self.unlock()) is not None:
            # Its row was closed under it (or its connection died): if the connection lives,
            # the lock may still be held on it, and is given back now the run has ended.
            with suppress(DatabaseError, DatabaseUnavailable), deferred_signals():
                self.claims.release(self.lock, unlock)
        self.claims.forget(self.lock)


@dataclass(frozen=True)
class Sighting:
    """What a worker's claim saw besides its runs: the server's clock and the live workers."""

    #: ``time.monotonic()`` when the answer came: the server's clock, read before, is never
    #: taken for later than it was (a loaded server that started the claim late must not make
    #: the worker's clock run ahead, and its runs start before their ticks).
    at: float
    #: The server's clock, read near the end of the claim's statement.
    now: datetime
    #: The ``application_name`` of each live worker, sorted.
    workers: tuple[str, ...]
    #: Whether a "run now" request (of any job) was pending.
    requests: bool
    #: The version of the schedules kept in the database: it changes with any of them.
    schedules: str


@dataclass(eq=False)
class _Finish:
    """A run's finish waiting for the claim connection, and what came of it."""

    lock: SharedLock
    statement: Statement
    done: bool = False
    row: Row | None = None
    error: BaseException | None = None


class ClaimConnection:
    """One worker's connection for claiming runs, and the locks it holds.

    Statements from the worker's thread (claims, and a presence's own statements through
    [turn][django_advisory_cron.lock.shared.ClaimConnection.turn]), the run threads (claims of
    one run, finishes) and the heartbeat take turns on it, one short statement at a time; no
    job body runs on it. It is opened at the first claim and replaced, between claims, when it
    closed or aged. A worker's presence (``presence``: its ``application_name``) is opened by
    [open][django_advisory_cron.lock.shared.ClaimConnection.open] instead, and once lost only
    by ``open()`` again, so that the worker learns of the loss and listens again. ``close()``
    ends it (and any lock still on it). With ``census`` (the ``application_name`` prefix of
    the workers), each claim also reports a
    [Sighting][django_advisory_cron.lock.shared.Sighting] in ``sighting``.
    """

    def __init__(
        self, alias: str, *, presence: str | None = None, census: str | None = None
    ) -> None:
        self.alias = alias
        self.presence = presence
        self.census = census
        #: The server's clock and the live workers as the latest claim saw them.
        self.sighting: Sighting | None = None
        #: Called after a statement sent from a run or heartbeat thread: notifications that
        #: arrived meanwhile wait in the driver, and the worker's sleep must look at them.
        self.nudge: Callable[[], None] | None = None
        self._connection: LockConnection | None = None
        self._turn = threading.RLock()
        #: Runs' finishes waiting for the turn (see ``release``), and what guards the list.
        self._finishing: list[_Finish] = []
        self._queue_lock = threading.Lock()
        self._held: dict[int, SharedLock] = {}
        #: Per run held: ``time.monotonic()`` when its lease was last set (claimed, renewed).
        self._leased: dict[int, float] = {}
        self._closed = threading.Event()
        self._heartbeat: Heartbeat | None = None
        self._pooled: bool | None = None

    @property
    def leased(self) -> bool:
        """Whether its runs are protected by their rows' leases, not by session locks: the
        connection was found transaction pooled (see ``find_pooled``; a worker asks before it
        claims a job of scope ``auto``)."""
        return bool(self._pooled)

    def find_pooled(self) -> bool:
        """Whether the connection is transaction pooled, as ``scope="auto"`` reads it (the
        settings say so, or a pooler is in the path: one round trip, once per process).
        Raises ``DatabaseUnavailable`` when the server cannot be reached."""
        if self._pooled is None:
            self._pooled = pooler.transaction_pooled(self.alias)
        return self._pooled

    def __repr__(self) -> str:
        return f"<ClaimConnection {self.alias} holding {len(self._held)}>"

    # -- a worker's presence --------------------------------------------------------------

    def open(self) -> BaseDatabaseWrapper:
        """Connect a presence, unless connected; raises ``DatabaseUnavailable``. Its
        parameters are bound on the client, as on Django's connections: the worker's own
        statements are written for that (a parameter used twice may be typed twice)."""
        assert self.presence is not None
        with self._turn:
            if self._connection is None:
                wrapper = open_lock_connection(
                    self.alias, binding="client", application_name=self.presence
                )
                self._connection = LockConnection(wrapper, self.alias)
            return self._connection.wrapper

    def retire(self) -> None:
        """Close the connection unless a run's lock is on it (after a statement failed on it
        and it still answers: reopened, it may reach another server, a failover's new
        primary; the runs it holds would lose their locks)."""
        with self._turn:
            if not self._held:
                self._end()

    @property
    def connected(self) -> bool:
        """Whether it has a connection (a failure that left it unusable ended it)."""
        return self._connection is not None

    @contextmanager
    def turn(self) -> Iterator[BaseDatabaseWrapper]:
        """The connection for the block's statements alone (keep them short: runs' finishes
        and the heartbeat wait meanwhile). Raises ``DatabaseUnavailable`` when it is closed;
        a failure that leaves it unusable ends every lock it held."""
        with self._turn:
            if self._connection is None:
                raise DatabaseUnavailable(f"the connection to {self.alias!r} was lost")
            wrapper = self._connection.wrapper
            try:
                yield wrapper
            except (DatabaseError, DatabaseUnavailable) as error:
                if self._connection is not None and not _answers(wrapper):
                    self._lose_all(error)
                raise

    # -- claiming ------------------------------------------------------------------------

    def claim(self, locks: Sequence[SharedLock], statement: Statement) -> tuple[list[Row], float]:
        """Send ``statement``, which tries every lock and claims every run's tick (one row
        per lock, in order; with ``census``, the columns from the tenth on are a
        [Sighting][django_advisory_cron.lock.shared.Sighting]); its rows, for the owner to
        read and to [hold][django_advisory_cron.lock.shared.ClaimConnection.hold] the runs it
        took, and the ``time.monotonic()`` it was sent. Raises ``DatabaseError`` or
        ``DatabaseUnavailable`` when the statement failed; locks it may have taken died with
        the connection."""
        with self._turn:
            self._ready()
            sent = time.monotonic()
            rows = self._fetch_all(statement)
            answered = time.monotonic()
            for lock in locks:
                lock.claimed_on = self._connection
        if self.census is not None and rows:
            self._saw(answered, rows[0][9:13])
        self._nudge()
        self._start_heartbeat()
        return rows, sent

    def read(self, statement: Statement) -> list[Row]:
        """Send ``statement``, which takes no lock (a look before a claim), where a claim
        would go; its rows. Raises ``DatabaseError`` or ``DatabaseUnavailable``."""
        with self._turn:
            self._ready()
            rows = self._fetch_all(statement)
        self._nudge()
        return rows

    def hold(self, lock: SharedLock, run_id: int, claimed_at: float) -> None:
        """Renew the lease of ``run_id`` (whose lock ``lock`` took at ``claimed_at``, the
        ``time.monotonic()`` its claim was sent) while the lock is held here."""
        lock.run_id = run_id
        with self._turn:
            self._held[run_id] = lock
            self._leased[run_id] = claimed_at

    def look(self) -> Sighting:
        """Read what a claim would see besides its runs (needs ``census``): for a worker that
        has not claimed for a while."""
        assert self.census is not None
        with self._turn:
            rows = self._fetch_all(sql.sighting(self.census))
            return self._saw(time.monotonic(), rows[0])

    def _saw(self, answered: float, row: Row) -> Sighting:
        now, workers, requests, schedules = row
        self.sighting = Sighting(
            answered, now, tuple(sorted(workers or ())), bool(requests), schedules
        )
        return self.sighting

    def _ready(self) -> None:
        """(With the turn.) A connection to claim on, unless closed for good."""
        if self._closed.is_set():
            raise DatabaseUnavailable(f"the claim connection to {self.alias!r} is closed")
        self._fresh_connection()

    def _fresh_connection(self) -> None:
        """With nothing held, give up a connection that closed or aged (no round trip). A
        presence is reopened by the worker only."""
        if self.presence is not None:
            if self._connection is None:
                raise DatabaseUnavailable(f"the connection to {self.alias!r} was lost")
            return
        current = self._connection
        stale = current is not None and (
            current.age >= app_settings.LOCK_CONNECTION_MAX_AGE or not still_open(current)
        )
        if stale and not self._held:
            self._end()
        if self._connection is None:
            self._connection = checkout(self.alias)

    # -- statements, one at a time -------------------------------------------------------

    def send(self, statement: Statement) -> Row | None:
        """Run one statement on the claim connection, in turn; its first row."""
        with self._turn:
            rows = self._fetch_all(statement)
        self._nudge()
        return rows[0] if rows else None

    def release(self, lock: SharedLock, statement: Statement) -> Row | None:
        """Send ``lock``'s releasing statement and stop renewing its lease, in one turn (a
        beat between the two would find the lock gone and report it lost).

        A run's finish waits in a queue for the turn: whichever finish gets it first sends
        every finish queued by then as one statement, one commit
        ([finishes][django_advisory_cron.db.finishes]); the others find theirs sent."""
        if not finishes.joins(statement):
            with self._turn:
                row = self._send_release(lock, statement)
            self._nudge()
            return row
        mine = _Finish(lock, statement)
        with self._queue_lock:
            self._finishing.append(mine)
        with self._turn:
            if not mine.done:
                with self._queue_lock:
                    batch, self._finishing = self._finishing, []
                # Not done: no finish holding the turn before this one took it from the queue.
                self._finish(batch)
        self._nudge()
        if mine.error is not None:
            raise mine.error
        return mine.row

    def _send_release(self, lock: SharedLock, statement: Statement) -> Row | None:
        """(With the turn.) One run's releasing statement, on the connection its claim used."""
        try:
            if not self._holds(lock):
                raise DatabaseUnavailable(f"the connection that held {lock} was lost")
            rows = self._fetch_all(statement)
        finally:
            self._drop(lock)
        return rows[0] if rows else None

    def _holds(self, lock: SharedLock) -> bool:
        return lock.claimed_on is not None and lock.claimed_on is self._connection

    def _finish(self, batch: list[_Finish]) -> None:
        """(With the turn.) Send the finishes queued: in one statement when more than one can
        go on this connection, each alone otherwise. A statement refused for a value one of
        them carries, or as a write, ran nothing (no row written, no lock released): each is
        then sent alone, so that only the refused one hears of it."""
        try:
            together = [each for each in batch if self._holds(each.lock)]
            statement = (
                finishes.finish_runs([each.statement for each in together])
                if len(together) > 1
                else None
            )
            if statement is not None:
                try:
                    rows = self._fetch_all(statement)
                except Exception as error:
                    if not (refused_value(error) or isinstance(error, DatabaseReadOnly)):
                        raise
                else:
                    for each, row in zip(together, rows, strict=True):
                        each.row, each.done = row, True
                        self._drop(each.lock)
            for each in batch:
                if not each.done:
                    try:
                        each.row = self._send_release(each.lock, each.statement)
                    except Exception as error:
                        each.error = error
                    each.done = True
        except BaseException as error:
            for each in batch:  # the connection failed, or a signal: none of them was sent
                if not each.done:
                    each.error, each.done = error, True
                    self._drop(each.lock)
            raise

    def forget(self, lock: SharedLock) -> None:
        """Stop renewing the lease of a run whose lock is gone or was never taken."""
        with self._turn:
            self._drop(lock)

    def _drop(self, lock: SharedLock) -> None:
        """(With the turn.) Once closed, the last run to end closes the connection."""
        if lock.run_id is not None:
            self._held.pop(lock.run_id, None)
            self._leased.pop(lock.run_id, None)
        if self._closed.is_set() and not self._held:
            self._end()

    def _fetch_all(self, statement: Statement, deadline: float | None = None) -> list[Row]:
        """Send on the connection (the caller has the turn), within ``deadline`` seconds
        (default ``STATEMENT_TIMEOUT``); a failure that leaves the connection unusable ends
        every lock it held."""
        if self._connection is None:
            raise DatabaseUnavailable(f"the claim connection to {self.alias!r} is closed")
        wrapper = self._connection.wrapper
        try:
            return rows_within(wrapper, statement, deadline or app_settings.STATEMENT_TIMEOUT)
        except (DatabaseError, DatabaseUnavailable) as error:
            if wrapper.connection is None or not wrapper.is_usable():
                self._lose_all(error)
            raise

    # -- while runs go on ----------------------------------------------------------------

    def _start_heartbeat(self) -> None:
        if self._heartbeat is None or not self._heartbeat.running:
            self._heartbeat = Heartbeat(
                self._beat, on_lost=self._lose_everything, name=HEARTBEAT_THREAD
            ).start()

    def _beat(self) -> bool:
        """One beat of the runs held here: renew their leases where their locks are still
        held, in one statement; a run whose lock is gone is told so. A run whose lease was set
        less than half a heartbeat ago waits for the next beat (as a lone run's first beat
        comes one heartbeat after its claim): runs that end within a second, the most common,
        cost no beat. False once the connection is closed and no run is held: the heartbeat
        ends."""
        lost: list[SharedLock] = []
        with self._turn:
            if not self._held:
                if self._closed.is_set():
                    self._end()
                    return False
                return True
            now = time.monotonic()
            young = now - app_settings.HEARTBEAT / 2
            runs = [(run, lock) for run, lock in self._held.items() if self._leased[run] <= young]
            if not runs:
                return True
            statement = (
                sql.renew_row_leases([run_id for run_id, _lock in runs], lease=app_settings.LEASE)
                if self.leased
                else sql.renew_leases(
                    [(run_id, lock.key) for run_id, lock in runs], lease=app_settings.LEASE
                )
            )
            try:
                rows = self._fetch_all(statement, deadline=beat_deadline())
            except DatabaseReadOnly:
                raise  # the server answered: the locks are held (see the heartbeat)
            except (DatabaseError, DatabaseUnavailable) as error:
                self._lose_all(error)
                return True
            for (run_id, lock), row in zip(runs, rows, strict=True):
                if row[0]:  # held (and renewed): the first column of either statement
                    self._leased[run_id] = now
                else:
                    lost.append(lock)
                    del self._held[run_id]
                    del self._leased[run_id]
        self._nudge()
        why = LEASE_LOST if self.leased else "the lock is no longer held by its connection"
        for lock in lost:
            report_lost(lock.loss.mark, LockLost(why))
        return True

    def _lose_everything(self, error: BaseException) -> None:
        with self._turn:
            self._lose_all(error)

    def _lose_all(self, error: BaseException) -> None:
        """The connection died (the caller has the turn): every lock on it is gone. Each run
        is told in a thread of its own, so that no report waits for this turn."""
        held, self._held, self._leased = list(self._held.values()), {}, {}
        self._end()
        if held:
            logger.error(
                "the connection holding the locks of %d run(s) claimed together was lost: %s",
                len(held),
                error,
            )
            threading.Thread(
                target=_report_lost, args=(held, error), name=HEARTBEAT_THREAD, daemon=True
            ).start()

    def close(self) -> None:
        """Claim nothing more; close the connection now if it holds no run's lock, else once
        the last of them ends (its heartbeat goes on until then)."""
        self._closed.set()
        with self._turn:
            idle = not self._held
            if idle:
                self._end()
        if idle and self._heartbeat is not None:
            self._heartbeat.stop()

    def _end(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            close_connection(connection)

    def _nudge(self) -> None:
        if self.nudge is not None:
            self.nudge()


def _answers(wrapper: BaseDatabaseWrapper) -> bool:
    """Whether ``wrapper`` is open and answers a statement."""
    try:
        return wrapper.connection is not None and wrapper.is_usable()
    except Exception:
        return False


def _report_lost(locks: list[SharedLock], error: BaseException) -> None:
    try:
        for lock in locks:
            report_lost(lock.loss.mark, error)
    finally:
        connections.close_all()
