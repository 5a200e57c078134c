from django.db import migrations


class Migration(migrations.Migration):
    """The admin's Timeline page, a proxy of the run history with no table and no permission
    of its own (it is shown to whoever may see the Jobs page)."""

    dependencies = [
        ('django_advisory_cron', '0018_schedule_jitter'),
    ]

    operations = [
        migrations.CreateModel(
            name='Timeline',
            fields=[
            ],
            options={
                'verbose_name': 'timeline',
                'verbose_name_plural': 'timeline',
                'proxy': True,
                'default_permissions': (),
                'indexes': [],
                'constraints': [],
            },
            bases=('django_advisory_cron.jobrun',),
        ),
    ]
