from django.db import migrations, models


class Migration(migrations.Migration):
    """Business calendars: a schedule's ``calendar`` (empty: none), the dates operators add to
    a calendar's days (``CalendarDate``), and the ``skipped_calendar`` status of a tick its
    calendar skips, recorded (with RECORD_SKIPS) once per tick whichever replica writes it
    first. The claim's statements and function name no status of these: unchanged."""

    dependencies = [
        ("django_advisory_cron", "0027_overlap"),
    ]

    operations = [
        migrations.CreateModel(
            name="CalendarDate",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("calendar", models.CharField(max_length=200, verbose_name="calendar")),
                ("day", models.DateField(verbose_name="day")),
                (
                    "reason",
                    models.CharField(blank=True, default="", max_length=200, verbose_name="reason"),
                ),
            ],
            options={
                "verbose_name": "calendar date",
                "verbose_name_plural": "calendar dates",
                "ordering": ["calendar", "day"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("calendar", "day"), name="advisory_cron_one_date"
                    )
                ],
            },
        ),
        migrations.AddField(
            model_name="schedule",
            name="calendar",
            field=models.CharField(
                blank=True, db_default="", default="", max_length=200, verbose_name="calendar"
            ),
        ),
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
                ],
                max_length=20,
                verbose_name="status",
            ),
        ),
        migrations.AddConstraint(
            model_name="jobrun",
            constraint=models.UniqueConstraint(
                condition=models.Q(("status", "skipped_calendar")),
                fields=("job", "tick"),
                name="advisory_cron_one_calendar_skip",
            ),
        ),
    ]
