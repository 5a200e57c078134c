"""Which ``cronworker`` processes are alive now, read from the server's session list, and how
the jobs due together are shared between them.

A worker keeps one connection open named after itself (``application_name``), so it is
listed exactly as long as its process lives: no table to clean up after a crash, and a worker
killed with ``kill -9`` disappears as soon as the server notices its socket closed.

Every worker with the same jobs due deals them out the same way
([share_out][django_advisory_cron.worker.fleet.share_out]), so each first claims its own share
and the wins spread across the replicas instead of going to the fastest one.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..db import sql
from ..db.aliases import lock_database
from ..db.execute import fetch_all
from ..lock.shared import ClaimConnection
from ..run.history import HOST

logger = logging.getLogger("django_advisory_cron")

#: ``application_name`` prefix of a worker's presence connection: a worker is visible in
#: ``pg_stat_activity`` exactly as long as its process lives.
PRESENCE_NAME = "django-advisory-cron worker"


def worker_identity() -> str:
    return f"{HOST}:{os.getpid()}"


def presence_name(identity: str) -> str:
    """The ``application_name`` of the presence connection of the worker ``identity``."""
    return f"{PRESENCE_NAME} {identity}"[:63]


@dataclass(frozen=True)
class LiveWorker:
    """One live worker: where it runs and since when its presence connection is open."""

    host: str
    pid: int | None
    since: datetime
    client_addr: str | None

    @property
    def identity(self) -> str:
        return f"{self.host}:{self.pid}" if self.pid is not None else self.host

    def as_dict(self) -> dict[str, object]:
        return {
            "host": self.host,
            "pid": self.pid,
            "since": self.since.isoformat(),
            "client_addr": self.client_addr,
        }


def _parse(application_name: str) -> tuple[str, int | None]:
    """``host`` and ``pid`` from ``"<PRESENCE_NAME> host:pid"`` (a long host name may have
    been cut short by the server's 63-character limit, pid and all)."""
    identity = application_name[len(PRESENCE_NAME) :].strip()
    host, _, pid = identity.rpartition(":")
    if host and pid.isdigit():
        return host, int(pid)
    return identity, None


def live_workers(using: str | None = None) -> list[LiveWorker]:
    """The workers connected to the lock database now, oldest first."""
    return read_workers(fetch_all(lock_database(using), sql.live_workers(PRESENCE_NAME)))


def read_workers(rows: Iterable[tuple[str, datetime, Any]]) -> list[LiveWorker]:
    """The workers of ``(application_name, backend_start, client_addr)`` sessions, in their
    order (a statement that reads them beside other things hands them over here)."""
    workers = []
    for name, since, client_addr in rows:
        host, pid = _parse(name)
        workers.append(
            LiveWorker(host, pid, since, None if client_addr is None else str(client_addr))
        )
    return workers


@functools.lru_cache(maxsize=65536)
def _rank(identity: str, name: str) -> bytes:
    """A job's place for one worker (cached: a worker asks at every tick)."""
    return hashlib.sha256(f"{identity}\0{name}".encode()).digest()


def run_order(identity: str, names: Iterable[str]) -> list[str]:
    """The order this worker tries its due jobs in: its own, stable, spread across workers."""
    return sorted(names, key=lambda name: _rank(identity, name))


def share_out(jobs: Iterable[str], workers: Iterable[str], tick: datetime) -> dict[str, str]:
    """Which live worker (by presence name) claims each of ``jobs``, due together at
    ``tick``, first. The jobs, in the order of a hash of their names, are dealt to the
    workers (in name order) in turn, starting at a worker chosen by the tick: every worker
    with the same jobs due computes the same shares, the shares differ by at most one job,
    and with few jobs due the first deal moves round from tick to tick."""
    dealers = sorted(workers)
    start = int.from_bytes(_rank("", tick.isoformat())[:4], "big")
    ordered = sorted(jobs, key=lambda job: _rank("", job))
    return {job: dealers[(start + index) % len(dealers)] for index, job in enumerate(ordered)}


def peers(presence: ClaimConnection) -> tuple[str, ...] | None:
    """The presence names of the live workers, as the worker of the presence connection
    ``presence`` last saw them (in the answer to its latest claim, or to its latest reading
    of the clock, which comes before any claim), or ``None`` when it is alone or cannot tell
    (then it claims everything at once). However old that answer, it only decides who claims
    which jobs first: a job dealt to a worker that has gone since is still unclaimed when the
    others look a moment later (``SPREAD_DELAY``), and they claim it."""
    names = presence.sighting.workers if presence.sighting is not None else ()
    return names if len(names) > 1 and presence.presence in names else None
