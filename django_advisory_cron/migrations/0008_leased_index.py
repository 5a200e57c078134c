from django.db import migrations, models


class Migration(migrations.Migration):
    """An index for the acquiring statements' "is a run of this job alive" test: rows whose
    lease has not expired, whatever their status (a ``lock_lost`` run's body may still run)."""

    dependencies = [
        ("django_advisory_cron", "0007_enqueuedtick"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="jobrun",
            index=models.Index(
                condition=models.Q(("lease_until__isnull", False)),
                fields=["job"],
                name="advisory_cron_leased",
            ),
        ),
    ]
