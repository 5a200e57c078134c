"""``advisory_lock()``: take a PostgreSQL advisory lock in session or transaction scope.

The lock's state and its one release. The scope, resolved once, picks where it lives
([holder][django_advisory_cron.lock.holder]): session scope a dedicated connection
([session][django_advisory_cron.lock.session]; once the lock is lost, the holding thread's
next query through Django raises [LockLost][django_advisory_cron.exceptions.LockLost]),
transaction scope the job's ``atomic()`` ([transaction][django_advisory_cron.lock.transaction];
with ``savepoint=True`` the body runs in a savepoint of it). Taking it, ``wait`` included, is
[polling][django_advisory_cron.lock.polling] (a run takes its lock there with its own
statements, so its history rides in the lock's round trips); ``async with`` is
[async_entry][django_advisory_cron.lock.async_entry]; the loss is
[loss][django_advisory_cron.lock.loss].
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Callable
from types import TracebackType

from django.db.backends.base.base import BaseDatabaseWrapper

from .. import signals
from ..core.keys import LockKey, job_key
from ..core.scopes import ResolvedScope, Scope, check_scope
from ..db import pooler, sql
from ..db.aliases import lock_database
from ..db.execute import Row
from ..db.sql import Statement
from . import async_entry, holder
from .heartbeat import Heartbeat
from .holder import Holder
from .loss import Loss
from .polling import attempts

logger = logging.getLogger("django_advisory_cron")


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
        beat: Callable[[], Statement] | None = None,
        on_lost: Callable[[AdvisoryLock, BaseException], None] = send_lost_signal,
        savepoint: bool = False,
        whole_statements: bool = False,
    ) -> None:
        if wait < 0:
            raise ValueError("wait must be >= 0 seconds")
        self.using = lock_database(using)
        self.key = key if isinstance(key, LockKey) else job_key(key)
        self.requested_scope = check_scope(scope)
        #: ``"session"`` or ``"transaction"``; ``"auto"`` is resolved when the lock is taken.
        self.scope: ResolvedScope | None = None
        self.wait = wait
        #: What a session lock's heartbeat sends (one boolean column, true while it is held):
        #: a run's renews its lease in the same round trip; a bare lock asks the lock table.
        self.beat = beat or functools.partial(sql.lock_held, self.key)
        self.loss = Loss(str(self), functools.partial(on_lost, self))
        #: Its statements must not be cut in half (a run's): see the session holder.
        self.whole_statements = whole_statements
        #: Transaction scope: run the body in a savepoint (see the module docstring).
        self.savepoint = savepoint
        self.acquired = False
        self.acquired_at: float | None = None
        #: When taking the lock began (``time.monotonic()``): with ``acquired_at``, the wait.
        self.requested_at: float | None = None
        #: Where the lock lives, picked by the scope once it is resolved.
        self.holder: Holder | None = None
        #: Set when the task waiting for it was cancelled: the wait ends at once.
        self.abandoned = threading.Event()
        self._released = False
        #: Taken with ``async with``: its statements run in a worker thread.
        self._in_async = False

    def __bool__(self) -> bool:
        return self.acquired

    def __repr__(self) -> str:
        state = "lost" if self.lost else "acquired" if self.acquired else "not acquired"
        return f"<AdvisoryLock {self.key} {self.scope or self.requested_scope} {state}>"

    def __str__(self) -> str:
        return f"advisory lock {self.key}"

    @property
    def lost(self) -> bool:
        """The lock was lost while it was held (its heartbeat, or its release, found it gone)."""
        return self.loss.lost

    @property
    def connection(self) -> BaseDatabaseWrapper | None:
        """The connection the lock lives on, while it is held."""
        return None if self.holder is None else self.holder.connection

    @property
    def heartbeat(self) -> Heartbeat | None:
        """Session scope: what watches the lock while it is held."""
        return None if self.holder is None else self.holder.heartbeat

    @property
    def in_transaction(self) -> bool:
        """The lock lives in a transaction (see its holder's ``in_transaction``)."""
        return self.holder is not None and self.holder.in_transaction

    @property
    def committed(self) -> bool:
        """Transaction scope: the lock's transaction committed (see its holder's)."""
        return self.holder is not None and self.holder.committed

    # -- acquiring -----------------------------------------------------------------------

    def __enter__(self) -> AdvisoryLock:
        return self.acquire()

    async def __aenter__(self) -> AdvisoryLock:
        """``async with advisory_lock(...)``: see
        [async_entry][django_advisory_cron.lock.async_entry]."""
        self._in_async = True
        return await async_entry.enter(self.acquire, self.release, self.abandoned)

    def acquire(self) -> AdvisoryLock:
        """Try to take the lock (for up to ``wait`` seconds). On any failure, or a signal,
        whatever was taken is released before the exception propagates."""
        try:
            for _attempt in attempts(self):
                assert self.holder is not None and self.scope is not None
                with self.holder.attempt():
                    row = self.holder.try_first(sql.try_lock(self.key, self.scope))
                    assert row is not None
                    self.acquired = bool(row[0])
        except BaseException as error:
            self.release(error)
            raise
        return self

    def open(self) -> Holder:
        """Resolve the scope, which picks the holder, and make the holder ready."""
        self.requested_at = time.monotonic()
        self.scope = pooler.resolve_scope(self.requested_scope, self.using)
        picked = holder.pick(self.scope, self)
        if picked.in_transaction and self._in_async:
            raise async_entry.needs_session(str(self))
        self.holder = picked
        picked.begin()
        return picked

    def took(self) -> None:
        """After the last attempt: a lock taken is watched from now on."""
        assert self.holder is not None
        if self.acquired:
            self.acquired_at = time.monotonic()
            logger.debug("acquired %r", self)
            watched = self.holder.watch(f"advisory-cron-heartbeat {self.key}")
            if watched and not self._in_async:
                # An async holder's queries run in other threads: it reads ``lost``.
                self.loss.guard_queries()

    def rekey(self, key: LockKey) -> None:
        """The lock is ``key`` from now on: the run slot its claim took, of a job that may run
        several times at once (its holder reads the key when its statements name it)."""
        self.key = key

    def send(self, statement: Statement) -> Row | None:
        """Run one of our statements where the lock lives, with a deadline; its row."""
        assert self.holder is not None
        return self.holder.send(statement)

    # -- releasing -----------------------------------------------------------------------

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release(exc)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.release, exc)

    def release(
        self, error: BaseException | None = None, *, ending: Statement | None = None
    ) -> None:
        """Release the lock: the one path for success, failure and signals. Idempotent.

        ``error`` is what ended the holder's work, if anything. ``ending`` is the releasing
        statement of a taken lock that its owner composed (a run's finish, which unlocks); a
        bare lock sends its own. What the holder raises (a failed commit; a session lock's
        releasing statement refused for a value it carries, once the lock is unlocked) is
        raised: see [session][django_advisory_cron.lock.session] and
        [transaction][django_advisory_cron.lock.transaction].
        """
        if self._released:
            return
        self._released = True
        self.loss.unguard()
        try:
            if self.holder is None or self.scope is None:
                return
            taken = self.acquired
            statement = (ending or sql.release_lock(self.key, self.scope)) if taken else None
            self.holder.release(statement, error, taken=taken)
        finally:
            self.acquired = False


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
