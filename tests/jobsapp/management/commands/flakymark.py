"""``manage.py flakymark LABEL SUCCEED_AT``: one ``Marker`` row named LABEL per call, and a
failure until the ``SUCCEED_AT``-th of them: the command a database schedule retries in the
tests."""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tests.jobsapp.models import Marker


class Command(BaseCommand):
    help = "Write one Marker row named LABEL; fail until there are SUCCEED_AT (a test helper)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("label")
        parser.add_argument("succeed_at", type=int)

    def handle(self, *args: Any, **options: Any) -> None:
        label = options["label"]
        Marker.objects.create(job=label, pid=os.getpid())
        made = Marker.objects.filter(job=label).count()
        if made < options["succeed_at"]:
            raise CommandError(f"attempt {made} of {label} fails")
        self.stdout.write(f"{label} succeeded at attempt {made}")
