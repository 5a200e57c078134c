"""``manage.py race_ticks JOBS TICK``: run JOBS session-scoped scheduled jobs once each for one
tick, as one replica would; the pooling tests start several of these at once."""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from django_advisory_cron import locked_task
from tests.jobsapp.models import Marker


class Command(BaseCommand):
    help = "Race for the ticks of JOBS session-scoped jobs (a test helper)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("jobs", type=int)
        parser.add_argument("tick", type=datetime.fromisoformat)

    def handle(self, *args: Any, **options: Any) -> None:
        ran = 0
        for number in range(options["jobs"]):
            name = f"race_{number}"

            def body(name: str = name) -> None:
                Marker.objects.create(job=name, pid=os.getpid())

            job = locked_task(name=name, schedule="* * * * *", scope="session")(body)
            ran += job.run(now=options["tick"]).ran
        self.stdout.write(f"ran {ran}")
