"""``flush`` for the test project: Django's, without the work that would change nothing.

pytest-django empties the database after every transactional test with ``flush``, which
truncates every table, then re-creates the content types and permissions it has just deleted
(``post_migrate``): most tests write to two or three tables, and the re-creation costs dozens
of queries. This one truncates only the tables that hold rows (with the tables whose foreign
keys point at them) and keeps the content types and permissions while they are exactly what
the last full flush left. Otherwise, and for any other use, it is Django's own ``flush``.
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
        doomed = _with_referencing(connection, _holding_rows(connection, tables) - set(KEPT))
        if not doomed <= set(tables) - set(KEPT):  # Django's flush would fail: say so alike
            super().handle(**options)
            _after_full_flush[database] = _fingerprint(connection)
            return
        if doomed:
            statements = connection.ops.sql_flush(no_style(), sorted(doomed))
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


def _holding_rows(connection: Any, tables: list[str]) -> set[str]:
    """Which of ``tables`` hold at least one row: one statement."""
    if not tables:
        return set()
    query = sql.SQL(" UNION ALL ").join(
        sql.SQL("SELECT {} WHERE EXISTS (SELECT FROM {})").format(
            sql.Literal(table), sql.Identifier(table)
        )
        for table in tables
    )
    with connection.cursor() as cursor:
        cursor.execute(query)
        return {table for (table,) in cursor.fetchall()}


def _with_referencing(connection: Any, tables: set[str]) -> set[str]:
    """``tables`` and every table whose foreign keys lead to one of them: PostgreSQL refuses
    to truncate a table that a table left alone references, even an empty one."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT conrelid::regclass::text, confrelid::regclass::text "
            "FROM pg_constraint WHERE contype = 'f'"
        )
        edges = cursor.fetchall()
    found = set(tables)
    while True:
        more = {child for child, parent in edges if parent in found} - found
        if not more:
            return found
        found |= more
