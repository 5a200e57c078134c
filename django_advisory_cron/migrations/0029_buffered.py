from django.db import migrations, models


class Migration(migrations.Migration):
    """Overlap policies buffer_one and buffer_all: a tick that found its job busy waits as a
    row of its own (status ``waiting``, no lease), once per tick whichever replicas found it
    busy. The claim function is unchanged: a waiting row takes no tick, and the tick's run is
    claimed as any run is."""

    dependencies = [
        ("django_advisory_cron", "0028_calendars"),
    ]

    operations = [
        migrations.AlterField(
            model_name="jobrun",
            name="status",
            field=models.CharField(
                choices=[
                    ("running", "running"),
                    ("succeeded", "succeeded"),
                    ("failed", "failed"),
                    ("skipped_locked", "skipped: locked by another process"),
                    ("skipped_tick", "skipped: already ran this tick"),
                    ("interrupted", "interrupted"),
                    ("lock_lost", "lock lost"),
                    ("timed_out", "timed out"),
                    ("skipped_paused", "skipped: paused"),
                    ("skipped_calendar", "skipped: calendar"),
                    ("waiting", "waiting: starts when the run going ends"),
                ],
                max_length=20,
                verbose_name="status",
            ),
        ),
        migrations.AddConstraint(
            model_name="jobrun",
            constraint=models.UniqueConstraint(
                condition=models.Q(status="waiting"),
                fields=("job", "tick"),
                name="advisory_cron_one_wait_per_tick",
            ),
        ),
    ]
