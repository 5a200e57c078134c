from django.db import migrations, models

from ._postgresql import PostgreSQLOnly

#: Deleting an override (``cronjob reset``, the admin's "Reset to code" or delete, SQL)
#: records when, on the database's clock, in the job's state row.
TRIGGER = """
CREATE FUNCTION django_advisory_cron_schedule_reset() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO django_advisory_cron_jobstate
           (job, paused, paused_by, reason, run_requested_by, changed, schedule_reset)
    VALUES (OLD.name, false, '', '', '', now(), clock_timestamp())
    ON CONFLICT (job) DO UPDATE SET schedule_reset = EXCLUDED.schedule_reset;
    RETURN NULL;
END $$;
CREATE TRIGGER django_advisory_cron_schedule_reset
    AFTER DELETE ON django_advisory_cron_schedule
    FOR EACH ROW WHEN (OLD.override) EXECUTE FUNCTION django_advisory_cron_schedule_reset();
"""

UNDO_TRIGGER = """
DROP TRIGGER django_advisory_cron_schedule_reset ON django_advisory_cron_schedule;
DROP FUNCTION django_advisory_cron_schedule_reset();
"""


class Migration(migrations.Migration):
    """When a job's override was last deleted: a reset is a change of its schedule, and
    anchors its catch-up as the override's ``changed`` did."""

    dependencies = [
        ("django_advisory_cron", "0013_schedule_run_options"),
    ]

    operations = [
        migrations.AddField(
            model_name="jobstate",
            name="schedule_reset",
            field=models.DateTimeField(blank=True, null=True, verbose_name="schedule reset"),
        ),
        PostgreSQLOnly(TRIGGER, UNDO_TRIGGER),
    ]
