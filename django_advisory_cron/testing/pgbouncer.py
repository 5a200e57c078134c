"""Throwaway PgBouncer in front of a ``PostgresServer``.

Session-level advisory locks leak across clients under transaction pooling
(no ``DISCARD ALL`` between clients), so the suite needs a real PgBouncer to
prove the app detects and survives that deployment shape.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .postgres import (
    ENGINE,
    StopsOnExit,
    free_port,
    log_tail,
    make_workdir,
    service_user,
    wait_until_accepting,
)

__all__ = ["PgBouncer", "find_pgbouncer", "pgbouncer_version", "start_pgbouncer"]


def find_pgbouncer() -> str | None:
    """The pgbouncer executable: ``PATH`` first, then Debian's ``/usr/sbin``."""
    found = shutil.which("pgbouncer")
    if found:
        return found
    if os.access("/usr/sbin/pgbouncer", os.X_OK):
        return "/usr/sbin/pgbouncer"
    return None


def pgbouncer_version(binary: str | None = None) -> str | None:
    """e.g. ``"1.18.0"``; None when pgbouncer is not installed."""
    binary = binary or find_pgbouncer()
    if binary is None:
        return None
    out = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    first = out.splitlines()[0] if out else ""
    return first.removeprefix("PgBouncer ").strip() or None


class Upstream(Protocol):
    """Where PgBouncer forwards to: a ``PostgresServer`` or any server's address."""

    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def user(self) -> str: ...
    @property
    def dbname(self) -> str: ...


@dataclass
class PgBouncer(StopsOnExit):
    """A running PgBouncer daemon; stop it (or use ``with``) when done."""

    host: str
    port: int
    pool_mode: str
    workdir: Path
    user: str = "postgres"
    dbname: str = "postgres"
    stopped: bool = field(default=False, init=False, repr=False, compare=False)

    @property
    def logfile(self) -> Path:
        return self.workdir / "pgbouncer.log"

    @property
    def pidfile(self) -> Path:
        return self.workdir / "pgbouncer.pid"

    def url(self, dbname: str | None = None) -> str:
        return f"postgresql://{self.user}@{self.host}:{self.port}/{dbname or self.dbname}"

    def conninfo(self, dbname: str | None = None) -> dict[str, Any]:
        """A Django ``DATABASES`` entry that connects through the pooler."""
        entry: dict[str, Any] = {
            "ENGINE": ENGINE,
            "NAME": dbname or self.dbname,
            "USER": self.user,
            "PASSWORD": "",
            "HOST": self.host,
            "PORT": str(self.port),
        }
        if self.pool_mode != "session":
            # Named server-side cursors do not survive a transaction boundary.
            entry["DISABLE_SERVER_SIDE_CURSORS"] = True
        return entry

    def pid(self) -> int | None:
        try:
            return int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM the daemon, wait for it to exit, delete the work dir. Idempotent.

        SIGKILL follows after ``timeout``: from PgBouncer 1.23 SIGTERM waits for
        clients to disconnect, so a test leaking a connection must not hang here.
        """
        if self.stopped:
            return
        self.stopped = True
        atexit.unregister(self.stop)
        pid = self.pid()
        if pid is not None and _alive(pid):
            _signal(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _alive(pid):
                _signal(pid, signal.SIGKILL)
        shutil.rmtree(self.workdir, ignore_errors=True)


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie counts as gone.

    ``-d`` daemonizes, so the process is reparented and may sit unreaped (as a
    zombie) under a container init that never calls wait().
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] != "Z"


def start_pgbouncer(
    server: Upstream,
    pool_mode: str = "transaction",
    pool_size: int = 5,
    server_reset_query: str | None = None,
    extra: dict[str, Any] | None = None,
    timeout: float = 15.0,
) -> PgBouncer:
    """Start PgBouncer (``-d``) on a free 127.0.0.1 port in front of ``server``.

    ``server_reset_query=None`` keeps PgBouncer's default (``DISCARD ALL``,
    which only runs in session mode). ``extra`` adds ``[pgbouncer]`` settings.
    """
    binary = find_pgbouncer()
    if binary is None:
        raise RuntimeError("pgbouncer not found: install it (e.g. `apt-get install pgbouncer`).")
    run_as = service_user()
    workdir = make_workdir("advisory-cron-pgbouncer-", run_as)
    bouncer = PgBouncer(
        host="127.0.0.1",
        port=free_port(),
        pool_mode=pool_mode,
        workdir=workdir,
        user=server.user,
        dbname=server.dbname,
    )
    atexit.register(bouncer.stop)
    settings: dict[str, Any] = {
        "listen_addr": "127.0.0.1",
        "listen_port": bouncer.port,
        "unix_socket_dir": "",
        "auth_type": "trust",
        # Still consulted under trust: unknown users are rejected.
        "auth_file": workdir / "userlist.txt",
        "admin_users": server.user,
        "pool_mode": pool_mode,
        "default_pool_size": pool_size,
        "max_client_conn": 500,
        "ignore_startup_parameters": "extra_float_digits,options",
        # Default 15 s: after a PostgreSQL restart the pool would stay dead that long.
        "server_login_retry": 1,
        "server_connect_timeout": 5,
        "logfile": bouncer.logfile,
        "pidfile": bouncer.pidfile,
    }
    if server_reset_query is not None:
        settings["server_reset_query"] = server_reset_query
    settings.update(extra or {})
    ini = workdir / "pgbouncer.ini"
    ini.write_text(
        f"[databases]\n* = host={server.host} port={server.port}\n\n[pgbouncer]\n"
        + "".join(f"{key} = {value}\n" for key, value in settings.items())
    )
    (workdir / "userlist.txt").write_text(f'"{server.user}" ""\n')

    cmd = [binary, "-d", *(["-u", run_as] if run_as else []), str(ini)]
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir)
        if result.returncode != 0:
            raise RuntimeError(
                f"{' '.join(cmd)} failed with exit code {result.returncode}\n"
                f"{result.stdout}{result.stderr}\n--- log tail ---\n{log_tail(bouncer.logfile)}"
            )
        try:
            wait_until_accepting(bouncer.url(), timeout)
        except RuntimeError as exc:
            raise RuntimeError(
                f"{exc}\n--- pgbouncer log tail ---\n{log_tail(bouncer.logfile)}"
            ) from exc
    except BaseException:
        bouncer.stop()
        raise
    return bouncer
