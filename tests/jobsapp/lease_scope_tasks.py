"""The jobs of the lease-scope tests (tests/test_lease_scope.py): workers behind a transaction
pooler claim them together and protect their runs by their rows' leases."""

import os
import time
from datetime import timedelta
from pathlib import Path

from django_advisory_cron import locked_task

from .job_names import LEASE_SCOPE_FOLDER, LEASE_SCOPE_TICKING


def _ticking(name: str) -> None:
    def body() -> None:
        """Does nothing every second, with the others."""

    locked_task(name=name, every=timedelta(seconds=1))(body)


for _name in LEASE_SCOPE_TICKING:
    _ticking(_name)


@locked_task(name="lease_long", every=timedelta(seconds=1))
def lease_long() -> None:
    """Longer than the interval between its ticks: its next ticks come while it runs."""
    time.sleep(2.5)


@locked_task(name="lease_hold", every=timedelta(seconds=1))
def lease_hold() -> None:
    """Write ``<pid>.started``, then go on until ``release`` exists (at most 60 s)."""
    folder = Path(os.environ[LEASE_SCOPE_FOLDER])
    (folder / f"{os.getpid()}.started").touch()
    deadline = time.monotonic() + 60
    while not (folder / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
