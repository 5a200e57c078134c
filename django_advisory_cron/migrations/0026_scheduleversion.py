from django.db import migrations, models

from ._postgresql import PostgreSQLOnly

#: Every row written or deleted keeps a version: what the row holds after the change (NULL
#: once deleted; the columns the database or the writer stamps left out), numbered per name.
#: Who and why come from the transaction's settings advisory_cron.changed_by and
#: advisory_cron.change_note (jobs/versions.changing sets them); without them, the row's
#: changed_by when the write changed it, else the database user. A write that changes none of
#: the columns kept (an import run again) keeps no version. A rename is the old name's
#: removal and the new name's addition. Rows already there get their version 1 here.
TRIGGER = """
CREATE FUNCTION django_advisory_cron_schedule_version() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    stamped CONSTANT text[] := '{id,created,changed,changed_by}';
    was jsonb := CASE WHEN TG_OP <> 'INSERT' THEN to_jsonb(OLD) - stamped END;
    now_is jsonb := CASE WHEN TG_OP <> 'DELETE' THEN to_jsonb(NEW) - stamped END;
    who text := NULLIF(current_setting('advisory_cron.changed_by', true), '');
    why text := COALESCE(current_setting('advisory_cron.change_note', true), '');
BEGIN
    IF was IS NOT DISTINCT FROM now_is THEN
        RETURN NULL;
    END IF;
    IF who IS NULL AND (TG_OP = 'INSERT' OR TG_OP = 'UPDATE'
                                            AND NEW.changed_by IS DISTINCT FROM OLD.changed_by) THEN
        who := NULLIF(NEW.changed_by, '');
    END IF;
    who := left(COALESCE(who, 'database user ' || current_user), 150);
    IF TG_OP <> 'INSERT' AND (TG_OP = 'DELETE' OR OLD.name <> NEW.name) THEN
        INSERT INTO django_advisory_cron_scheduleversion
               (name, number, recorded, changed_by, note, state)
        SELECT OLD.name, COALESCE(max(number), 0) + 1, clock_timestamp(), who, why, NULL
          FROM django_advisory_cron_scheduleversion WHERE name = OLD.name;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO django_advisory_cron_scheduleversion
               (name, number, recorded, changed_by, note, state)
        SELECT NEW.name, COALESCE(max(number), 0) + 1, NEW.changed, who, why, now_is
          FROM django_advisory_cron_scheduleversion WHERE name = NEW.name;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER django_advisory_cron_schedule_version
    AFTER INSERT OR UPDATE OR DELETE ON django_advisory_cron_schedule
    FOR EACH ROW EXECUTE FUNCTION django_advisory_cron_schedule_version();
INSERT INTO django_advisory_cron_scheduleversion (name, number, recorded, changed_by, note, state)
SELECT name, 1, changed, changed_by, 'as it was when versions began',
       to_jsonb(s) - '{id,created,changed,changed_by}'::text[]
  FROM django_advisory_cron_schedule s;
"""

UNDO_TRIGGER = """
DROP TRIGGER django_advisory_cron_schedule_version ON django_advisory_cron_schedule;
DROP FUNCTION django_advisory_cron_schedule_version();
"""


class Migration(migrations.Migration):
    """Schedule versions: every change of a database schedule kept, with who, when and why,
    by a trigger, so that no path that writes the table can forget one."""

    dependencies = [
        ("django_advisory_cron", "0025_one_off"),
    ]

    operations = [
        migrations.CreateModel(
            name="ScheduleVersion",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=200, verbose_name="schedule")),
                ("number", models.PositiveIntegerField(verbose_name="version")),
                ("recorded", models.DateTimeField(verbose_name="recorded")),
                ("changed_by", models.CharField(blank=True, default="", max_length=150, verbose_name="changed by")),
                ("note", models.TextField(blank=True, default="", verbose_name="note")),
                ("state", models.JSONField(blank=True, null=True, verbose_name="state")),
            ],
            options={
                "verbose_name": "schedule version",
                "verbose_name_plural": "schedule versions",
                "ordering": ["name", "-number"],
                "default_permissions": (),
                "indexes": [models.Index(fields=["name", "recorded"], name="advisory_cron_version_recorded")],
                "constraints": [models.UniqueConstraint(fields=("name", "number"), name="advisory_cron_one_version")],
            },
        ),
        PostgreSQLOnly(TRIGGER, UNDO_TRIGGER),
    ]
