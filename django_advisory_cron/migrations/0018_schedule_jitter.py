from django.db import migrations, models


class Migration(migrations.Migration):
    """A database schedule's jitter: each tick starts up to that many seconds after it (``NULL``:
    at its tick). A nullable column, on every database; the triggers of 0010 fire on every row
    written, whatever its columns, so they need no change."""

    dependencies = [
        ("django_advisory_cron", "0017_schedule_late_after"),
    ]

    operations = [
        migrations.AddField(
            model_name="schedule",
            name="jitter",
            field=models.FloatField(blank=True, null=True, verbose_name="jitter (seconds)"),
        ),
        migrations.AddConstraint(
            model_name="schedule",
            constraint=models.CheckConstraint(
                condition=models.Q(("jitter__isnull", True), ("jitter__gte", 0), _connector="OR"),
                name="advisory_cron_schedule_jitter_not_negative",
            ),
        ),
    ]
