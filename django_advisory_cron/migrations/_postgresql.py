"""A migration operation for what only PostgreSQL has (triggers in PL/pgSQL, ``pg_notify``).

A project that adds the app but migrates a SQLite database (its test settings, a developer's
laptop) gets the tables and none of these; the app's commands refuse to run there (check
``W002``), the rest of the project migrates and tests as before. The migration loader skips
modules whose name starts with an underscore, so this one is not taken for a migration.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations


class PostgreSQLOnly(migrations.RunSQL):
    """``RunSQL``, on PostgreSQL only."""

    def database_forwards(self, app_label: str, schema_editor: Any, *args: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            super().database_forwards(app_label, schema_editor, *args)

    def database_backwards(self, app_label: str, schema_editor: Any, *args: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, *args)
