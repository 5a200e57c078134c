from django.db import migrations

from ..db.queries import QUERIES
from ._postgresql import PostgreSQLOnly


class Migration(migrations.Migration):
    """An index of the interrupted rows by ``(job, tick)``, and the claim function again, which
    probes it: an at-most-once claim looks for an interrupted run of its tick, and without the
    index it read every interrupted row of every job, so its cost followed the history's
    (``create_claim`` in ``db/queries.sql``). Built concurrently, as 0009's, so a large history
    goes on taking runs while it builds. Undone, the index goes and the function stays: it
    answers the same without the index, only slower."""

    atomic = False

    dependencies = [
        ("django_advisory_cron", "0031_claim_without_jit"),
    ]

    operations = [
        PostgreSQLOnly(
            QUERIES["create_interrupted_tick_index"], QUERIES["drop_interrupted_tick_index"]
        ),
        PostgreSQLOnly(QUERIES["create_claim"], migrations.RunSQL.noop),
    ]
