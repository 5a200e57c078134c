from pathlib import Path

from django.db import migrations, models

from ..db.queries import QUERIES
from ._postgresql import PostgreSQLOnly


class Migration(migrations.Migration):
    """Overlap policies: a database schedule's ``overlap`` and ``max_concurrent`` (empty and
    ``NULL``: skip, as before), and the claim function again, now with the run slots of a job
    that may run several times at once (``create_claim`` in ``db/queries.sql``). Its arguments
    changed, so the one 0016 installed is dropped first: a call must find one function.
    Undone, it installs that one again, as 0016 had it (``0016_claim.sql``)."""

    dependencies = [
        ("django_advisory_cron", "0026_scheduleversion"),
    ]

    operations = [
        migrations.AddField(
            model_name="schedule",
            name="overlap",
            field=models.CharField(
                blank=True, db_default="", default="", max_length=16, verbose_name="overlap policy"
            ),
        ),
        migrations.AddField(
            model_name="schedule",
            name="max_concurrent",
            field=models.PositiveSmallIntegerField(
                blank=True, null=True, verbose_name="max concurrent runs"
            ),
        ),
        PostgreSQLOnly(
            [QUERIES["drop_claim_without_slots"], QUERIES["create_claim"]],
            [
                QUERIES["drop_claim_with_slots"],
                (Path(__file__).parent / "0016_claim.sql").read_text(encoding="utf-8"),
            ],
        ),
    ]
