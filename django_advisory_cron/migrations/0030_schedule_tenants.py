from django.db import migrations, models


class Migration(migrations.Migration):
    """A schedule kept as data may run per tenant (django-tenants): ``per_tenant`` is ``*``
    for every tenant schema or the schemas joined by commas (empty: as its job does). The
    column has a database default, so a worker of the release before, reading the rows
    while this one migrates, is not disturbed; the claim is unchanged."""

    dependencies = [
        ("django_advisory_cron", "0029_buffered"),
    ]

    operations = [
        migrations.AddField(
            model_name="schedule",
            name="per_tenant",
            field=models.CharField(
                blank=True, db_default="", default="", max_length=500, verbose_name="tenants"
            ),
        ),
    ]
