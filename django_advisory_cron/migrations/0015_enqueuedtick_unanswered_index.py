from django.db import migrations, models


class Migration(migrations.Migration):
    """Claims still waiting for their task id: each claim of a job looks for those whose sender
    died."""

    dependencies = [
        ("django_advisory_cron", "0014_jobstate_schedule_reset"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="enqueuedtick",
            index=models.Index(
                condition=models.Q(("task_id", "")), fields=["job"], name="advisory_cron_unanswered"
            ),
        ),
    ]
