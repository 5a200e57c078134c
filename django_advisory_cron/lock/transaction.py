"""The transaction holder: a lock that lives in the job's ``atomic()`` on Django's connection.

Its first statement is ``pg_try_advisory_xact_lock``: commit or rollback releases it, which is
the only form that is safe behind PgBouncer's transaction pooling. With ``savepoint`` the body
runs in a savepoint of that transaction, so a failing body rolls back its own work while the
release statement still commits. With psycopg 3 the transaction's start, the acquiring
statement and the savepoint share one round trip, and so do the savepoint's end and the
release statement ([pipelined][django_advisory_cron.db.connections.pipelined]). Its
statements, and the commit, run with SIGINT/SIGTERM held and with a client-side deadline.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from ..conf import app_settings
from ..db.connections import answer_within, ensure_connected, require_postgresql
from ..db.execute import Row, rows_within, send_between
from ..db.interrupts import deferred_signals
from ..db.sql import Statement
from ..exceptions import LockScopeError
from .heartbeat import Heartbeat
from .loss import Loss


class TransactionHolder:
    """Holds a transaction-scoped lock: the lock's ``atomic()``, the body's savepoint, the
    signals held while the transaction ends, and the commit's deadline."""

    #: The lock lives in the job's transaction: it ends with it, and what is written under it
    #: (the run's row, the job's work) commits or rolls back with it.
    in_transaction = True
    #: No heartbeat: the lock lives as long as the transaction.
    heartbeat: Heartbeat | None = None

    def __init__(
        self,
        using: str,
        loss: Loss,
        *,
        savepoint: bool,
    ) -> None:
        self.using = using
        self.loss = loss
        #: Run the body in a savepoint (see the module docstring).
        self.savepoint = savepoint
        self.connection: BaseDatabaseWrapper | None = None
        #: The lock's transaction committed (set before on_commit callbacks that the body
        #: registered run, so a failing callback is told apart from a failed commit).
        self.committed = False
        self._atomic: Any = None
        self._savepoint: Any = None
        #: While the lock's transaction commits: what follows the commit.
        self._on_commit: Callable[[], None] | None = None

    # -- acquiring -----------------------------------------------------------------------

    def begin(self) -> None:
        connection = require_postgresql(self.using)
        if connection.in_atomic_block:
            raise LockScopeError(
                "transaction-scoped advisory locks cannot be taken inside an outer atomic() "
                "block: the lock would outlive the job until the outer transaction ends"
            )
        ensure_connected(connection)
        self.connection = connection

    @contextmanager
    def attempt(self) -> Iterator[None]:
        """Open the transaction of one attempt; its statements write what must not be cut in
        half, so signals are held while they run."""
        self._atomic = transaction.atomic(using=self.using)
        self._atomic.__enter__()
        # Registered first, so it runs before any callback the body registers, and outside
        # the body's savepoint, whose rollback would discard it.
        self.committed = False
        transaction.on_commit(self._mark_committed, using=self.using)
        with deferred_signals():
            yield

    def try_first(self, statement: Statement) -> Row | None:
        """The acquiring statement of transaction scope, in the round trip that begins the
        transaction (and opens the body's savepoint)."""
        assert self.connection is not None
        # On failure the savepoint was never made: Django's rollback to it fails quietly (and
        # marks the transaction for rollback), so the acquiring error is the one raised.
        return send_between(
            self.connection,
            statement,
            after=self._open_savepoint,
            failed=self._close_savepoint,
        )

    def _open_savepoint(self) -> None:
        """The body's savepoint, when it runs in one."""
        if self.savepoint:
            self._savepoint = transaction.atomic(using=self.using)
            self._savepoint.__enter__()

    def follow_up(self, statement: Statement) -> Row | None:
        """A follow-up of the acquiring statement: it belongs to the lock's transaction, not to
        the body's savepoint (whose rollback must not take it along)."""
        if self._savepoint is None:
            return self.send(statement)
        self._close_savepoint(None)
        row = self.send(statement)
        self._open_savepoint()
        return row

    def send(self, statement: Statement) -> Row | None:
        """Run one of our statements in the lock's transaction, with a deadline; its row."""
        assert self.connection is not None
        rows = rows_within(self.connection, statement, app_settings.STATEMENT_TIMEOUT)
        return rows[0] if rows else None

    def retreat(self) -> None:
        """End the transaction of an attempt that did not take the lock."""
        self._close_savepoint(None)
        atomic, self._atomic = self._atomic, None
        atomic.__exit__(None, None, None)

    def watch(self, name: str) -> bool:
        """Nothing to watch: the lock lives as long as the transaction."""
        return False

    def _close_savepoint(self, error: BaseException | None) -> None:
        savepoint, self._savepoint = self._savepoint, None
        if savepoint is not None:
            if error is None:
                savepoint.__exit__(None, None, None)
            else:
                savepoint.__exit__(type(error), error, error.__traceback__)

    def _mark_committed(self) -> None:
        self.committed = True
        if self._on_commit is not None:
            self._on_commit()  # releasing: the commit's deadline ends, held signals go now

    # -- releasing -----------------------------------------------------------------------

    def release(
        self, statement: Statement | None, error: BaseException | None, *, taken: bool
    ) -> None:
        """End the lock's transaction: the body's savepoint (rolled back to if ``error``), the
        release ``statement`` of a ``taken`` lock (None: nothing to send), the commit (or the
        rollback). Django's atomic stack is always unwound, in order, whatever fails.

        Two interleavings used to leave the thread inside the lock's ``atomic()`` for good
        (every later ``atomic()`` a savepoint of a dead transaction, every later query "the
        connection is closed"):

        - The connection died before the job's next query (a ``pg_terminate_backend`` landing
          between the lock appearing in ``pg_locks`` and that query: a window of
          milliseconds, which load widens). That query failed, so the driver knew the
          connection was closed, and entering the release's pipeline failed before the
          savepoint was ended; the lock's block then exited with the savepoint still on
          Django's stack, took its id for its own, and stayed "in atomic". The failure path
          therefore ends the savepoint first.
        - A signal held back during the release statement was delivered between that
          statement and the commit, and escaped before the commit ran (the finished row the
          exit message reported was rolled back). Signals are therefore held until the
          transaction has ended: delivered as soon as it has committed (from the first
          ``on_commit`` callback, before the body's own), else once it has rolled back. The
          commit gets a deadline like every statement of ours, so it cannot hang unbounded
          while signals are held.
        """
        atomic, self._atomic = self._atomic, None
        if atomic is None:
            return
        connection = self.connection
        assert connection is not None
        with deferred_signals() as deliver:
            try:
                self._end_transaction(atomic, connection, statement, error, deliver, taken)
            finally:
                self._on_commit = None

    def _end_transaction(
        self,
        atomic: Any,
        connection: BaseDatabaseWrapper,
        statement: Statement | None,
        error: BaseException | None,
        deliver: Callable[[], None],
        taken: bool,
    ) -> None:
        try:
            # One round trip: the savepoint's end (a rollback to it if the body failed) and the
            # release statement; the commit follows, so on_commit callbacks run outside it. An
            # empty pipeline would still cost its sync: none when there is nothing to send.
            if self._savepoint is not None or statement is not None:
                send_between(connection, statement, before=lambda: self._close_savepoint(error))
        except BaseException as failure:
            # Entering the pipeline may fail before the savepoint was ended: end it now.
            try:
                self._close_savepoint(failure)
            finally:
                atomic.__exit__(type(failure), failure, failure.__traceback__)
            if isinstance(failure, Exception):
                self._after_failed_transaction(failure)
            raise
        # A taken lock commits (its run is recorded); an untaken one commits too (its skip
        # row, with RECORD_SKIPS), unless acquiring itself failed.
        committing = taken or error is None
        cut = False
        try:
            with answer_within(connection, app_settings.STATEMENT_TIMEOUT) as done:

                def committed() -> None:
                    nonlocal cut
                    cut = done()
                    deliver()

                self._on_commit = committed
                try:
                    if committing:
                        atomic.__exit__(None, None, None)
                    else:
                        assert error is not None
                        atomic.__exit__(type(error), error, error.__traceback__)
                finally:
                    cut = done() or cut
        except Exception as failure:
            if committing and not self.committed:
                self._after_failed_transaction(failure)
            raise
        finally:
            if cut and not connection.in_atomic_block:
                # The deadline cut the connection as the transaction ended (perhaps the one
                # Django had just reopened): its next use opens a new one instead.
                connection.close()

    def _after_failed_transaction(self, failure: BaseException) -> None:
        """A transaction-scoped lock whose transaction could not finish: if the connection is
        gone, so is the lock (the transaction rolled back on the server)."""
        connection = self.connection
        if connection is None or connection.connection is None or not connection.is_usable():
            self.loss.mark(failure)
