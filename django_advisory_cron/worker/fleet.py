"""Which ``cronworker`` processes are alive now, read from the server's session list.

A worker keeps one connection open named after itself (``application_name``), so it is
listed exactly as long as its process lives: no table to clean up after a crash, and a worker
killed with ``kill -9`` disappears as soon as the server notices its socket closed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connections

from ..conf import app_settings
from ..db import sql
from .loop import PRESENCE_NAME


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
    text, params = sql.live_workers(PRESENCE_NAME)
    with connections[using or app_settings.lock_database].cursor() as cursor:
        cursor.execute(text, params)
        rows = cursor.fetchall()
    workers = []
    for name, since, client_addr in rows:
        host, pid = _parse(name)
        workers.append(
            LiveWorker(host, pid, since, None if client_addr is None else str(client_addr))
        )
    return workers
