"""``manage.py loud MEGABYTES``: prints that much to stdout and a line to stderr, for the
captured-output tests."""

from typing import Any

from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Print MEGABYTES of numbered lines to stdout, and one line to stderr."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("megabytes", type=float)

    def handle(self, *args: Any, **options: Any) -> None:
        self.stderr.write("loud: starting")
        line = "x" * 99
        for number in range(int(options["megabytes"] * 1_000_000 / 100)):
            self.stdout.write(f"{number:09d}{line[9:]}")
        self.stdout.write("loud: the end")
