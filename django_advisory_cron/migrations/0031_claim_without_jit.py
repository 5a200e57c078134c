from django.db import migrations

from ..db.queries import QUERIES
from ._postgresql import PostgreSQLOnly


class Migration(migrations.Migration):
    """The claim function is never JIT-compiled (``create_claim`` in ``db/queries.sql`` says
    why: with a large run history, a server built with JIT compiled the claim on every run and
    skip). A database migrated before this has the function without the setting: it gets it
    here; a new one has it from 0016 and 0027 already."""

    dependencies = [
        ("django_advisory_cron", "0030_schedule_tenants"),
    ]

    operations = [
        PostgreSQLOnly(QUERIES["claim_without_jit"], QUERIES["claim_with_jit"]),
    ]
