"""Helpers that start throwaway PostgreSQL / PgBouncer servers for tests and demos."""

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

__all__ = [
    "PG_SOURCES",
    "PgBouncer",
    "PostgresNotFound",
    "PostgresServer",
    "PostgresSetupError",
    "embedded_bindir",
    "find_pg_bindir",
    "find_pgbouncer",
    "parse_database_url",
    "pgbouncer_version",
    "start_pgbouncer",
    "start_postgres",
]
