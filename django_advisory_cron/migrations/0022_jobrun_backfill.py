from django.db import migrations, models


class Migration(migrations.Migration):
    """A run started by ``cronjob backfill`` says so. The default lives in the database too, so
    adding the column rewrites no row of the history, and the claim, which names the columns it
    writes, needs no change."""

    dependencies = [
        ("django_advisory_cron", "0020_timeline"),
    ]

    operations = [
        migrations.AddField(
            model_name="jobrun",
            name="backfill",
            field=models.BooleanField(db_default=False, default=False, verbose_name="backfill"),
        ),
    ]
