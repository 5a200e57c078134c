"""Jobs for the connection-count tests (test_worker_connections.py), loaded with
``ADVISORY_CRON_JSON='{"JOBS_MODULE": "connection_tasks", ...}'`` in the worker processes.

Their bodies are pure Python, so every server connection the worker holds is its own."""

import os
import time
from datetime import timedelta
from pathlib import Path

from django_advisory_cron import locked_task
from django_advisory_cron.core.keys import KeyMode

from .job_names import (
    CONNECTION_HASHTEXT,
    CONNECTION_HASHTEXT_EVERY,
    CONNECTION_HOLDING,
    CONNECTION_HOLDING_EVERY,
    CONNECTION_OTHER_DATABASE,
    CONNECTION_SIGNALS,
    CONNECTION_TOGETHER,
    CONNECTION_WAITING,
    SECOND_ALIAS,
)

#: The folder where the holding jobs say they started and wait for their release file.
SIGNALS = CONNECTION_SIGNALS


@locked_task(name="conn_tick_every1", every=timedelta(seconds=1))
def conn_tick_every1() -> None:
    """Does nothing each second: alone at odd seconds, claimed with the next at even ones."""


@locked_task(name="conn_tick_every2", every=timedelta(seconds=2))
def conn_tick_every2() -> None:
    """Does nothing every two seconds."""


def _ticking(name: str) -> None:
    def body() -> None:
        """Does nothing every two seconds, with the others."""

    locked_task(name=name, every=timedelta(seconds=2))(body)


#: Jobs due together every two seconds, with ``conn_tick_every2``.
TOGETHER = CONNECTION_TOGETHER
for _name in TOGETHER:
    _ticking(_name)


def _holding(
    name: str, seconds: int, key: KeyMode = "sha256", wait: float = 0, using: str | None = None
) -> None:
    def body() -> None:
        folder = Path(os.environ[SIGNALS])
        (folder / f"{name}.started").touch()
        deadline = time.monotonic() + 120
        while not (folder / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.02)

    locked_task(
        name=name,
        every=timedelta(seconds=seconds),
        scope="session",
        key=key,
        wait=wait,
        using=using,
    )(body)


#: Four jobs that run until the test releases them, due at different moments (some alone,
#: some together).
HOLDING = CONNECTION_HOLDING
for _name, _seconds in zip(HOLDING, CONNECTION_HOLDING_EVERY, strict=True):
    _holding(_name, _seconds)


#: The same, keyed ``hashtext(name)``.
for _name, _seconds in zip(CONNECTION_HASHTEXT, CONNECTION_HASHTEXT_EVERY, strict=True):
    _holding(_name, _seconds, key="hashtext")


#: The same with ``wait=``, every two seconds.
for _name in CONNECTION_WAITING:
    _holding(_name, 2, wait=30)


#: The same on the ``second`` database alias (in the subprocesses that have it), due at
#: different moments (some alone, some together).
if SECOND_ALIAS in os.environ:
    for _name, _seconds in zip(CONNECTION_OTHER_DATABASE, (1, 3, 7), strict=True):
        _holding(_name, _seconds, using="second")


@locked_task(name="conn_yearly", schedule="0 0 1 1 *")
def conn_yearly() -> None:
    """Ticks once a year: in the tests it runs only when someone asks for it ("run now")."""
