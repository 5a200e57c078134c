from django.db import migrations

from ..db.queries import QUERIES
from ._postgresql import PostgreSQLOnly


class Migration(migrations.Migration):
    """The claim algorithm as a function of the database, so that the server plans a claim
    once per connection rather than on every call (``create_claim`` in ``db/queries.sql``
    says why). It installs the function as ``queries.sql`` has it when it runs: a later change
    to the function comes with a migration of its own that installs it again."""

    dependencies = [
        ("django_advisory_cron", "0015_enqueuedtick_unanswered_index"),
    ]

    operations = [
        PostgreSQLOnly(QUERIES["create_claim"], QUERIES["drop_claim"]),
    ]
