from django.db import migrations, models


class Migration(migrations.Migration):
    """A database schedule's lateness target (``NULL``: none). A nullable column without a
    default: PostgreSQL adds it without rewriting the table or holding its lock for long, and
    the triggers of 0010 fire on every row written, whatever its columns, so they need no
    change. Plain Django: the same on any database."""

    dependencies = [
        ("django_advisory_cron", "0016_claim_function"),
    ]

    operations = [
        migrations.AddField(
            model_name="schedule",
            name="late_after",
            field=models.FloatField(blank=True, null=True, verbose_name="late after (seconds)"),
        ),
    ]
