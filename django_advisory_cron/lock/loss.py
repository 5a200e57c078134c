"""A lock's loss: found once, by whichever thread sees it first (its heartbeat, a failed
release), logged, told to the lock's owner, and felt by the holding thread's next query
through Django, which raises [LockLost][django_advisory_cron.exceptions.LockLost]: a body that
can no longer prove it is alone stops at its next database call.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from django.db import connections

from ..exceptions import LockLost, RunCancelled
from .heartbeat import lost_text

logger = logging.getLogger("django_advisory_cron")


class Loss:
    """Whether one lock is lost, and what follows once it is."""

    def __init__(self, name: str, tell: Callable[[BaseException], None]) -> None:
        #: The lock, as its messages name it.
        self.name = name
        #: What the lock's owner does once the lock is lost.
        self.tell = tell
        self.lost = False
        self._marking = threading.Lock()
        #: Set once the loss has been told (``tell`` has returned): see ``wait``.
        self._told = threading.Event()
        self._guards = ExitStack()
        #: A new run asked this one to stop (overlap cancel_other): the request's text, told
        #: once to ``on_stop`` (set by the lock's owner; else the holding thread's next query
        #: raises ``RunCancelled``, once).
        self.stop_asked = ""
        self.on_stop: Callable[[str], bool] | None = None
        self._stop_told = False

    def mark(self, error: BaseException) -> None:
        """Record that the lock is gone (from the heartbeat, or a failed release); once,
        whichever thread finds it first."""
        with self._marking:
            if self.lost:
                return
            self.lost = True
        logger.error(
            "%s: %s; another process may take the lock and start the same work",
            self.name,
            lost_text(error),
        )
        try:
            self.tell(error)
        finally:
            self._told.set()

    def wait(self, seconds: float) -> bool:
        """Wait ``seconds``, or less if the lock is lost meanwhile; whether it was. The
        waiter wakes once the loss has been told (the row marked, the signal sent)."""
        return self._told.wait(seconds)

    def ask_stop(self, text: str) -> None:
        """A new run asked this lock's run to stop (from its heartbeat): once, whichever beat
        reads it first; ``on_stop`` delivers it (true: done), else the holding thread's next
        query raises ``RunCancelled``."""
        with self._marking:
            if self.stop_asked:
                return
            self.stop_asked = text
        logger.warning("%s: %s; asking its run to stop", self.name, text)
        if self.on_stop is not None and self.on_stop(text):
            self._stop_told = True

    def guard_queries(self) -> None:
        """Make this thread's queries through Django fail once the lock is lost."""
        for connection in connections.all():
            self._guards.enter_context(connection.execute_wrapper(self._guard))

    def unguard(self) -> None:
        """The lock is released: this thread's queries are no longer guarded."""
        self._guards.close()

    def _guard(self, execute: Any, sql_text: Any, params: Any, many: bool, context: Any) -> Any:
        if self.lost:
            raise LockLost(
                f"{self.name} was lost while this code ran; another process may hold it now, "
                "so this run stops at its next database query"
            )
        if self.stop_asked and not self._stop_told:
            self._stop_told = True
            raise RunCancelled(f"{self.stop_asked}; this run stops at this query")
        return execute(sql_text, params, many, context)
