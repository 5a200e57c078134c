"""``manage.py binary WHAT``: prints or raises text that PostgreSQL cannot store as it is, for
the tests of unstorable run text."""

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = "Print a NUL, every byte 0-255, or an undecodable file name; or raise with a NUL."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("what", choices=["nul", "bytes", "undecodable", "raise"])

    def handle(self, *args: Any, **options: Any) -> None:
        what = options["what"]
        if what == "nul":
            self.stdout.write("abc\x00def")
        elif what == "bytes":
            self.stdout.write("".join(map(chr, range(256))))
        elif what == "undecodable":
            self.stderr.write("skipped " + os.fsdecode(b"report-\xff.csv"))
        else:
            raise CommandError("bad\x00name")
