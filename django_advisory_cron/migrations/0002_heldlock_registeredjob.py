from django.db import migrations, models

# Advisory locks of the current database with their backends. Keys are shown both as pg_locks
# stores them (unsigned oids) and as they were passed to pg_advisory_lock: two signed int4 when
# objsubid = 2, one bigint when objsubid = 1.
VIEW = """
CREATE OR REPLACE VIEW django_advisory_cron_heldlock AS
SELECT concat_ws(':', l.pid, l.classid, l.objid, l.objsubid, l.mode) AS id,
       l.pid,
       l.granted,
       l.mode,
       l.classid::bigint AS classid,
       l.objid::bigint AS objid,
       l.objsubid,
       CASE WHEN l.objsubid = 2 THEN
            (CASE WHEN l.classid::bigint >= 2147483648 THEN l.classid::bigint - 4294967296
                  ELSE l.classid::bigint END)::integer END AS key1,
       CASE WHEN l.objsubid = 2 THEN
            (CASE WHEN l.objid::bigint >= 2147483648 THEN l.objid::bigint - 4294967296
                  ELSE l.objid::bigint END)::integer END AS key2,
       CASE WHEN l.objsubid = 1 THEN (l.classid::bigint << 32) | l.objid::bigint END AS bigkey,
       l.waitstart,
       COALESCE(a.usename::text, '') AS usename,
       COALESCE(a.application_name, '') AS application_name,
       host(a.client_addr) AS client_addr,
       a.backend_start,
       a.xact_start,
       a.query_start,
       COALESCE(a.state, '') AS state,
       COALESCE(a.wait_event, '') AS wait_event,
       COALESCE(a.query, '') AS query
  FROM pg_locks AS l
  LEFT JOIN pg_stat_activity AS a ON a.pid = l.pid
 WHERE l.locktype = 'advisory'
   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""


def create_view(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(VIEW)


def drop_view(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP VIEW IF EXISTS django_advisory_cron_heldlock")


class Migration(migrations.Migration):

    dependencies = [
        ('django_advisory_cron', '0001_initial'),
    ]

    operations = [
        migrations.CreateModel(
            name='HeldLock',
            fields=[
                ('id', models.TextField(primary_key=True, serialize=False)),
                ('pid', models.IntegerField(verbose_name='pid')),
                ('granted', models.BooleanField(verbose_name='granted')),
                ('mode', models.TextField(verbose_name='mode')),
                ('classid', models.BigIntegerField(verbose_name='classid')),
                ('objid', models.BigIntegerField(verbose_name='objid')),
                ('objsubid', models.SmallIntegerField(verbose_name='objsubid')),
                ('key1', models.IntegerField(null=True, verbose_name='key 1')),
                ('key2', models.IntegerField(null=True, verbose_name='key 2')),
                ('bigkey', models.BigIntegerField(null=True, verbose_name='bigint key')),
                ('waitstart', models.DateTimeField(null=True, verbose_name='waiting since')),
                ('usename', models.TextField(blank=True, verbose_name='user')),
                ('application_name', models.TextField(blank=True, verbose_name='application name')),
                ('client_addr', models.GenericIPAddressField(null=True, verbose_name='client address')),
                ('backend_start', models.DateTimeField(null=True, verbose_name='connection started')),
                ('xact_start', models.DateTimeField(null=True, verbose_name='transaction started')),
                ('query_start', models.DateTimeField(null=True, verbose_name='query started')),
                ('state', models.TextField(blank=True, verbose_name='state')),
                ('wait_event', models.TextField(blank=True, verbose_name='wait event')),
                ('query', models.TextField(blank=True, verbose_name='current query')),
            ],
            options={
                'verbose_name': 'held lock',
                'verbose_name_plural': 'held locks',
                'db_table': 'django_advisory_cron_heldlock',
                'ordering': ['pid'],
                'permissions': [('terminate_backend', 'Can terminate a backend holding an advisory lock')],
                'managed': False,
                'default_permissions': ('view',),
            },
        ),
        migrations.CreateModel(
            name='RegisteredJob',
            fields=[
            ],
            options={
                'verbose_name': 'job',
                'verbose_name_plural': 'jobs',
                'proxy': True,
                'default_permissions': ('view',),
                'indexes': [],
                'constraints': [],
            },
            bases=('django_advisory_cron.jobrun',),
        ),
        migrations.RunPython(create_view, drop_view, elidable=False),
    ]
