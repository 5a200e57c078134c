"""Where a lock lives, its holder: what every holder offers, and the scope picking one.

A holder sends a statement, gives the lock back and tells its owner when the lock is lost;
it knows nothing of what its statements write. Session scope holds the lock on a dedicated
connection ([session][django_advisory_cron.lock.session]), transaction scope in the job's
``atomic()`` ([transaction][django_advisory_cron.lock.transaction]), and a ``cronworker``'s
runs on one claim connection shared by many ([shared][django_advisory_cron.lock.shared]).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Protocol

from django.db.backends.base.base import BaseDatabaseWrapper

from ..core.scopes import ResolvedScope
from ..db.execute import Row
from ..db.sql import Statement
from .heartbeat import Heartbeat
from .session import Owner as SessionOwner
from .session import SessionHolder
from .transaction import TransactionHolder

#: Sends one statement where the lock lives; its first row.
Send = Callable[[Statement], "Row | None"]


class Holder(Protocol):
    """What a lock's owner asks of where the lock lives."""

    #: The connection the lock lives on, while it is held.
    connection: BaseDatabaseWrapper | None
    #: What watches a session lock while it is held.
    heartbeat: Heartbeat | None
    #: The lock lives in the job's transaction: it ends with it, and what is written under
    #: it commits or rolls back with it.
    in_transaction: bool
    #: The lock's transaction committed.
    committed: bool

    def begin(self) -> None:
        """Make ready where the lock will live (before the first attempt)."""

    def attempt(self) -> AbstractContextManager[None]:
        """One attempt: the block sends its acquiring statement (and any follow-up), with
        signals held where the holder's statements must not be cut."""

    def try_first(self, statement: Statement) -> Row | None:
        """An attempt's acquiring statement; its row."""

    def follow_up(self, statement: Statement) -> Row | None:
        """A statement following the acquiring one in the same attempt; its row."""

    def send(self, statement: Statement) -> Row | None:
        """One statement where the lock lives, with a deadline; its row."""

    def retreat(self) -> None:
        """After an attempt that did not take the lock, before the next one."""

    def watch(self, name: str) -> bool:
        """A lock taken is watched from now on (by a thread called ``name``); whether
        anything watches it."""

    def release(
        self, statement: Statement | None, error: BaseException | None, *, taken: bool
    ) -> None:
        """Give the lock back: send the releasing ``statement`` of a ``taken`` lock (None:
        nothing to send), ``error`` being what ended the owner's work, if anything."""


class Owner(SessionOwner, Protocol):
    """What a holder of either scope is made from: the lock it will hold."""

    #: Transaction scope: run the body in a savepoint.
    savepoint: bool


def pick(scope: ResolvedScope, lock: Owner) -> Holder:
    """The holder of a lock of ``scope``: the one place the resolved scope is read."""
    if scope == "session":
        return SessionHolder(lock)
    return TransactionHolder(lock.using, lock.loss, savepoint=lock.savepoint)
