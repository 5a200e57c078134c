"""Counting the statements our code sends, at the driver: the lock's and the worker's
statements go through the driver's cursor, past Django's execute wrappers."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created


@contextmanager
def statements_sent() -> Iterator[list[tuple[str, str]]]:
    """``(thread name, statement)`` for each statement sent on the connections opened
    meanwhile (a connection opened earlier is not watched)."""
    sent: list[tuple[str, str]] = []

    def count(sender: object, connection: BaseDatabaseWrapper, **kwargs: object) -> None:
        factory = connection.connection.cursor_factory

        class Counting(factory):  # type: ignore[misc, valid-type]
            def execute(self, query: Any, params: Any = None, **options: Any) -> Any:
                sent.append((threading.current_thread().name, str(query)))
                return super().execute(query, params, **options)

        connection.connection.cursor_factory = Counting

    connection_created.connect(count, weak=False)
    try:
        yield sent
    finally:
        connection_created.disconnect(count)
