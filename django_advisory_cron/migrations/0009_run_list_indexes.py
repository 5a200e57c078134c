from django.db import migrations

# Newest first over the whole history and within one status (the run list), and within one
# job and status (each job's last success, however long ago). Built CONCURRENTLY, so a large
# history goes on taking runs while they build.
INDEXES = {
    "advisory_cron_started": "(started, id)",
    "advisory_cron_status_started": "(status, started)",
    "advisory_cron_job_status_started": "(job, status, started, id)",
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
    """Indexes for the read side, so the admin's pages cost the same whatever the history's
    size: newest first (the run list's order, and the date drill-down's first and last run),
    newest first within one status (the status filter), and each job's last success (the Jobs
    page, ``cronstatus`` and the metrics), found at once for a job that has failed for weeks."""

    atomic = False

    dependencies = [
        ("django_advisory_cron", "0008_leased_index"),
    ]

    operations = [migrations.RunPython(create, drop)]
