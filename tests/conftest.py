"""Shared fixtures: real PostgreSQL (and PgBouncer), real subprocesses, no mocks."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from django.db import connection
from psycopg import sql

from django_advisory_cron import registry
from django_advisory_cron.lockconn import close_lock_connections
from django_advisory_cron.testing import (
    PgBouncer,
    PostgresServer,
    find_pgbouncer,
    parse_database_url,
    start_pgbouncer,
)

ROOT = Path(__file__).resolve().parent.parent
MANAGE = ROOT / "tests" / "manage.py"


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
    """Run ``tests/manage.py`` in a real subprocess against the test database."""

    def run(
        *args: str, url: str | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(MANAGE), *args],
            env=manage_env(url or db_url),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    return run


@pytest.fixture
def spawn(db_url: str) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start ``tests/manage.py`` subprocesses without waiting; killed at teardown if alive."""
    started: list[subprocess.Popen[str]] = []

    def start(
        *args: str, url: str | None = None, env: dict[str, str] | None = None
    ) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, str(MANAGE), *args],
            env=manage_env(url or db_url, **(env or {})),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=30)


@pytest.fixture
def fresh_registry() -> Iterator[None]:
    """Let a test register jobs; they and their clashes are removed afterwards."""
    before = {job.name for job in registry.all()}
    yield
    for job in registry.all():
        if job.name not in before:
            registry.unregister(job.name)
    registry.clashes.clear()


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


@pytest.fixture
def scratch_database_url() -> Iterator[str]:
    """A new, empty database on the test server, dropped afterwards (for the demo tests)."""
    server_url = os.environ["DATABASE_URL"]  # exported by tests/settings.py
    name = f"scratch_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield urlunsplit(urlsplit(server_url)._replace(path=f"/{name}"))
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
