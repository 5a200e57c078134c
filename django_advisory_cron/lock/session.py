"""The session holder: a lock held on a dedicated connection, checked out of the process's warm
set (see [lockconn][django_advisory_cron.db.connections]) for this one lock and given back once
it provably holds nothing (the releasing statement also runs ``pg_advisory_unlock_all()``).

A [Heartbeat][django_advisory_cron.lock.heartbeat.Heartbeat] watches the connection while the
lock is held, sending what its owner gives it for a beat (so the lock check and a run's lease
renewal share one round trip), and tells the owner once the lock is lost.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Protocol

from django.db.backends.base.base import BaseDatabaseWrapper

from ..conf import app_settings
from ..core.keys import LockKey
from ..db import sql
from ..db.connections import LockConnection, checkin, checkout, refused_value
from ..db.execute import Row, rows_within
from ..db.interrupts import deferred_signals
from ..db.sql import Statement
from ..exceptions import DatabaseReadOnly, LockLost
from .heartbeat import Heartbeat, beat_deadline
from .loss import Loss

logger = logging.getLogger("django_advisory_cron")


class Owner(Protocol):
    """What a session holder reads of the lock it holds."""

    using: str
    key: LockKey
    loss: Loss
    #: What a beat sends: one boolean column, true while the lock is held.
    beat: Callable[[], Statement]
    #: Its statements write what must not be cut in half (a run's): signals are held while
    #: they run. A bare lock's statement may be cut: its connection is then closed, which
    #: releases whatever it held.
    whole_statements: bool


class SessionHolder:
    """Holds a session-scoped lock on a connection of its own."""

    #: The lock outlives transactions: what is written under it commits on its own.
    in_transaction = False
    #: Only a transaction commits.
    committed = False

    def __init__(self, lock: Owner) -> None:
        #: Read when needed, not copied: a run's claim may rekey the lock once it is made.
        self.lock = lock
        self.connection: BaseDatabaseWrapper | None = None
        self.heartbeat: Heartbeat | None = None
        self._checked_out: LockConnection | None = None
        #: The last statement on the lock connection completed (a connection left
        #: mid-statement, or after an error, may hold anything and is never reused).
        self._settled = True
        #: An attempt is between its statement and its reading: whether it took the lock is
        #: unknown, so the connection is not reused.
        self._trying = False

    # -- acquiring -----------------------------------------------------------------------

    def begin(self) -> None:
        self._checked_out = checkout(self.lock.using)
        self.connection = self._checked_out.wrapper

    @contextmanager
    def attempt(self) -> Iterator[None]:
        """One attempt on the holder's connection (nothing to open first)."""
        with self._held_signals():
            self._trying = True
            yield
            self._trying = False

    def _held_signals(self) -> AbstractContextManager[object]:
        """Signals held while one of the lock's statements runs (see ``Owner.whole_statements``)."""
        return deferred_signals() if self.lock.whole_statements else nullcontext()

    def send(self, statement: Statement) -> Row | None:
        """Run one of our statements on the lock's connection, with a deadline; its row."""
        assert self.connection is not None
        self._settled = False
        rows = rows_within(self.connection, statement, app_settings.STATEMENT_TIMEOUT)
        self._settled = True
        return rows[0] if rows else None

    def try_first(self, statement: Statement) -> Row | None:
        """An attempt's acquiring statement."""
        return self.send(statement)

    def follow_up(self, statement: Statement) -> Row | None:
        """A follow-up of the acquiring statement."""
        return self.send(statement)

    def retreat(self) -> None:
        """Nothing to end after an attempt that did not take the lock."""

    # -- while held ----------------------------------------------------------------------

    def watch(self, name: str) -> bool:
        """Start the heartbeat (the thread called ``name``); True: there is one."""
        assert self.connection is not None
        self.heartbeat = Heartbeat(
            functools.partial(self._beat, self.connection), on_lost=self.lock.loss.mark, name=name
        ).start()
        return True

    def _beat(self, connection: BaseDatabaseWrapper) -> bool:
        """One beat, on the lock connection: raise if it died, is silent, or no longer holds
        the lock."""
        rows = rows_within(connection, self.lock.beat(), beat_deadline())
        if not rows or not rows[0][0]:
            raise LockLost("the lock is no longer held by its connection")
        if len(rows[0]) > 1 and rows[0][1]:  # a stop request (NULL unless the beat watches)
            self.lock.loss.ask_stop(str(rows[0][1]))
        return True

    # -- releasing -----------------------------------------------------------------------

    def release(
        self, statement: Statement | None, error: BaseException | None, *, taken: bool
    ) -> None:
        """Release the lock (``statement``, sent for a lock ``taken`` and not lost, with
        signals held as for every statement of the lock; ``None``: nothing to send), then give
        the connection back.

        The connection is reused only when it provably holds nothing: an untaken lock whose
        every statement completed (no attempt is ``trying``), or a release whose unlock-all
        ran and whose unlock found the lock. A releasing statement refused for a value it
        carries (a text a database whose encoding is not UTF-8 cannot hold), or refused as a
        write (the server was switched read-only), is raised once the lock is unlocked; it is
        no loss of the lock. ``error`` changes nothing here: the connection outlives what the
        owner did."""
        lost = self.lock.loss.lost  # as it was when the owner released (a beat may end meanwhile)
        if self.heartbeat is not None:
            self.heartbeat.stop()
        reusable = False
        refused: Exception | None = None
        try:
            if taken and not lost and statement is not None:
                with self._held_signals():
                    row, refused = self._release_or_unlock(statement)
                reusable = self._check_unlocked(row)
            else:
                reusable = not taken and not lost and not self._trying
        except Exception as failure:
            # The connection died after the last heartbeat, or gave no answer in time and was
            # cut: either way the lock died with it.
            self.lock.loss.mark(failure)
        finally:
            self.give_back(reusable, taken=taken, lost=lost)
        if refused is not None:
            raise refused  # the lock is released; its owner records its end otherwise

    def _release_or_unlock(self, statement: Statement) -> tuple[Row | None, Exception | None]:
        """Send the releasing statement; if it is refused for a value it carries, or as a write
        (the server was switched read-only), nothing of it ran and the lock is still held:
        unlock it alone (where anything outlives the claim to unlock), and return the refusal
        too."""
        try:
            return self.send_release(statement), None
        except Exception as failure:
            if not (refused_value(failure) or isinstance(failure, DatabaseReadOnly)):
                raise
            unlock = self.unlock()
            return (None if unlock is None else self.send_release(unlock)), failure

    def send_release(self, statement: Statement) -> Row | None:
        """Send the releasing statement of a held session lock."""
        return self.send(statement)

    def unlock(self) -> Statement | None:
        """The statement releasing the session lock with nothing else (``None``: no lock
        outlives its claim; see the shared holder's)."""
        return sql.release_lock(self.lock.key, "session")

    def give_back(self, reusable: bool, *, taken: bool, lost: bool) -> None:
        """Return the lock connection to the process's warm set, for reuse if ``reusable``
        (and no statement or beat may still be under way on it), else to be closed."""
        checked_out, self._checked_out = self._checked_out, None
        self.connection = None
        if checked_out is not None:
            heartbeat_done = self.heartbeat is None or not self.heartbeat.running
            checkin(checked_out, reusable=reusable and self._settled and heartbeat_done)

    def _check_unlocked(self, row: Row | None) -> bool:
        """Log an error when ``pg_advisory_unlock`` (the row's first column) did nothing;
        return whether it released the lock.

        That means the statement ran on a backend that does not hold the lock: a
        transaction-pooling PgBouncer in the path. The lock stays held by another server
        connection until that connection closes.
        """
        if row and row[0] is False:
            logger.error(
                "%s: the unlock did nothing, because this statement ran on a server connection "
                "that does not hold the lock; a transaction-pooling PgBouncer is in the path "
                "and the lock stays held until that server connection closes. Use "
                "scope='transaction' or a direct LOCK_DATABASE (see the PgBouncer docs).",
                self.lock.loss.name,
            )
        return row is not None and row[0] is True
