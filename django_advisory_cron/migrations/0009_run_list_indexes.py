from django.db import migrations

# The run list's two orders: newest first over the whole history, and within one status. Built
# CONCURRENTLY, so a large history goes on taking runs while they build.
INDEXES = {
    "advisory_cron_started": "(started, id)",
    "advisory_cron_status_started": "(status, started)",
}


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for name, columns in INDEXES.items():
            schema_editor.execute(
                f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} "
                f"ON django_advisory_cron_jobrun {columns}"
            )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for name in INDEXES:
            schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")


class Migration(migrations.Migration):
    """Indexes for the admin's run list, so its pages cost the same whatever the history's
    size: newest first (the list's order, and the date drill-down's first and last run) and
    newest first within one status (the status filter)."""

    atomic = False

    dependencies = [
        ("django_advisory_cron", "0008_leased_index"),
    ]

    operations = [migrations.RunPython(create, drop)]
