"""``advisory_lock()``: take a PostgreSQL advisory lock in session or transaction scope.

Session scope holds the lock on a dedicated connection (see :mod:`.lockconn`); the body's own
queries use Django's normal connections. Transaction scope runs the body inside
``transaction.atomic(using=alias)`` whose first statement is ``pg_try_advisory_xact_lock``:
commit or rollback releases it, which is the only form that is safe behind PgBouncer's
transaction pooling.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Literal

from django.db import DatabaseError, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from . import pooler, signals
from .conf import app_settings
from .exceptions import LockScopeError
from .heartbeat import Heartbeat, lost_text
from .heartbeat import start_for as start_heartbeat
from .keys import LockKey, job_key
from .lockconn import ensure_connected, open_lock_connection, require_postgresql

logger = logging.getLogger("django_advisory_cron")

Scope = Literal["session", "transaction", "auto"]
SCOPES: tuple[Scope, ...] = ("session", "transaction", "auto")

# Polling for ``wait``: start fast, back off to this many seconds between attempts.
MAX_POLL_INTERVAL = 0.5

Row = tuple[Any, ...]


def resolve_scope(scope: str, alias: str) -> Literal["session", "transaction"]:
    """Resolve ``"auto"``: transaction scope when the alias is transaction pooled."""
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}, not {scope!r}")
    if scope == "auto":
        return "transaction" if pooler.is_transaction_pooled(alias) else "session"
    return "transaction" if scope == "transaction" else "session"


class AdvisoryLock:
    """A context manager taking one advisory lock; truthy once acquired.

    ``with advisory_lock("name") as lock:`` always enters the body: test ``lock.acquired``.
    Subclasses change the acquire/release statements (the runner records history in them).
    """

    def __init__(
        self,
        key: str | LockKey,
        *,
        scope: Scope = "auto",
        wait: float = 0,
        using: str | None = None,
    ) -> None:
        if wait < 0:
            raise ValueError("wait must be >= 0 seconds")
        self.key = key if isinstance(key, LockKey) else job_key(key)
        self.using = using or app_settings.lock_database
        self.requested_scope = scope
        self.scope = resolve_scope(scope, self.using)
        self.wait = wait
        self.acquired = False
        self.lost = False
        self.acquired_at: float | None = None
        self.connection: BaseDatabaseWrapper | None = None
        self._atomic: Any = None
        self.heartbeat: Heartbeat | None = None

    def __bool__(self) -> bool:
        return self.acquired

    def __repr__(self) -> str:
        state = "acquired" if self.acquired else "not acquired"
        return f"<AdvisoryLock {self.key} {self.scope} {state}>"

    # -- statements (overridden by the runner) ------------------------------------------

    def try_statement(self, final: bool) -> tuple[str, Mapping[str, Any]]:
        """The statement that tries the lock; its first column says whether it was taken."""
        function = (
            "pg_try_advisory_lock" if self.scope == "session" else "pg_try_advisory_xact_lock"
        )
        return f"SELECT {function}({self.key.sql})", self.key.params

    def accept(self, row: Row) -> bool:
        """Read the try statement's row; return whether the lock was taken."""
        return bool(row[0])

    def release_statement(self) -> tuple[str, Mapping[str, Any]]:
        """The statement that unlocks a session lock."""
        return f"SELECT pg_advisory_unlock({self.key.sql})", self.key.params

    # -- acquiring and releasing ---------------------------------------------------------

    def fetch(self, sql: str, params: Mapping[str, Any]) -> Row:
        """Run one statement on the lock's connection and return its single row."""
        assert self.connection is not None
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        assert row is not None
        return tuple(row)

    def _attempts(self) -> Any:
        """Yield ``final`` flags, sleeping with back-off between attempts, for ``wait`` s."""
        deadline = time.monotonic() + self.wait
        delay = 0.02
        while True:
            remaining = deadline - time.monotonic()
            yield remaining <= 0
            if remaining <= 0:
                return
            time.sleep(min(delay, max(remaining, 0)))
            delay = min(delay * 2, MAX_POLL_INTERVAL)

    def __enter__(self) -> AdvisoryLock:
        try:
            if self.scope == "session":
                self._enter_session()
            else:
                self._enter_transaction()
            if self.acquired:
                self.acquired_at = time.monotonic()
                logger.debug("acquired %s", self)
                if self.scope == "session":
                    self.heartbeat = start_heartbeat(self, app_settings.HEARTBEAT)
        except BaseException as error:
            # e.g. SIGTERM while acquiring: release (and close) as if the body had raised.
            self.__exit__(type(error), error, error.__traceback__)
            raise
        return self

    def stop_heartbeat(self) -> None:
        """Stop watching the lock connection (before using it from this thread again)."""
        if self.heartbeat is not None:
            self.heartbeat.stop()

    @property
    def signal_sender(self) -> Any:
        """``sender`` of :data:`~.signals.lock_lost`: the job for job runs, else None."""
        return None

    def lock_lost(self, error: BaseException) -> None:
        """Called from the heartbeat thread when the session lock's connection died."""
        self.lost = True
        logger.error(
            "%s: %s; another process may take the lock and start the same work",
            self,
            lost_text(error),
        )
        signals.lock_lost.send(
            sender=self.signal_sender, run=getattr(self, "result", None), lock=self, error=error
        )

    def _enter_session(self) -> None:
        self.connection = open_lock_connection(self.using)
        for final in self._attempts():
            sql, params = self.try_statement(final)
            if self.accept(self.fetch(sql, params)):
                self.acquired = True
                return

    def _enter_transaction(self) -> None:
        connection = require_postgresql(self.using)
        if connection.in_atomic_block:
            raise LockScopeError(
                "transaction-scoped advisory locks cannot be taken inside an outer atomic() "
                "block: the lock would outlive the job until the outer transaction ends"
            )
        ensure_connected(connection)
        self.connection = connection
        for final in self._attempts():
            atomic = transaction.atomic(using=self.using)
            atomic.__enter__()
            try:
                sql, params = self.try_statement(final)
                taken = self.accept(self.fetch(sql, params))
            except BaseException as error:
                atomic.__exit__(type(error), error, error.__traceback__)
                raise
            if taken or final:
                self.acquired = taken
                self._atomic = atomic
                return
            atomic.__exit__(None, None, None)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.scope == "transaction":
            atomic, self._atomic = self._atomic, None
            if atomic is not None:
                atomic.__exit__(exc_type, exc, tb)
        else:
            self._release_session()
        self.acquired = False

    def check_unlocked(self, row: Row) -> None:
        """Log an error when ``pg_advisory_unlock`` (the row's last column) did nothing.

        That means the statement ran on a backend that does not hold the lock: a
        transaction-pooling PgBouncer in the path. The lock stays held by another server
        connection until that connection closes.
        """
        if row and row[-1] is False:
            logger.error(
                "%s: the unlock did nothing, because this statement ran on a server connection "
                "that does not hold the lock; a transaction-pooling PgBouncer is in the path "
                "and the lock stays held until that server connection closes. Use "
                "scope='transaction' or a direct LOCK_DATABASE (see the PgBouncer docs).",
                self,
            )

    def _release_session(self) -> None:
        self.stop_heartbeat()
        connection = self.connection
        if connection is None:
            return
        try:
            if self.acquired and not self.lost:
                sql, params = self.release_statement()
                self.check_unlocked(self.fetch(sql, params))
        except DatabaseError as error:
            # The connection is gone, and with it the lock; nothing is left to release.
            logger.warning("could not release %s cleanly: %s", self, error)
        finally:
            connection.close()
            self.connection = None


def advisory_lock(
    key: str | LockKey,
    *,
    scope: Scope = "auto",
    wait: float = 0,
    using: str | None = None,
) -> AdvisoryLock:
    """Take the advisory lock for ``key`` (a job name or :class:`LockKey`).

    ``scope`` is ``"session"``, ``"transaction"`` or ``"auto"`` (transaction scope when the
    database is transaction pooled). ``wait`` seconds are spent retrying; 0 tries once.
    The body always runs: check ``lock.acquired``.
    """
    return AdvisoryLock(key, scope=scope, wait=wait, using=using)
