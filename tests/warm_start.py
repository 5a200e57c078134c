"""A warm starter for ``tests/manage.py``: one process per environment imports Django and
this package and runs ``django.setup()`` (its settings read with exactly the environment of the
commands it will start), then forks one child per command. Each command is still a real,
separate OS process with its own argv, stdio, exit code or death by signal; it skips only the
interpreter start and the imports (about 0.6 s a command, most of what the command-line tests
cost). The ``manage`` fixture uses it for short commands, the ``spawn`` fixture for commands
left running (workers, signals): its processes are seen as ``subprocess.Popen`` shows a child,
their exit status told by the starter, which is their parent. What
children of one starter share that separate starts would not: the interpreter's hash seed (so
sets of strings iterate in the same order in each), and what the starter imported.

Run as a script, this module is the starter: it reads the environment it was given, prints
``ready`` (or why it cannot serve), then forks a child per request on its socket. A child never
inherits a database connection: the starter refuses to serve when ``django.setup()`` opened one
or started a thread."""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import locale
import os
import select
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
MANAGE = ROOT / "tests" / "manage.py"
#: The environment a starter could not reproduce in its children: a preloaded library (such
#: as libfaketime) reads its state when the process starts.
PLAIN_START_ONLY = ("LD_PRELOAD", "FAKETIME")
#: The starters kept per test process, one per environment, the oldest stopped first.
KEPT = 3
#: What no command reads and pytest changes at every test: not a reason for another starter
#: (each child gets its request's environment in full all the same).
NOT_READ = ("PYTEST_CURRENT_TEST",)
_REQUEST_SIZE = 1 << 20
#: What the base imports before any settings exist (what every command's start imports, none
#: of it reading the settings when imported): a starter forked from it for a new environment
#: skips the interpreter's start and these imports, and runs only ``django.setup()``.
PRELOADED = (
    "django.core.management",
    "django.db.models",
    "django.http",
    "django.urls",
    "django.forms",
    "django.template",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.test",
    "django.db.backends.postgresql.base",
    "psycopg",
)
#: Read by the interpreter or by the preloaded modules when they start: starters are forked
#: only from a base started with the same values.
READ_AT_START = ("PYTHON", "PSYCOPG")


# -- the starter (a process of its own) --------------------------------------------------------


def _prepare() -> str | None:
    """Set the process up as ``tests/manage.py`` does, up to the command; why not, if it
    cannot serve children safely."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    try:
        import django
        from django.core.management import execute_from_command_line  # noqa: F401
        from django.db import connections

        django.setup()
    except BaseException as error:  # the command itself will report it, started plainly
        return f"django.setup() failed: {error!r}"
    if any(wrapper.connection is not None for wrapper in connections.all()):
        return "django.setup() opened a database connection"
    if threading.active_count() != 1:
        return "django.setup() started a thread"
    return None


def _serve(path: str) -> dict[str, Any] | None:
    """Answer requests on the socket at ``path`` until stdin closes (the test process ended).
    Returns in a forked child only: its request (argv, environment, working directory)."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    server.bind(path)
    server.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(server, selectors.EVENT_READ, "request")
    selector.register(sys.stdin, selectors.EVENT_READ, "parent")
    print("ready", flush=True)
    while True:
        for key, _ in selector.select():
            if key.data == "parent":
                os._exit(0)
            if key.data == "request":
                conn, _ = server.accept()
                message, fds, _, _ = socket.recv_fds(conn, _REQUEST_SIZE, 3)
                request = json.loads(message)
                sys.stdout.flush()
                sys.stderr.flush()
                # Out of the collector's sight: a child that walked (and so copied) every
                # inherited object when exiting took 0.3 to 0.5 s, a fresh process's start.
                gc.freeze()
                pid = os.fork()
                if pid == 0:
                    for other in selector.get_map().values():
                        if isinstance(other.data, tuple):  # another child's pidfd and socket
                            os.close(other.fd)
                            other.data[1].close()
                    selector.close()
                    server.close()
                    conn.close()
                    for target, fd in enumerate(fds):
                        os.dup2(fd, target)
                        os.close(fd)
                    return dict(request)
                for fd in fds:
                    os.close(fd)
                selector.register(os.pidfd_open(pid), selectors.EVENT_READ, (pid, conn))
                with contextlib.suppress(OSError):
                    conn.send(json.dumps({"pid": pid}).encode())
                continue
            pid, conn = key.data
            selector.unregister(key.fileobj)
            os.close(key.fd)
            _, status = os.waitpid(pid, 0)
            with contextlib.suppress(OSError):
                conn.send(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode())
            conn.close()


# -- the client (the test process) --------------------------------------------------------------


class Starter:
    """One running starter process, for one environment: forked from the base for its
    interpreter settings where one serves, else started plainly."""

    def __init__(
        self, env: dict[str, str], *, base: Starter | None = None, is_base: bool = False
    ) -> None:
        self.path = os.path.join(tempfile.mkdtemp(prefix="warm-"), "s")
        self.process: subprocess.Popen[str] | None = None
        forked = None if base is None else base.fork_starter(env, self.path)
        if forked is None:
            self.process = subprocess.Popen(
                [sys.executable, __file__, *(["--base"] if is_base else []), self.path],
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            assert self.process.stdin is not None and self.process.stdout is not None
            forked = self.process.stdin, self.process.stdout
        #: Closed, it tells the starter to exit; the starter's "ready" line comes on the other.
        self._stdin, self._stdout = forked
        self.ready = self._stdout.readline() == "ready\n"

    def fork_starter(self, env: dict[str, str], path: str) -> tuple[IO[str], IO[str]] | None:
        """Fork a starter for ``env`` serving on ``path`` (this being a base): its stdin and
        stdout; None when this base is gone."""
        conn = self._connect()
        if conn is None:
            return None
        in_read, in_write = os.pipe()
        out_read, out_write = os.pipe()
        try:
            request = json.dumps({"env": env, "cwd": os.getcwd(), "path": path}).encode()
            with open(os.devnull, "wb") as devnull:
                socket.send_fds(conn, [request], [in_read, out_write, devnull.fileno()])
        except OSError:
            for fd in (in_write, out_read):
                os.close(fd)
            self.ready = False
            return None
        finally:
            os.close(in_read)
            os.close(out_write)
            conn.close()
        return open(in_write, "w"), open(out_read)

    def stop(self) -> None:
        """Tell the starter to exit (it then forks nothing more; its commands go on), and wait
        a while for it to."""
        self._stdin.close()
        if self.process is not None:
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        else:
            selected = select.select([self._stdout], [], [], 10)[0]
            if selected:
                self._stdout.read()  # the end of its stdout: it has exited
        self._stdout.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
            os.rmdir(os.path.dirname(self.path))

    def run(
        self, argv: list[str], env: dict[str, str], timeout: float
    ) -> subprocess.CompletedProcess[str] | None:
        """Run ``tests/manage.py`` with ``argv`` in a forked child, as ``subprocess.run``
        with ``capture_output=True, text=True`` would; None, having run nothing, when the
        starter is gone."""
        process = self.start(argv, env)
        if process is None:
            return None
        try:
            output, errors = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
        return subprocess.CompletedProcess(process.args, process.returncode, output, errors)

    def _connect(self) -> socket.socket | None:
        """A connection to the starter's socket; None when the starter is gone."""
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            conn.connect(self.path)
        except OSError:
            conn.close()
            self.ready = False
            return None
        return conn

    def start(self, argv: list[str], env: dict[str, str]) -> WarmProcess | None:
        """Start ``tests/manage.py`` with ``argv`` in a forked child without waiting for it, as
        ``subprocess.Popen`` with ``stdout=PIPE, stderr=PIPE, text=True`` would; None, having
        started nothing, when the starter is gone."""
        conn = self._connect()
        if conn is None:
            return None
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        try:
            request = json.dumps({"argv": argv, "env": env, "cwd": os.getcwd()}).encode()
            socket.send_fds(conn, [request], [0, out_write, err_write])
        finally:
            os.close(out_write)
            os.close(err_write)
        try:
            pid = json.loads(conn.recv(_REQUEST_SIZE))["pid"]
        except (OSError, ValueError, KeyError):
            conn.close()
            os.close(out_read)
            os.close(err_read)
            self.ready = False
            return None
        return WarmProcess([sys.executable, *argv], pid, conn, out_read, err_read)


class WarmProcess(subprocess.Popen[str]):
    """A command forked by a starter, seen as ``subprocess.Popen`` shows a child started with
    ``stdout=PIPE, stderr=PIPE, text=True``: its pid is the command's own process (signals
    reach it directly), its pipes its own stdout and stderr; its exit status is told by the
    starter, which is the process's parent. Every method the tests call is its own (none of
    ``Popen``'s internals is used: they would wait for a child of this process)."""

    def __init__(self, args: list[str], pid: int, conn: socket.socket, out: int, err: int) -> None:
        self.args = args
        self.pid = pid
        self.returncode: Any = None
        self.stdin = None
        encoding = locale.getpreferredencoding(False)
        self.stdout = open(out, encoding=encoding, closefd=True)  # noqa: SIM115
        self.stderr = open(err, encoding=encoding, closefd=True)  # noqa: SIM115
        #: ``Popen.__del__`` reads it: nothing of ``Popen``'s own is to be reaped here.
        self._child_created = False
        self._conn = conn
        #: What ``communicate`` has read so far, kept across a timeout as ``Popen`` keeps it.
        self._read: dict[int, list[bytes]] = {out: [], err: []}
        self._open = [out, err]

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._conn], [], [], 0)[0]:
            self._status()
        return None if self.returncode is None else int(self.returncode)

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._conn], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self._status()
        return int(self.returncode)

    def _status(self) -> None:
        """Read the exit status the starter sends once the process has ended."""
        try:
            message = self._conn.recv(_REQUEST_SIZE)
            self.returncode = json.loads(message)["returncode"] if message else -signal.SIGKILL
        except (OSError, ValueError, KeyError):
            self.returncode = -signal.SIGKILL  # the starter is gone, and the child with it
        self._conn.close()

    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[str, str]:
        if input:
            raise ValueError("a warm-started command reads no input")
        deadline = None if timeout is None else time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            for fd in self._open:
                selector.register(fd, selectors.EVENT_READ)
            while selector.get_map():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(self.args, timeout or 0)
                for key, _ in selector.select(left):
                    data = os.read(key.fd, 1 << 16)
                    if data:
                        self._read[key.fd].append(data)
                    else:
                        selector.unregister(key.fd)
                        self._open.remove(key.fd)
        self._close_pipes()
        left = None if deadline is None else max(deadline - time.monotonic(), 0.001)
        self.wait(left)
        out, err = (b"".join(chunks) for chunks in self._read.values())
        return _text(out), _text(err)

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def __exit__(self, *exc: object) -> None:
        self._close_pipes()
        self.wait()

    def _close_pipes(self) -> None:
        for pipe in (self.stdout, self.stderr):
            if pipe is not None:
                pipe.close()


def _text(data: bytes) -> str:
    """Bytes as ``subprocess.run(text=True)`` decodes them: the locale's encoding, universal
    newlines."""
    text = data.decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


_starters: dict[tuple[tuple[str, str], ...], Starter] = {}
#: The bases, one per set of values the interpreter reads when it starts.
_bases: dict[tuple[tuple[str, str], ...], Starter] = {}
_lock = threading.Lock()


def _base(env: dict[str, str]) -> Starter | None:
    """The running base for ``env``'s interpreter settings (started now if there is none);
    None when it could not serve (it is not started again: starters start plainly then)."""
    key = tuple(sorted(item for item in env.items() if item[0].startswith(READ_AT_START)))
    base = _bases.get(key)
    if base is None:
        base = _bases[key] = Starter(env, is_base=True)
    return base if base.ready else None


def _starter(env: dict[str, str]) -> Starter | None:
    """The running starter for ``env`` (started now if there is none); None when commands in
    that environment must start plainly."""
    if sys.platform != "linux" or any(name.startswith(PLAIN_START_ONLY) for name in env):
        return None
    key = tuple(sorted(item for item in env.items() if item[0] not in NOT_READ))
    with _lock:
        if not _starters:
            atexit.register(stop_all)
        starter = _starters.pop(key, None) or Starter(env, base=_base(env))
        _starters[key] = starter  # the most recently used last
        while len(_starters) > KEPT:
            _starters.pop(next(iter(_starters))).stop()
    return starter if starter.ready else None


def stop_all() -> None:
    """Stop every starter (when the test process exits)."""
    with _lock:
        while _starters:
            _starters.popitem()[1].stop()
        while _bases:
            _bases.popitem()[1].stop()


def _settings_given(args: tuple[str, ...]) -> str | None:
    """The settings module ``--settings`` names on the command line, if it does."""
    for at, arg in enumerate(args):
        if arg == "--settings" and at + 1 < len(args):
            return args[at + 1]
        if arg.startswith("--settings="):
            return arg.removeprefix("--settings=")
    return None


def _starter_for(args: tuple[str, ...], env: dict[str, str]) -> Starter | None:
    """The starter for a command with ``args`` in ``env``; None when it starts plainly. A
    starter reads its settings before any command: ``--settings`` picks the starter whose
    environment names that module (as Django's own handling of the option sets it),
    ``--pythonpath`` starts plainly."""
    if any(arg.startswith("--pythonpath") for arg in args):
        return None
    settings = _settings_given(args)
    return _starter(env if settings is None else {**env, "DJANGO_SETTINGS_MODULE": settings})


def run_manage(*args: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """``python tests/manage.py ARGS`` in a real process of its own, forked from a warm starter
    for ``env`` where one can serve (see ``_starter_for``), else started plainly."""
    starter = _starter_for(args, env)
    if starter is None:
        return subprocess.run(
            [sys.executable, str(MANAGE), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    done = starter.run([str(MANAGE), *args], env, timeout)
    return done if done is not None else run_manage(*args, env=env, timeout=timeout)


def start_manage(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """``python tests/manage.py ARGS`` started without waiting, as ``subprocess.Popen`` with
    ``stdout=PIPE, stderr=PIPE, text=True``: forked from a warm starter for ``env`` where one
    can serve (see ``run_manage``), else started plainly."""
    starter = _starter_for(args, env)
    process = None if starter is None else starter.start([str(MANAGE), *args], env)
    if process is not None:
        return process
    return subprocess.Popen(
        [sys.executable, str(MANAGE), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _as_base(path: str) -> Any:
    """Serve as a base: import what every command imports, then fork a starter per request
    (its environment and socket in the request)."""
    import importlib

    for module in PRELOADED:
        with contextlib.suppress(Exception):  # one that needs the settings is left to setup
            importlib.import_module(module)
    from django.conf import settings

    if settings.configured or threading.active_count() != 1:
        print("the preloaded modules read the settings or started a thread", flush=True)
        return None
    request = _serve(path)
    if request is None:
        return None
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    return _main(request["path"])


def _main(path: str) -> Any:
    refused = _prepare()
    if refused:
        print(refused, flush=True)
        return None
    child = _serve(path)
    if child is None:
        return None
    sys.argv = child["argv"]
    os.environ.clear()
    os.environ.update(child["env"])
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")  # as tests/manage.py
    os.chdir(child["cwd"])
    import django
    from django.core.management import execute_from_command_line

    # The starter's ``django.setup()`` is the command's: run again, it would configure logging
    # anew once the jobs' modules are imported, and ``disable_existing_loggers`` would then
    # disable their loggers, which a fresh process creates after configuring logging.
    django.setup = lambda set_prefix=True: None

    return execute_from_command_line(sys.argv)


if __name__ == "__main__":
    if sys.argv[1] == "--base":
        _as_base(sys.argv[2])
    else:
        _main(sys.argv[1])
