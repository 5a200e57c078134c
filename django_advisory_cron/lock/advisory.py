"""``advisory_lock()``: take a PostgreSQL advisory lock in session or transaction scope.

Session scope holds the lock on a dedicated connection (see
[lockconn][django_advisory_cron.db.connections]), checked out of the process's warm set for this one
lock and given back once it provably holds nothing (the releasing statement also runs
``pg_advisory_unlock_all()``); the body's own queries use Django's normal connections. A
heartbeat watches the lock connection while the lock is held; once the lock is
lost, the next query the holder's thread sends through Django raises
[LockLost][django_advisory_cron.exceptions.LockLost], so a body that can no longer prove it is
alone stops at its next database call.

Transaction scope runs the body inside ``transaction.atomic(using=alias)`` whose first
statement is ``pg_try_advisory_xact_lock``: commit or rollback releases it, which is the only
form that is safe behind PgBouncer's transaction pooling. With ``savepoint=True`` the body runs
in a savepoint of that transaction, so a failing body rolls back its own work while the
release statement still commits. With psycopg 3 the transaction's start, the acquiring
statement and the savepoint share one round trip, and so do the savepoint's end and the
release statement ([pipelined][django_advisory_cron.db.connections.pipelined]).

What is sent is pluggable ([LockStatements][django_advisory_cron.lock.advisory.LockStatements]): the
run history sends its acquiring and finishing statements in the same round trips as the lock.
Acquiring and releasing statements run with SIGINT/SIGTERM deferred, so a signal never cuts
one in half, and with a client-side deadline.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, nullcontext
from types import TracebackType
from typing import Any, Protocol

from django.db import connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from .. import signals
from ..conf import app_settings
from ..core.keys import LockKey, job_key
from ..core.scopes import ResolvedScope, Scope, check_scope
from ..db import pooler, sql
from ..db.aliases import lock_database
from ..db.connections import (
    LockConnection,
    answer_within,
    checkin,
    checkout,
    ensure_connected,
    pipelined,
    refused_value,
    require_postgresql,
)
from ..db.execute import Row, rows_within
from ..db.interrupts import deferred_signals
from ..db.sql import Statement
from ..exceptions import LockLost, LockScopeError
from .heartbeat import Heartbeat, beat_deadline, lost_text

logger = logging.getLogger("django_advisory_cron")

#: Polling for ``wait``: the first pause between attempts, doubled after each, up to
#: ``MAX_POLL_INTERVAL`` seconds.
POLL_START = 0.02
MAX_POLL_INTERVAL = 0.5

Send = Callable[[Statement], "Row | None"]

#: Releases of cancelled ``async with`` waits still going (the event loop keeps only weak
#: references to its tasks).
_GIVING_UP: set[asyncio.Future[None]] = set()


class LockStatements(Protocol):
    """The statements a lock sends; the run history supplies its own."""

    #: Its statements write what must not be cut in half (the run history): signals are held
    #: while a session lock's statement runs. A bare lock's statement may be cut: its
    #: connection is then closed, which releases whatever it held.
    whole_statements: bool

    def acquire(self, key: LockKey, scope: ResolvedScope, final: bool) -> Statement:
        """Try the lock (first column: taken?); ``final`` on the last attempt."""

    def accept(self, row: Row, scope: ResolvedScope, send: Send) -> bool:
        """Read the acquiring row (``send`` runs a follow-up statement); return "taken"."""

    def release(
        self, key: LockKey, scope: ResolvedScope, error: BaseException | None
    ) -> Statement | None:
        """Release a taken lock (session scope: must unlock, then unlock everything else; the
        first column is the unlock's result); in transaction scope, what to send before the
        commit, if anything."""

    def settled(self) -> bool:
        """Whether the last attempt, without the lock, settled the matter: trying again (for
        ``wait``) could change nothing."""

    def beat(self, key: LockKey) -> Statement:
        """The heartbeat: one boolean column, true while the lock is held."""


class PlainStatements:
    """The lock alone: try, unlock, and ask the server's lock table."""

    whole_statements = False

    def acquire(self, key: LockKey, scope: ResolvedScope, final: bool) -> Statement:
        return sql.try_lock(key, scope)

    def accept(self, row: Row, scope: ResolvedScope, send: Send) -> bool:
        return bool(row[0])

    def release(
        self, key: LockKey, scope: ResolvedScope, error: BaseException | None
    ) -> Statement | None:
        return sql.release_lock(key, scope)

    def settled(self) -> bool:
        return False

    def beat(self, key: LockKey) -> Statement:
        return sql.lock_held(key)


def send_lost_signal(lock: AdvisoryLock, error: BaseException) -> None:
    """The default reaction to a lost lock: [lock_lost][django_advisory_cron.signals.lock_lost]."""
    signals.lock_lost.send(sender=None, run=None, lock=lock, error=error)


class AdvisoryLock:
    """A context manager taking one advisory lock; truthy once acquired.

    ``with advisory_lock("name") as lock:`` always enters the body: test ``lock.acquired``.
    ``acquire()`` and ``release()`` do the same without a ``with`` block.
    """

    def __init__(
        self,
        key: str | LockKey,
        *,
        scope: Scope = "auto",
        wait: float = 0,
        using: str | None = None,
        statements: LockStatements | None = None,
        on_lost: Callable[[AdvisoryLock, BaseException], None] = send_lost_signal,
        savepoint: bool = False,
    ) -> None:
        if wait < 0:
            raise ValueError("wait must be >= 0 seconds")
        self.key = key if isinstance(key, LockKey) else job_key(key)
        self.using = lock_database(using)
        self.requested_scope = check_scope(scope)
        #: ``"session"`` or ``"transaction"``; ``"auto"`` is resolved when the lock is taken.
        self.scope: ResolvedScope | None = None
        self.wait = wait
        self.statements: LockStatements = statements or PlainStatements()
        self.on_lost = on_lost
        #: Transaction scope: run the body in a savepoint (see the module docstring).
        self.savepoint = savepoint
        self.acquired = False
        self.lost = False
        self._losing = threading.Lock()
        #: Set once the loss has been told (``on_lost`` has returned): see ``wait_lost``.
        self._lost_told = threading.Event()
        #: Transaction scope: the lock's transaction committed (set before on_commit callbacks
        #: that the body registered run, so a failing callback is told apart from a failed
        #: commit).
        self.committed = False
        self.acquired_at: float | None = None
        #: When taking the lock began (``time.monotonic()``): with ``acquired_at``, the wait.
        self.requested_at: float | None = None
        self.connection: BaseDatabaseWrapper | None = None
        self.heartbeat: Heartbeat | None = None
        self._checked_out: LockConnection | None = None
        #: Session scope: the last statement on the lock connection completed (a connection
        #: left mid-statement, or after an error, may hold anything and is never reused).
        self._settled = True
        #: An attempt is between its statement and its reading: whether it took the lock is
        #: unknown, so the connection is not reused.
        self._trying = False
        self._atomic: Any = None
        self._savepoint: Any = None
        self._guards = ExitStack()
        self._released = False
        #: Transaction scope, while the lock's transaction commits: what follows the commit.
        self._on_commit: Callable[[], None] | None = None
        #: Taken with ``async with``: its statements run in a worker thread.
        self._in_async = False
        #: Set when the task waiting for it was cancelled: the wait ends at once.
        self._abandoned = threading.Event()

    def __bool__(self) -> bool:
        return self.acquired

    def __repr__(self) -> str:
        state = "lost" if self.lost else "acquired" if self.acquired else "not acquired"
        return f"<AdvisoryLock {self.key} {self.scope or self.requested_scope} {state}>"

    def __str__(self) -> str:
        return f"advisory lock {self.key}"

    # -- acquiring -----------------------------------------------------------------------

    def __enter__(self) -> AdvisoryLock:
        return self.acquire()

    async def __aenter__(self) -> AdvisoryLock:
        """``async with advisory_lock(...)``: the same lock, its blocking statements (and a
        ``wait``) in a worker thread, so the event loop serves other requests meanwhile.
        Session scope only: Django runs no transaction across ``await``.

        Cancelled while it waits (a request's timeout, a client gone), it stops waiting, and
        what the thread took is released before the cancellation goes on: no ``__aexit__``
        would ever release it."""
        self._in_async = True
        taking = asyncio.ensure_future(asyncio.to_thread(self.acquire))
        try:
            return await asyncio.shield(taking)
        except asyncio.CancelledError:
            self._abandoned.set()
            giving_up = asyncio.ensure_future(self._give_up(taking))
            _GIVING_UP.add(giving_up)  # runs to its end, even if this task is cancelled again
            giving_up.add_done_callback(_GIVING_UP.discard)
            await asyncio.shield(giving_up)
            raise

    async def _give_up(self, taking: asyncio.Future[AdvisoryLock]) -> None:
        """Once the thread's last statement has returned, release whatever it took."""
        await asyncio.wait([taking])
        if not taking.cancelled():
            taking.exception()  # a failed acquire() released what it took
        await asyncio.to_thread(self.release)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.release, exc)

    def acquire(self) -> AdvisoryLock:
        """Try to take the lock (for up to ``wait`` seconds). On any failure, or a signal,
        whatever was taken is released before the exception propagates."""
        self.requested_at = time.monotonic()
        try:
            self.scope = pooler.resolve_scope(self.requested_scope, self.using)
            if self.scope == "transaction" and self._in_async:
                raise LockScopeError(
                    f"{self} is taken with 'async with', which needs session scope (Django runs "
                    "no transaction across await), but it resolved to transaction scope: use "
                    "scope='session', with ADVISORY_CRON['LOCK_DATABASE'] on a direct "
                    "connection when a transaction pooler is in the path"
                )
            if self.scope == "session":
                self._acquire_session()
            else:
                self._acquire_transaction()
            if self.acquired:
                self.acquired_at = time.monotonic()
                logger.debug("acquired %r", self)
                if self.scope == "session":
                    self._watch()
        except BaseException as error:
            self.release(error)
            raise
        return self

    def _attempts(self) -> Iterator[bool]:
        """Yield ``final`` flags, sleeping with back-off between attempts, for ``wait`` s
        (or until the waiting task is cancelled: no further attempt then)."""
        deadline = time.monotonic() + self.wait
        delay = POLL_START
        while True:
            remaining = deadline - time.monotonic()
            yield remaining <= 0
            if remaining <= 0 or self._abandoned.wait(min(delay, remaining)):
                return
            delay = min(delay * 2, MAX_POLL_INTERVAL)

    def send(self, statement: Statement) -> Row | None:
        """Run one of our statements on the lock's connection, with a deadline; its row."""
        assert self.connection is not None
        self._settled = False
        rows = rows_within(self.connection, statement, app_settings.STATEMENT_TIMEOUT)
        self._settled = True
        return rows[0] if rows else None

    def _held_signals(self, scope: ResolvedScope) -> AbstractContextManager[object]:
        """Signals held while one of the lock's statements runs (see ``whole_statements``)."""
        if scope == "transaction" or self.statements.whole_statements:
            return deferred_signals()
        return nullcontext()

    def _try(self, scope: ResolvedScope, final: bool) -> bool:
        with self._held_signals(scope):
            self._trying = True
            statement = self.statements.acquire(self.key, scope, final)
            if scope == "transaction":
                row = self._send_opening_transaction(statement)
                send = self._send_outside_savepoint
            else:
                row, send = self.send(statement), self.send
            assert row is not None
            self.acquired = self.statements.accept(row, scope, send)
            self._trying = False
        return self.acquired

    def _send_opening_transaction(self, statement: Statement) -> Row | None:
        """The acquiring statement of transaction scope, in the round trip that begins the
        transaction (and opens the body's savepoint)."""
        assert self.connection is not None
        sql_text, params = statement
        with (
            answer_within(self.connection, app_settings.STATEMENT_TIMEOUT),
            self.connection.cursor() as cursor,
        ):
            try:
                with pipelined(self.connection):
                    cursor.execute(sql_text, params)
                    if self.savepoint:
                        self._savepoint = transaction.atomic(using=self.using)
                        self._savepoint.__enter__()
            except BaseException as error:
                # The savepoint was never made: Django's rollback to it fails quietly (and
                # marks the transaction for rollback), so the acquiring error is the one raised.
                self._close_savepoint(error)
                raise
            row = cursor.fetchone()
        return None if row is None else tuple(row)

    def _send_outside_savepoint(self, statement: Statement) -> Row | None:
        """A follow-up of the acquiring statement: it belongs to the lock's transaction, not to
        the body's savepoint (whose rollback must not take it along)."""
        if self._savepoint is None:
            return self.send(statement)
        self._close_savepoint(None)
        row = self.send(statement)
        self._savepoint = transaction.atomic(using=self.using)
        self._savepoint.__enter__()
        return row

    def _close_savepoint(self, error: BaseException | None) -> None:
        savepoint, self._savepoint = self._savepoint, None
        if savepoint is not None:
            if error is None:
                savepoint.__exit__(None, None, None)
            else:
                savepoint.__exit__(type(error), error, error.__traceback__)

    def _acquire_session(self) -> None:
        self._checked_out = checkout(self.using)
        self.connection = self._checked_out.wrapper
        for final in self._attempts():
            if self._try("session", final) or self.statements.settled():
                return

    def _acquire_transaction(self) -> None:
        connection = require_postgresql(self.using)
        if connection.in_atomic_block:
            raise LockScopeError(
                "transaction-scoped advisory locks cannot be taken inside an outer atomic() "
                "block: the lock would outlive the job until the outer transaction ends"
            )
        ensure_connected(connection)
        self.connection = connection
        for final in self._attempts():
            self._atomic = transaction.atomic(using=self.using)
            self._atomic.__enter__()
            # Registered first, so it runs before any callback the body registers, and outside
            # the body's savepoint, whose rollback would discard it.
            self.committed = False
            transaction.on_commit(self._mark_committed, using=self.using)
            if self._try("transaction", final) or final:
                return
            self._close_savepoint(None)
            atomic, self._atomic = self._atomic, None
            atomic.__exit__(None, None, None)

    def _mark_committed(self) -> None:
        self.committed = True
        if self._on_commit is not None:
            self._on_commit()  # releasing: the commit's deadline ends, held signals go now

    # -- while held ----------------------------------------------------------------------

    def _watch(self) -> None:
        """Start the heartbeat, and make this thread's queries fail once the lock is lost."""
        assert self.connection is not None
        self.heartbeat = Heartbeat(
            functools.partial(self._beat, self.connection),
            on_lost=self.mark_lost,
            name=f"advisory-cron-heartbeat {self.key}",
        ).start()
        if not self._in_async:
            # An async holder's queries run in other threads: it reads ``lost`` instead.
            self.guard_queries()

    def _beat(self, connection: BaseDatabaseWrapper) -> bool:
        """One beat, on the lock connection: raise if it died, is silent, or no longer holds
        the lock."""
        rows = rows_within(connection, self.statements.beat(self.key), beat_deadline())
        if not rows or not rows[0][0]:
            raise LockLost("the lock is no longer held by its connection")
        return True

    def guard_queries(self) -> None:
        """Make this thread's queries through Django fail once the lock is lost."""
        for connection in connections.all():
            self._guards.enter_context(connection.execute_wrapper(self._guard))

    def _guard(self, execute: Any, sql_text: Any, params: Any, many: bool, context: Any) -> Any:
        if self.lost:
            raise LockLost(
                f"{self} was lost while this code ran; another process may hold it now, so "
                "this run stops at its next database query"
            )
        return execute(sql_text, params, many, context)

    def mark_lost(self, error: BaseException) -> None:
        """Record that the lock is gone (from the heartbeat, or a failed release); once, whichever
        thread finds it first."""
        with self._losing:
            if self.lost:
                return
            self.lost = True
        logger.error(
            "%s: %s; another process may take the lock and start the same work",
            self,
            lost_text(error),
        )
        try:
            self.on_lost(self, error)
        finally:
            self._lost_told.set()

    def wait_lost(self, seconds: float) -> bool:
        """Wait ``seconds``, or less if the lock is lost meanwhile; whether it was. The
        waiter wakes once ``on_lost`` has been told (the row marked, the signal sent)."""
        return self._lost_told.wait(seconds)

    # -- releasing -----------------------------------------------------------------------

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release(exc)

    def release(self, error: BaseException | None = None) -> None:
        """Release the lock: the one path for success, failure and signals. Idempotent.

        ``error`` is what ended the holder's work, if anything. Transaction scope: the release
        statement runs and the transaction commits when the lock was taken (the body's own
        work was rolled back to its savepoint if it failed); a failed commit is raised. Session
        scope: a releasing statement refused for a value it carries (see
        [refused_value][django_advisory_cron.db.connections.refused_value]) is raised once the
        lock is unlocked; it is no loss of the lock.
        """
        if self._released:
            return
        self._released = True
        if self.heartbeat is not None:
            self.heartbeat.stop()
        self._guards.close()
        try:
            if self.scope == "transaction":
                self._release_transaction(error)
            else:
                self._release_session(error)
        finally:
            self.acquired = False

    def _release_session(self, error: BaseException | None) -> None:
        # The connection is reused only when it provably holds nothing: an untaken lock whose
        # every statement completed, or a release whose unlock-all ran and whose unlock found
        # the lock.
        reusable = False
        refused: Exception | None = None
        try:
            if self.acquired and not self.lost:
                statement = self.statements.release(self.key, "session", error)
                assert statement is not None
                with self._held_signals("session"):
                    row, refused = self._release_or_unlock(statement)
                reusable = self._check_unlocked(row)
            else:
                reusable = not self.acquired and not self.lost and not self._trying
        except Exception as failure:
            # The connection died after the last heartbeat, or gave no answer in time and was
            # cut: either way the lock died with it.
            self.mark_lost(failure)
        finally:
            self._give_back(reusable)
        if refused is not None:
            raise refused  # the lock is released; its owner records its end otherwise

    def _release_or_unlock(self, statement: Statement) -> tuple[Row | None, Exception | None]:
        """Send the releasing statement; if it is refused for a value it carries, nothing of
        it ran and the lock is still held: unlock it alone, and return the refusal too."""
        try:
            return self._send_release(statement), None
        except Exception as failure:
            if not refused_value(failure):
                raise
            return self._send_release(self._unlock()), failure

    def _send_release(self, statement: Statement) -> Row | None:
        """Send the releasing statement of a held session lock."""
        return self.send(statement)

    def _unlock(self) -> Statement:
        """The statement releasing the session lock with nothing else."""
        statement = sql.release_lock(self.key, "session")
        assert statement is not None
        return statement

    def _give_back(self, reusable: bool) -> None:
        """Return the lock connection to the process's warm set, for reuse if ``reusable``
        (and no statement or beat may still be under way on it), else to be closed."""
        checked_out, self._checked_out = self._checked_out, None
        self.connection = None
        if checked_out is not None:
            heartbeat_done = self.heartbeat is None or not self.heartbeat.running
            checkin(checked_out, reusable=reusable and self._settled and heartbeat_done)

    def _release_transaction(self, error: BaseException | None) -> None:
        """End the lock's transaction: the body's savepoint, the release statement, the commit
        (or the rollback). Django's atomic stack is always unwound, in order, whatever fails.

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
                self._end_transaction(atomic, connection, error, deliver)
            finally:
                self._on_commit = None

    def _end_transaction(
        self,
        atomic: Any,
        connection: BaseDatabaseWrapper,
        error: BaseException | None,
        deliver: Callable[[], None],
    ) -> None:
        try:
            statement = (
                self.statements.release(self.key, "transaction", error) if self.acquired else None
            )
            # One round trip: the savepoint's end (a rollback to it if the body failed) and the
            # release statement; the commit follows, so on_commit callbacks run outside it. An
            # empty pipeline would still cost its sync: none when there is nothing to send.
            sending = self._savepoint is not None or statement is not None
            with (
                answer_within(connection, app_settings.STATEMENT_TIMEOUT),
                pipelined(connection) if sending else nullcontext(),
            ):
                self._close_savepoint(error)
                if statement is not None:
                    with connection.cursor() as cursor:
                        cursor.execute(*statement)
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
        committing = self.acquired or error is None
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
            self.mark_lost(failure)

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
                self,
            )
        return row is not None and row[0] is True


def advisory_lock(
    key: str | LockKey,
    *,
    scope: Scope = "auto",
    wait: float = 0,
    using: str | None = None,
) -> AdvisoryLock:
    """Take the advisory lock for ``key`` (a job name or a
    [LockKey][django_advisory_cron.core.keys.LockKey]).

    ``scope`` is ``"session"``, ``"transaction"`` or ``"auto"`` (transaction scope when a
    pooler is in the path). ``wait`` seconds are spent retrying; 0 tries once. The body always
    runs: check ``lock.acquired``. In async code, ``async with advisory_lock(...)`` takes it
    without blocking the event loop (session scope).
    """
    return AdvisoryLock(key, scope=scope, wait=wait, using=using)
