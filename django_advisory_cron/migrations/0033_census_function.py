from django.db import migrations

from ..db.queries import QUERIES
from ._postgresql import PostgreSQLOnly


class Migration(migrations.Migration):
    """A worker's census as a function (``create_census`` in ``db/queries.sql``), which its
    claims call: planned once per connection instead of at every claim."""

    dependencies = [
        ("django_advisory_cron", "0032_interrupted_tick_index"),
    ]

    operations = [
        PostgreSQLOnly(QUERIES["create_census"], QUERIES["drop_census"]),
    ]
