"""A streaming standby of a throwaway primary, for failover tests.

Advisory locks live in the primary's memory and are not replicated, while the run rows are:
what "once per tick" means across a failover can only be shown with a real standby that is
promoted under running workers. ``start_standby()`` copies a running
[PostgresServer][django_advisory_cron.testing.PostgresServer] with ``pg_basebackup -R`` on
loopback and starts it as a hot standby streaming from it. The primary needs nothing more
than ``start_postgres()`` gives it: ``initdb``'s defaults already have ``wal_level = replica``,
``max_wal_senders`` and ``replication`` entries for loopback in ``pg_hba.conf``.
"""

from __future__ import annotations

import atexit
import time
from collections.abc import Mapping
from dataclasses import dataclass

from .postgres import (
    PostgresServer,
    _run,
    free_port,
    make_workdir,
)

__all__ = ["Standby", "start_standby"]


@dataclass
class Standby(PostgresServer):
    """A hot standby streaming from ``primary``; ``promote()`` makes it a primary."""

    primary: PostgresServer | None = None
    #: Its ``cluster_name``: the ``application_name`` it streams under, in the primary's
    #: ``pg_stat_replication`` and ``synchronous_standby_names``.
    name: str = ""

    def wait_streaming(self, timeout: float = 30.0, *, synchronous: bool = False) -> None:
        """Wait until the primary streams to this standby (as a synchronous one, if asked)."""
        import psycopg

        assert self.primary is not None
        wanted = ("sync",) if synchronous else ("sync", "async", "potential", "quorum")
        deadline = time.monotonic() + timeout
        with psycopg.connect(self.primary.url(), autocommit=True) as conn:
            while True:
                row = conn.execute(
                    "SELECT state, sync_state FROM pg_stat_replication WHERE application_name = %s",
                    (self.name,),
                ).fetchone()
                if row is not None and row[0] == "streaming" and row[1] in wanted:
                    return
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"standby {self.name} is not streaming from {self.primary.url()} after "
                        f"{timeout:g} s (pg_stat_replication: {row})"
                    )
                time.sleep(0.05)

    def pause_replay(self) -> None:
        """``pg_wal_replay_pause()``: WAL still arrives and is flushed, but is not applied, so
        a commit that waits for ``remote_apply`` waits until ``resume_replay()``."""
        self._execute("SELECT pg_wal_replay_pause()")

    def resume_replay(self) -> None:
        self._execute("SELECT pg_wal_replay_resume()")

    def _execute(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(statement)

    def promote(self) -> None:
        """``pg_ctl promote``: it leaves recovery and accepts writes when this returns."""
        self._pg_ctl("promote")

    def stop_primary(self, mode: str = "immediate") -> None:
        """Stop the primary (``immediate``: as a crash; ``fast``: a clean shutdown), keeping
        its data, as a failover's first step."""
        assert self.primary is not None
        self.primary._pg_ctl("stop", "-m", mode)


def start_standby(
    primary: PostgresServer,
    *,
    synchronous: bool = False,
    synchronous_commit: str = "on",
    config: Mapping[str, str] | None = None,
    timeout: float = 60.0,
) -> Standby:
    """Start a hot standby of the running ``primary`` on 127.0.0.1 and wait until it streams.

    ``synchronous=True`` names it in the primary's ``synchronous_standby_names`` and sets the
    primary's ``synchronous_commit`` to ``synchronous_commit`` (the throwaway default is off):
    with ``on`` a commit on the primary returns only once the standby has it; with ``local``
    only the transactions that ask for more wait for it. ``config`` sets ``postgresql.conf``
    values of the standby. Stop it (or use ``with``) when done; the primary is not stopped.
    """
    import psycopg

    workdir = make_workdir("advisory-cron-standby-", primary.run_as)
    port = free_port()
    standby = Standby(
        host="127.0.0.1",
        port=port,
        user=primary.user,
        dbname=primary.dbname,
        datadir=workdir / "data",
        bindir=primary.bindir,
        workdir=workdir,
        run_as=primary.run_as,
        primary=primary,
        name=f"standby_{port}",
    )
    atexit.register(standby.stop)
    try:
        basebackup = [str(primary.bindir / "pg_basebackup"), "-h", primary.host]
        basebackup += ["-p", str(primary.port), "-U", primary.user, "-D", str(standby.datadir)]
        basebackup += ["-R", "-X", "stream", "--no-sync", "-c", "fast"]
        _run(basebackup, workdir, primary.run_as, standby.logfile)
        # The copy carries the primary's postgresql.auto.conf; later lines win.
        settings = {
            "port": str(port),
            "unix_socket_directories": f"'{workdir}'",
            "cluster_name": f"'{standby.name}'",
            "hot_standby": "on",
            **(config or {}),
        }
        with open(standby.datadir / "postgresql.auto.conf", "a") as conf:
            conf.writelines(f"{k} = {v}\n" for k, v in settings.items())
        standby.start_server_only()
        if synchronous:
            with psycopg.connect(primary.url(), autocommit=True) as conn:
                conn.execute(f"ALTER SYSTEM SET synchronous_standby_names = '\"{standby.name}\"'")
                conn.execute(f"ALTER SYSTEM SET synchronous_commit = '{synchronous_commit}'")
                conn.execute("SELECT pg_reload_conf()")
        standby.wait_streaming(timeout, synchronous=synchronous)
    except BaseException:
        standby.stop()
        raise
    return standby
