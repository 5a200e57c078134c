"""``flush`` for the test project: Django's, without the work that would change nothing.

pytest-django empties the database after every transactional test with ``flush``, which
truncates every table, then re-creates the content types and permissions it has just deleted
(``post_migrate``): most tests write to two or three tables, and the re-creation costs dozens
of queries. This one empties only the tables that hold rows, with ``DELETE`` when they hold a
few (a ``TRUNCATE`` makes new files for the table and each index) and with ``TRUNCATE`` (and
the tables whose foreign keys point at them) otherwise; it keeps the content types and
permissions while they are exactly what the last full flush left. Otherwise, and for any
other use, it is Django's own ``flush``.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management.color import no_style
from django.core.management.commands import flush
from django.db import connections
from psycopg import sql

#: Re-created by ``post_migrate`` after a full flush, so kept when unchanged.
KEPT = (ContentType._meta.db_table, Permission._meta.db_table)

#: Up to this many rows, a table is emptied with DELETE; beyond, with TRUNCATE.
FEW = 1000

#: The content of KEPT after the last full flush, per database.
_after_full_flush: dict[str, str] = {}


class Command(flush.Command):
    def handle(self, **options: Any) -> None:
        database = options["database"]
        connection = connections[database]
        if (
            connection.vendor != "postgresql"
            or options["interactive"]
            or options.get("reset_sequences", True)
            or options.get("allow_cascade", False)
            or options.get("inhibit_post_migrate", False)
            or _after_full_flush.get(database) != _fingerprint(connection)
        ):
            super().handle(**options)
            _after_full_flush[database] = _fingerprint(connection)
            return
        tables = connection.introspection.django_table_names(only_existing=True)
        rows = _rows(connection, [table for table in tables if table not in KEPT])
        edges = _foreign_keys(connection)
        truncated = _with_referencing(edges, {table for table, n in rows.items() if n > FEW})
        if not truncated <= set(tables) - set(KEPT):  # Django's flush would fail: say so alike
            super().handle(**options)
            _after_full_flush[database] = _fingerprint(connection)
            return
        statements = connection.ops.sql_flush(no_style(), sorted(truncated)) if truncated else []
        statements += [
            sql.SQL("DELETE FROM {}").format(sql.Identifier(table)).as_string(connection.connection)
            for table in _children_first(edges, set(rows) - truncated)
        ]
        if statements:  # in one transaction: Django's foreign keys are checked at its end
            connection.ops.execute_sql_flush(statements)


def _fingerprint(connection: Any) -> str:
    """A digest of every row of the kept tables."""
    digests = sql.SQL(", ").join(
        sql.SQL("(SELECT md5(string_agg(t::text, ';' ORDER BY t.id)) FROM {} t)").format(
            sql.Identifier(table)
        )
        for table in KEPT
    )
    with connection.cursor() as cursor:
        cursor.execute(sql.SQL("SELECT concat_ws(' ', {})").format(digests))
        return str(cursor.fetchone()[0])


def _rows(connection: Any, tables: list[str]) -> dict[str, int]:
    """The tables that hold rows, and how many (counted up to ``FEW + 1``): one statement."""
    if not tables:
        return {}
    query = sql.SQL(" UNION ALL ").join(
        sql.SQL("SELECT {}, (SELECT count(*) FROM (SELECT FROM {} LIMIT {}) AS t)").format(
            sql.Literal(table), sql.Identifier(table), sql.Literal(FEW + 1)
        )
        for table in tables
    )
    with connection.cursor() as cursor:
        cursor.execute(query)
        return {table: n for table, n in cursor.fetchall() if n}


def _foreign_keys(connection: Any) -> list[tuple[str, str]]:
    """``(referencing, referenced)`` table of every foreign key."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT conrelid::regclass::text, confrelid::regclass::text "
            "FROM pg_constraint WHERE contype = 'f'"
        )
        return list(cursor.fetchall())


def _with_referencing(edges: list[tuple[str, str]], tables: set[str]) -> set[str]:
    """``tables`` and every table whose foreign keys lead to one of them: PostgreSQL refuses
    to truncate a table that a table left alone references, even an empty one."""
    found = set(tables)
    while more := {child for child, parent in edges if parent in found} - found:
        found |= more
    return found


def _children_first(edges: list[tuple[str, str]], tables: set[str]) -> list[str]:
    """``tables`` with each after the tables that reference it (for foreign keys that are
    checked at once rather than at the end of the transaction)."""
    ordered: list[str] = []
    left = set(tables)
    while left:
        referenced = {parent for child, parent in edges if child in left and child != parent}
        ready = sorted(left - referenced) or sorted(left)  # a cycle: left to deferred checks
        ordered += ready
        left -= set(ready)
    return ordered
