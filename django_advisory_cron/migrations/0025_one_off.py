from django.db import migrations, models


class Migration(migrations.Migration):
    """A schedule may be a one-off (``at``, a moment: one tick) and may end after a number of
    runs (``max_runs``). A schedule has exactly one kind (a cron expression, an interval or a
    moment; an override may have none, and no moment); rows written before had one of the
    first two. The claim names the columns it reads of the run table only: unchanged."""

    dependencies = [
        ("django_advisory_cron", "0022_jobrun_backfill"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="schedule",
            name="advisory_cron_schedule_has_a_schedule",
        ),
        migrations.AddField(
            model_name="schedule",
            name="at",
            field=models.DateTimeField(blank=True, null=True, verbose_name="once at"),
        ),
        migrations.AddField(
            model_name="schedule",
            name="max_runs",
            field=models.PositiveIntegerField(blank=True, null=True, verbose_name="max runs"),
        ),
        migrations.AddConstraint(
            model_name="schedule",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(
                        models.Q(("cron", ""), _negated=True),
                        ("at__isnull", True),
                        ("every__isnull", True),
                    ),
                    models.Q(("at__isnull", True), ("cron", ""), ("every__isnull", False)),
                    models.Q(("at__isnull", False), ("cron", ""), ("every__isnull", True)),
                    models.Q(("at__isnull", True), ("override", True)),
                    _connector="OR",
                ),
                name="advisory_cron_schedule_one_kind",
            ),
        ),
        migrations.AddConstraint(
            model_name="schedule",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("max_runs__isnull", True), ("max_runs__gte", 1), _connector="OR"
                ),
                name="advisory_cron_schedule_max_runs_positive",
            ),
        ),
    ]
