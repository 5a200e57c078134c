"""Shared fixtures: real PostgreSQL (and PgBouncer), real subprocesses, no mocks."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from django.db import connection, connections
from psycopg import sql

from django_advisory_cron.db.connections import close_lock_connections
from django_advisory_cron.testing import (
    PgBouncer,
    PostgresServer,
    find_pgbouncer,
    parse_database_url,
    start_pgbouncer,
)
from tests.celery_servers import RedisServer, redis_server
from tests.registries import fresh_registry  # noqa: F401  (a fixture the unit tier shares)
from tests.warm_start import run_manage, start_manage

ROOT = Path(__file__).resolve().parent.parent
MANAGE = ROOT / "tests" / "manage.py"


# -- one server per process: xdist workers each start their own (tests/settings.py) -----------


def _given_database_url() -> bool:
    """Whether the user gave DATABASE_URL (no throwaway cluster was started for this run)."""
    from tests import settings

    return settings.THROWAWAY is None and not os.environ.get("PYTEST_XDIST_WORKER")


def _given_args(config: pytest.Config) -> list[str]:
    """The options given on the command line or in PYTEST_ADDOPTS (not pyproject's)."""
    given = [*config.invocation_params.args, *os.environ.get("PYTEST_ADDOPTS", "").split()]
    return [str(arg) for arg in given]


def _asked_for_workers(config: pytest.Config) -> bool:
    """Whether ``-n`` was given on the command line or in PYTEST_ADDOPTS (not pyproject's)."""
    return any(
        arg == "-n" or arg.startswith("--numprocesses") or (arg[:2] == "-n" and arg[2:3] != "-")
        for arg in _given_args(config)
    )


def _asked_for_markers(config: pytest.Config) -> bool:
    """Whether ``-m`` was given on the command line or in PYTEST_ADDOPTS (not pyproject's)."""
    return any(arg.startswith("-m") for arg in _given_args(config))


def _names_test_files(config: pytest.Config) -> bool:
    """Whether the command line names test files or tests only (no directory)."""
    if config.args_source != pytest.Config.ArgsSource.ARGS or not config.args:
        return False
    here = config.invocation_params.dir
    return all(Path(here, arg.split("::")[0]).is_file() for arg in config.args)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Run serially on a server the user gave: tests restart the server and read its locks
    and sessions server-wide, so parallel workers would need a server each. Tests named by
    file or id also run serially (starting workers and their servers would take longer),
    unless ``-n`` is given, and the ``minutes`` tests among them run too, unless ``-m`` is
    given (pyproject's ``-m "not minutes"`` is for the whole suite)."""
    if _names_test_files(config) and not _asked_for_markers(config):
        config.option.markexpr = ""
    if not getattr(config.option, "numprocesses", None):
        return
    if _given_database_url() or (_names_test_files(config) and not _asked_for_workers(config)):
        config.option.numprocesses = 0
        config.option.dist = "no"


def pytest_report_header(config: pytest.Config) -> str | None:
    if _given_database_url():
        return "database: DATABASE_URL given, so the tests run serially on that one server"
    return None


def pytest_configure(config: pytest.Config) -> None:
    """An xdist worker starts with SIGINT ignored (the controller takes Ctrl-C); the tests
    that send a real SIGINT, to this process or to the subprocesses it starts (which inherit
    an ignored signal), need Python's default: KeyboardInterrupt. The tests that share a
    module-scoped fixture are grouped (``ModuleGroups``)."""
    config.pluginmanager.register(ModuleGroups(), "advisory-cron-module-groups")
    if os.environ.get("PYTEST_XDIST_WORKER") and signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


#: The share of the other tests among which the ``slow`` ones are spread (see below).
SLOW_SPREAD = 0.6
#: The unit tier: its tests take milliseconds, so they count for nothing in that spread.
UNIT_TIER = Path(__file__).parent / "unit"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked ``slow`` (those waiting for real ticks) are spread evenly over the
    first 60 % of the other tests outside the unit tier. Under xdist (``--dist loadgroup``: a
    test or two handed out at a time, in this order) they then share the workers with tests
    that keep the CPUs busy: all of them first kept every worker waiting on ticks, the CPUs
    half idle for a minute, and one started late would end the run alone. Otherwise the order
    stays (pytest-django's included); every worker sorts alike.

    The slow tests are taken module by module in turn (each module's first, then each one's
    second...): a module's fleets, dealt out side by side, started their processes in the same
    seconds and then all waited together."""
    slow = _modules_in_turn([item for item in items if item.get_closest_marker("slow")])
    rest = [item for item in items if item.get_closest_marker("slow") is None]
    weights = [0 if item.path.is_relative_to(UNIT_TIER) else 1 for item in rest]
    step = sum(weights) * SLOW_SPREAD / max(len(slow), 1)
    merged: list[pytest.Item] = []
    placed, passed = 0, 0
    for item, weight in zip(rest, weights, strict=True):
        while placed < len(slow) and passed >= placed * step:
            merged.append(slow[placed])
            placed += 1
        merged.append(item)
        passed += weight
    merged.extend(slow[placed:])
    items[:] = merged


def _modules_in_turn(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items``, each module's first, then each module's second, and so on."""
    taken: Counter[Path] = Counter()
    turns = []
    for position, item in enumerate(items):
        turns.append((taken[item.path], position))
        taken[item.path] += 1
    return [items[position] for _, position in sorted(turns)]


class ModuleGroups:
    """The tests that use a module-scoped fixture (a browser and its live server, a standby,
    servers of their own) run on one worker, one after another (``--dist loadgroup``), so the
    fixture is made once: dealt out one by one, they were spread over the workers, and each
    worker made it again, often more than once (a worker that runs another module's test in
    between tears it down). A plugin of its own, so that its hook runs first: pytest-xdist
    reads the groups in a hook of the same name."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            if isinstance(item, pytest.Function) and any(
                definitions[-1].scope == "module"
                for definitions in item._fixtureinfo.name2fixturedefs.values()
            ):
                item.add_marker(pytest.mark.xdist_group(f"module-{item.path.stem}"))


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """The xdist controller runs no test: its cluster goes, each worker starts its own."""
    from tests import settings

    controller = not os.environ.get("PYTEST_XDIST_WORKER")
    if controller and getattr(session.config.option, "tx", None) and settings.THROWAWAY:
        settings.THROWAWAY.stop()


# -- one broken connection stays one failure ----------------------------------------------------


def _connection_problems(wrapper: Any, depth: int) -> list[str]:
    """What is wrong with a Django connection that should be back at ``depth`` atomic blocks
    (0 outside pytest-django's ``db`` fixture), without sending it a query."""
    problems = []
    if len(wrapper.atomic_blocks) > depth:
        problems.append(
            f"left {len(wrapper.atomic_blocks) - depth} transaction.atomic() block(s) open"
        )
    if wrapper.closed_in_transaction:
        problems.append("was closed inside a transaction")
    raw = wrapper.connection
    if depth == 0 and raw is not None:
        if getattr(raw, "closed", False) or getattr(raw, "broken", False):
            problems.append("was left broken (its server session is gone)")
        elif raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            problems.append("was left inside a transaction")
        elif not wrapper.autocommit:
            problems.append("was left with autocommit off")
    return problems


def _reset_connection(wrapper: Any, depth: int) -> None:
    """Unwind ``wrapper`` to ``depth`` atomic blocks (rolling back), as an exception leaving
    each block would; at depth 0 close it, so the next use connects afresh."""
    failure = RuntimeError("the test left this block open")
    while len(wrapper.atomic_blocks) > depth:
        block = wrapper.atomic_blocks[-1]
        try:
            block.__exit__(RuntimeError, failure, None)
        except Exception:
            if wrapper.atomic_blocks and wrapper.atomic_blocks[-1] is block:
                wrapper.atomic_blocks.pop()
    if depth:
        return
    wrapper.atomic_blocks.clear()
    wrapper.savepoint_ids.clear()
    wrapper.in_atomic_block = False
    wrapper.needs_rollback = False
    wrapper.closed_in_transaction = False
    wrapper.commit_on_exit = True
    try:
        wrapper.close()
    except Exception:
        wrapper.connection = None


def _check_connections(depths: dict[str, int], when: str) -> None:
    found = []
    for wrapper in connections.all(initialized_only=True):
        if wrapper.vendor != "postgresql":
            continue
        depth = depths.get(wrapper.alias, 0)
        problems = _connection_problems(wrapper, depth)
        if problems:
            _reset_connection(wrapper, depth)
            found.append(f"Django's connection {wrapper.alias!r} {' and '.join(problems)}")
    if found:
        pytest.fail(
            f"{'; '.join(found)} {when}. It was rolled back and closed so that later tests "
            "start clean: a test that breaks a connection on purpose should use a connection "
            "(or process) of its own, and leave no transaction.atomic() block open.",
            pytrace=False,
        )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Captured text with a lone surrogate (tests that log what ``os.fsdecode`` makes of an
    undecodable byte) is escaped before pytest-xdist sends the report to the controller: its
    channel encodes strictly as UTF-8, and a report it cannot send ends the worker's session.
    Since pytest 9.2 the log capture also reads loggers that do not propagate."""
    report.sections = [
        (title, text.encode("utf-8", "backslashreplace").decode("utf-8"))
        for title, text in report.sections
    ]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Fail the test, not the ones after it, when it leaves Django's connection unusable."""
    depths = {
        wrapper.alias: len(wrapper.atomic_blocks)
        for wrapper in connections.all(initialized_only=True)
    }
    return (yield from _checked(depths, "at the end of the test"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After every fixture is torn down, Django's connections are outside any atomic block."""
    return (yield from _checked({}, "after its fixtures were torn down"))


def _checked(depths: dict[str, int], when: str) -> Generator[None, None, None]:
    """Run the wrapped phase, then check (and reset) the connections; an error the phase
    raised anyway is kept, the connections are reset all the same."""
    try:
        result = yield
    except BaseException:
        with contextlib.suppress(pytest.fail.Exception):
            _check_connections(depths, when)
        raise
    _check_connections(depths, when)
    return result


def test_database_url() -> str:
    """URL of the database the tests run against (pytest-django's ``test_...`` database)."""
    settings_dict = connection.settings_dict
    return (
        f"postgresql://{settings_dict['USER']}@{settings_dict['HOST']}:{settings_dict['PORT']}"
        f"/{settings_dict['NAME']}"
    )


@pytest.fixture
def db_url(transactional_db: None) -> str:
    return test_database_url()


@pytest.fixture
def raw_connect(db_url: str) -> Iterator[Callable[..., psycopg.Connection[Any]]]:
    """Open plain autocommit psycopg connections to the test database; closed afterwards."""
    opened: list[psycopg.Connection[Any]] = []

    def connect(url: str | None = None, **kwargs: Any) -> psycopg.Connection[Any]:
        conn = psycopg.connect(url or db_url, autocommit=True, **kwargs)
        opened.append(conn)
        return conn

    yield connect
    for conn in opened:
        conn.close()


def manage_env(url: str, **extra: str) -> dict[str, str]:
    env = {**os.environ, "DATABASE_URL": url, "PYTHONUNBUFFERED": "1", **extra}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return env


@pytest.fixture
def manage(db_url: str) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run ``tests/manage.py`` in a real subprocess against the test database, forked from a
    warm starter (tests/warm_start.py) where one can serve: a short command to completion."""

    def run(
        *args: str, url: str | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return run_manage(*args, env=manage_env(url or db_url), timeout=timeout)

    return run


@pytest.fixture
def spawn(db_url: str) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start ``tests/manage.py`` subprocesses without waiting, forked from a warm starter
    (tests/warm_start.py) where one can serve; killed at teardown if alive."""
    started: list[subprocess.Popen[str]] = []

    def start(
        *args: str, url: str | None = None, env: dict[str, str] | None = None
    ) -> subprocess.Popen[str]:
        process = start_manage(*args, env=manage_env(url or db_url, **(env or {})))
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=30)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None) -> Iterator[None]:
    """pytest-django's test database; this process's idle lock connections are closed before it
    is dropped (``DROP DATABASE`` refuses while anyone is connected)."""
    yield
    close_lock_connections()


@pytest.fixture(scope="session")
def postgres_server() -> PostgresServer | None:
    """The throwaway cluster started by the settings (None when DATABASE_URL was given)."""
    from tests import settings

    return settings.THROWAWAY


@dataclass(frozen=True)
class Upstream:
    host: str
    port: int
    user: str
    dbname: str


def _pgbouncer(mode: str, django_db_setup: None) -> Iterator[PgBouncer]:
    if find_pgbouncer() is None:
        if os.environ.get("CI"):
            pytest.fail("pgbouncer is not installed, and CI must run the PgBouncer tests")
        pytest.skip("pgbouncer binary not installed")
    settings_dict = connection.settings_dict
    upstream = Upstream(
        settings_dict["HOST"],
        int(settings_dict["PORT"]),
        settings_dict["USER"],
        settings_dict["NAME"],
    )
    bouncer = start_pgbouncer(upstream, pool_mode=mode, pool_size=3)
    yield bouncer
    bouncer.stop()


@pytest.fixture(scope="session")
def pgbouncer_transaction(django_db_setup: None, django_db_blocker: Any) -> Iterator[PgBouncer]:
    """A real PgBouncer in transaction pooling mode in front of the test database."""
    yield from _pgbouncer("transaction", django_db_setup)


@pytest.fixture(scope="session")
def pgbouncer_session(django_db_setup: None, django_db_blocker: Any) -> Iterator[PgBouncer]:
    """A real PgBouncer in session pooling mode in front of the test database."""
    yield from _pgbouncer("session", django_db_setup)


def database_from_url(url: str) -> dict[str, Any]:
    """A Django DATABASES entry for ``url`` with the test database's settings filled in."""
    return {**connection.settings_dict, **parse_database_url(url)}


@contextlib.contextmanager
def scratch_database(template: str = "") -> Iterator[str]:
    """A new database on the test server, empty or a copy of ``template`` (a database no one
    is connected to), dropped afterwards; its URL."""
    server_url = os.environ["DATABASE_URL"]  # exported by tests/settings.py
    name = f"scratch_{uuid.uuid4().hex[:12]}"
    create = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template:
        create += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
    with psycopg.connect(server_url, autocommit=True) as conn:
        # A command that used the template has exited, but its backend may not have yet.
        for _attempt in range(100):
            try:
                conn.execute(create)
                break
            except psycopg.errors.ObjectInUse:
                time.sleep(0.05)
        else:
            conn.execute(create)
    yield urlunsplit(urlsplit(server_url)._replace(path=f"/{name}"))
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@pytest.fixture
def scratch_database_url() -> Iterator[str]:
    """A new, empty database on the test server, dropped afterwards (for the demo tests)."""
    with scratch_database() as url:
        yield url


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    """A throwaway Redis (Debian's ``redis-server``) on a free loopback port: Celery's broker
    in the Celery delivery tests."""
    with redis_server() as server:
        yield server
