"""``manage.py marker LABEL [--note TEXT]``: one ``Marker`` row; the management command that
schedules declared in settings and kept in the database call in the tests."""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from tests.jobsapp.models import Marker


class Command(BaseCommand):
    help = "Write one Marker row named LABEL (a test helper)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("label")
        parser.add_argument("--note", default="")

    def handle(self, *args: Any, **options: Any) -> None:
        Marker.objects.create(job=options["label"], pid=os.getpid(), note=options["note"])
